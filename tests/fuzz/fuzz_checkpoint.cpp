// Fuzzes the checkpoint reader: the input is a checkpoint file, loaded as --resume and decoding do
// (which runs the layout checks `hnas inspect` runs, then reads and checks every entry), each entry
// fetched, and verified as checkpoint rotation does. A mutated file rarely passes the preamble and
// header checksums, so each input whose checksums do not match is loaded a second time with those two
// checksums recomputed: that lets the fuzzer reach the header's JSON and the entry layout checks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "fuzz_support.h"

namespace {

namespace io = hnas::io;

void store_u32(std::string& bytes, size_t at, uint32_t value) {
    for (size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
}

uint32_t load_u32(const std::string& bytes, size_t at) {
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    return value;
}

// The file with the header checksum (of as much header as the file holds) and the preamble checksum
// made to match; offsets as documented in io/checkpoint.h.
std::string with_checksums_repaired(std::string bytes) {
    if (bytes.size() < io::kCheckpointPreambleBytes) return bytes;
    const size_t header_length = std::min<size_t>(load_u32(bytes, 12), bytes.size() - io::kCheckpointPreambleBytes);
    store_u32(bytes, 24, hnas::crc32c(bytes.data() + io::kCheckpointPreambleBytes, header_length));
    store_u32(bytes, 28, hnas::crc32c(bytes.data(), 28));
    return bytes;
}

// Every entry a loaded checkpoint lists must be there as listed: anything else is a finding.
void fetch_every_entry(const io::Checkpoint& checkpoint) {
    hnas::fuzz::must_succeed("fetching the entries of a loaded checkpoint", [&] {
        for (const io::EntryInfo& entry : checkpoint.entries()) {
            if (entry.type == io::EntryType::bytes) {
                (void)checkpoint.bytes(entry.name);
            } else {
                (void)checkpoint.tensor(entry.name, entry.shape,
                                        entry.type == io::EntryType::f32 ? hnas::DType::f32 : hnas::DType::i32);
            }
        }
    });
}

// Loads the file as --resume and decoding do, and verifies it as checkpoint rotation does before it
// counts a checkpoint as good: the two must agree, or rotation could keep a file that cannot be
// resumed from (or set aside one that can).
void load_as_hnas_does(const std::string& bytes) {
    const std::string path = hnas::fuzz::write_scratch_file("fuzz.ckpt", bytes);
    std::optional<io::Checkpoint> checkpoint;
    hnas::fuzz::reject_only_with_hnas_errors([&] { checkpoint = io::Checkpoint::load(path); });
    bool verified = false;
    hnas::fuzz::reject_only_with_hnas_errors([&] {
        io::verify_checkpoint(path);
        verified = true;
    });
    if (verified != checkpoint.has_value()) {
        std::fprintf(stderr, "finding: verify_checkpoint %s the file but Checkpoint::load %s it\n",
                     verified ? "accepts" : "rejects", checkpoint ? "accepts" : "rejects");
        std::abort();
    }
    if (!checkpoint) return;
    (void)checkpoint->metadata().dump();
    fetch_every_entry(*checkpoint);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    load_as_hnas_does(bytes);
    const std::string repaired = with_checksums_repaired(bytes);
    if (repaired != bytes) load_as_hnas_does(repaired);
    return 0;
}
