// Fuzzes the safetensors reader behind its JSON parser: each input builds a file whose header is valid
// JSON with fuzzer-chosen tensors (names, dtypes, shapes at the edges of 64-bit arithmetic, offsets
// either tiled from the shapes' wrapped byte sizes or chosen outright) and metadata, then reads it as
// `hnas import-bert` does. A read may refuse the file with hnas::Error; a tensor it accepts must hold
// exactly the values its offsets cover, every one of them readable.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_support.h"
#include "io/safetensors.h"
#include "structure_support.h"

namespace {

using hnas::Json;

// The byte size of one element of a safetensors dtype the input picked; 0 for dtypes it does not define.
const char* const kDtypes[] = {"F32", "F16", "BF16", "I64", "F64", "", "f32"};
uint64_t element_bytes(const std::string& dtype) {
    if (dtype == "I64" || dtype == "F64") return 8;
    return dtype == "F32" ? 4 : dtype == "F16" || dtype == "BF16" ? 2 : 0;
}

std::string build_file(FuzzedDataProvider& input) {
    Json header = Json::object();
    uint64_t offset = 0;
    const int tensors = input.ConsumeIntegralInRange<int>(0, 4);
    for (int i = 0; i < tensors; ++i) {
        const std::string name = hnas::fuzz::valid_utf8(input.ConsumeRandomLengthString(12));
        const std::string dtype = input.PickValueInArray(kDtypes);
        const hnas::fuzz::HostileShape shape = hnas::fuzz::hostile_shape(input);
        uint64_t begin = offset, end = offset + shape.wrapped_count * (element_bytes(dtype) ? element_bytes(dtype) : 4);
        if (input.ConsumeBool()) {  // offsets chosen outright
            begin = input.ConsumeIntegral<uint64_t>() % 64;
            end = begin + input.ConsumeIntegral<uint64_t>() % 64;
        }
        offset = end;
        Json entry = {{"dtype", dtype}, {"shape", shape.dims}, {"data_offsets", {begin, end}}};
        if (input.ConsumeIntegralInRange<int>(0, 15) == 0) entry.erase(input.ConsumeBool() ? "dtype" : "shape");
        header[name] = entry;
    }
    if (input.ConsumeBool()) {
        Json metadata = Json::object();
        const int keys = input.ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < keys; ++i) metadata[hnas::fuzz::valid_utf8(input.ConsumeRandomLengthString(8))] = hnas::fuzz::hostile_value(input);
        header["__metadata__"] = input.ConsumeIntegralInRange<int>(0, 7) == 0 ? hnas::fuzz::hostile_value(input) : metadata;
    }
    const std::string text = header.dump();
    uint64_t header_size = text.size();
    if (input.ConsumeIntegralInRange<int>(0, 15) == 0) header_size = input.ConsumeIntegral<uint64_t>();
    std::string file(8, '\0');
    std::memcpy(file.data(), &header_size, 8);
    // The data: as many of the covered bytes as the input has left, up to 4 KiB (the rest is missing).
    const size_t data_bytes = static_cast<size_t>(std::min<uint64_t>(offset, 4096));
    std::string data = input.ConsumeBytesAsString(data_bytes);
    data.resize(input.ConsumeBool() ? data_bytes : data.size(), '\0');
    return file + text + data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider input(bytes, size);
    const std::string path = hnas::fuzz::write_scratch_file("fuzz.safetensors", build_file(input));
    hnas::fuzz::reject_only_with_hnas_errors([&] {
        const hnas::io::SafeTensors file = hnas::io::read_safetensors(path);
        for (const auto& [name, tensor] : file.tensors) {
            volatile float sum = 0;  // reads every value, so AddressSanitizer sees any short block
            for (int64_t i = 0; i < tensor.numel(); ++i) sum = sum + tensor.data()[i];
            if (tensor.numel() != hnas::shape_numel(tensor.shape())) std::abort();
        }
    });
    return 0;
}
