// Fuzzes the checkpoint reader behind its checksums and JSON parser: each input builds a checkpoint
// whose preamble and header checksums match and whose header is valid JSON, with fuzzer-chosen
// entries (names, dtypes, shapes at the edges of 64-bit arithmetic, offsets and lengths either laid
// out from the shapes' wrapped byte sizes or chosen outright, data checksummed) and metadata holding a
// training state of hostile values. It then does what `hnas train --resume` does with the file before
// any model sees it: loads it, fetches every entry, reads the training state and the tokenizer blob.
#include <cstdint>
#include <string>
#include <vector>

#include "base/hash.h"
#include "data/tokenizer.h"
#include "fuzz_support.h"
#include "io/checkpoint.h"
#include "structure_support.h"
#include "train/train_state.h"

namespace {

namespace io = hnas::io;
using hnas::Json;

uint64_t align_up(uint64_t offset) { return (offset + io::kCheckpointAlignment - 1) / io::kCheckpointAlignment * io::kCheckpointAlignment; }

void store(std::string& bytes, size_t at, uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes[at + static_cast<size_t>(i)] = static_cast<char>(value >> (8 * i));
}

// The training state's keys (train/train_state.h), each either well-formed or a hostile value.
Json hostile_state(FuzzedDataProvider& input) {
    auto number = [&]() -> Json { return input.ConsumeBool() ? Json(input.ConsumeIntegralInRange<int64_t>(0, 1000)) : hnas::fuzz::hostile_value(input); };
    Json rng = Json::array();
    const int words = input.ConsumeIntegralInRange<int>(3, 5);
    for (int i = 0; i < words; ++i) rng.push_back(input.ConsumeBool() ? Json(input.ConsumeIntegral<uint64_t>()) : hnas::fuzz::hostile_value(input));
    const Json position = {{"epoch", number()},    {"window", number()}, {"batch", number()},
                           {"examples", number()}, {"fingerprint", input.ConsumeBool() ? Json("0123456789abcdef") : hnas::fuzz::hostile_value(input)}};
    Json state = {{"step", number()},        {"optimizer_steps", number()}, {"schedule_offset", number()},
                  {"dropout_rng", rng},      {"data_position", position},   {"best_metric", input.ConsumeBool() ? Json() : number()},
                  {"stale_validations", number()}};
    if (input.ConsumeIntegralInRange<int>(0, 7) == 0) state.erase(state.begin());
    return state;
}

struct Entry {
    Json description;
    std::string data;  // the bytes the data section holds for it
};

std::string build_file(FuzzedDataProvider& input) {
    std::vector<Entry> entries;
    uint64_t end = 0;
    const int count = input.ConsumeIntegralInRange<int>(0, 4);
    static const char* const kDtypes[] = {"f32", "i32", "bytes", "f16"};
    for (int i = 0; i < count; ++i) {
        const std::string dtype = input.PickValueInArray(kDtypes);
        std::string name = input.ConsumeIntegralInRange<int>(0, 3) == 0 ? "tokenizer.model" : hnas::fuzz::valid_utf8(input.ConsumeRandomLengthString(12));
        hnas::fuzz::HostileShape shape = hnas::fuzz::hostile_shape(input);
        uint64_t offset = align_up(end), length = shape.wrapped_count * 4;
        if (dtype == "bytes") {
            length = input.ConsumeIntegralInRange<uint64_t>(0, 256);
            shape.dims = input.ConsumeIntegralInRange<int>(0, 3) == 0 ? Json::array({length + 1}) : Json::array({length});
        }
        if (input.ConsumeIntegralInRange<int>(0, 3) == 0) {  // layout chosen outright
            offset = input.ConsumeIntegral<uint64_t>() % 256;
            length = input.ConsumeIntegral<uint64_t>() % 256;
        }
        // Bytes that fit are written and checksummed; a longer entry makes a file its preamble overstates.
        std::string data = length <= 4096 ? input.ConsumeBytesAsString(static_cast<size_t>(length)) : std::string();
        if (length <= 4096) data.resize(static_cast<size_t>(length), '\0');
        const uint32_t crc = input.ConsumeIntegralInRange<int>(0, 15) == 0 ? input.ConsumeIntegral<uint32_t>() : hnas::crc32c(data.data(), data.size());
        entries.push_back({{{"name", name}, {"dtype", dtype}, {"shape", shape.dims}, {"offset", offset}, {"length", length}, {"crc32c", crc}},
                           std::move(data)});
        end = offset + length;
    }
    Json metadata = input.ConsumeBool() ? hostile_state(input) : Json::object();
    Json list = Json::array();
    for (const Entry& entry : entries) list.push_back(entry.description);
    const std::string header = Json{{"format_version", io::kCheckpointFormatVersion}, {"metadata", metadata}, {"entries", list}}.dump();

    std::string file(align_up(io::kCheckpointPreambleBytes + header.size()), '\0');
    std::copy(std::begin(io::kCheckpointMagic), std::end(io::kCheckpointMagic), file.begin());
    store(file, 8, io::kCheckpointFormatVersion, 4);
    store(file, 12, header.size(), 4);
    store(file, 16, input.ConsumeIntegralInRange<int>(0, 15) == 0 ? input.ConsumeIntegral<uint64_t>() : end, 8);
    store(file, 24, hnas::crc32c(header.data(), header.size()), 4);
    store(file, 28, hnas::crc32c(file.data(), 28), 4);
    file.replace(io::kCheckpointPreambleBytes, header.size(), header);
    const size_t data_start = file.size();
    for (const Entry& entry : entries) {
        const uint64_t offset = entry.description.at("offset").get<uint64_t>();
        if (offset > 65536 || entry.data.empty()) continue;
        if (file.size() < data_start + offset) file.resize(data_start + offset, '\0');
        file.replace(data_start + offset, std::min(entry.data.size(), file.size() - data_start - offset), entry.data);
    }
    return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider input(bytes, size);
    const std::string path = hnas::fuzz::write_scratch_file("fuzz.ckpt", build_file(input));
    std::optional<io::Checkpoint> checkpoint;
    hnas::fuzz::reject_only_with_hnas_errors([&] { checkpoint = io::Checkpoint::load(path); });
    if (!checkpoint) return 0;
    for (const io::EntryInfo& entry : checkpoint->entries()) {
        hnas::fuzz::must_succeed("fetching an entry the checkpoint lists", [&] {
            if (entry.type == io::EntryType::bytes) {
                (void)checkpoint->bytes(entry.name);
            } else {
                const hnas::Tensor tensor =
                    checkpoint->tensor(entry.name, entry.shape, entry.type == io::EntryType::f32 ? hnas::DType::f32 : hnas::DType::i32);
                if (tensor.numel() * 4 != static_cast<int64_t>(entry.length)) std::abort();
            }
        });
        if (entry.name == "tokenizer.model" && entry.type == io::EntryType::bytes) {
            hnas::fuzz::reject_only_with_hnas_errors([&] { (void)hnas::data::Tokenizer::from_serialized(checkpoint->bytes(entry.name)); });
        }
    }
    hnas::fuzz::reject_only_with_hnas_errors([&] { (void)hnas::train::load_state(checkpoint->metadata()); });
    return 0;
}
