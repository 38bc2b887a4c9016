#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/json.h"
#include "base/read_file.h"
#include "io/checkpoint.h"
#include "io/file_shape.h"

namespace hnas::io {

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian bytes");

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    int exponent = (h >> 10) & 0x1F;  // signed: a subnormal's normalization takes it below 0
    uint32_t mantissa = h & 0x3FF;
    if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000 | (mantissa << 13));  // inf, NaN
    if (exponent == 0) {
        if (mantissa == 0) return std::bit_cast<float>(sign);
        // subnormal: normalize (f32's exponent of it, exponent + 112, stays positive)
        exponent = 1;
        while ((mantissa & 0x400) == 0) {
            mantissa <<= 1;
            --exponent;
        }
        mantissa &= 0x3FF;
    }
    return std::bit_cast<float>(sign | (static_cast<uint32_t>(exponent + 112) << 23) | (mantissa << 13));
}

// The bytes of one element; 0 for a dtype safetensors does not define.
size_t dtype_size(const std::string& dtype) {
    static const std::map<std::string, size_t> sizes{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
                                                     {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}};
    const auto found = sizes.find(dtype);
    return found == sizes.end() ? 0 : found->second;
}

bool read_as_float(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

}  // namespace

SafeTensors read_safetensors(const std::string& path) {
    const std::string bytes = read_file(path, "safetensors file");
    HNAS_CHECK(bytes.size() >= 8, path, ": ", bytes.size(), " bytes, too short for a safetensors header length");
    uint64_t header_size = 0;
    std::memcpy(&header_size, bytes.data(), 8);
    HNAS_CHECK(header_size <= bytes.size() - 8, path, ": the header length ", header_size, " reaches beyond the file (",
               bytes.size(), " bytes)");
    const Json header = parse_json(std::string_view(bytes).substr(8, header_size), path + ": the safetensors header is not valid JSON:");
    HNAS_CHECK(header.is_object(), path, ": the safetensors header is not a JSON object");
    const size_t data_start = 8 + header_size, data_size = bytes.size() - data_start;
    SafeTensors out;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            HNAS_CHECK(entry.is_object(), path, ": __metadata__ is not an object");
            for (const auto& [key, value] : entry.items()) {
                HNAS_CHECK(value.is_string(), path, ": __metadata__.", key, " is not a string");
                out.metadata[key] = value.get<std::string>();
            }
            continue;
        }
        HNAS_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets"),
                   path, ": tensor ", name, " lacks dtype, shape or data_offsets");
        const std::string dtype = entry.at("dtype").is_string() ? entry.at("dtype").get<std::string>() : "";
        const size_t element = dtype_size(dtype);
        HNAS_CHECK(element > 0, path, ": tensor ", name, " has dtype ", entry.at("dtype").dump(),
                   ", which safetensors does not define; hnas reads F32, F16 and BF16 and lists integer tensors");
        HNAS_CHECK(dtype != "F64", path, ": tensor ", name, " has dtype F64; hnas reads F32, F16 and BF16");
        const std::string tensor_name = path + ": tensor " + name;
        const Shape shape = read_shape(entry.at("shape"), tensor_name);
        const int64_t count = shape_numel(shape);
        const Json& offsets = entry.at("data_offsets");
        HNAS_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                   path, ": tensor ", name, " has data_offsets ", offsets.dump());
        const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
        HNAS_CHECK(begin <= end && end <= data_size, path, ": tensor ", name, " has data_offsets [", begin, ", ", end,
                   "] outside the ", data_size, " data bytes");
        // count * element cannot overflow: read_shape bounds count by kMaxTensorElements.
        HNAS_CHECK(end - begin == static_cast<uint64_t>(count) * element, tensor_name, " of shape ", shape_str(shape),
                   " and dtype ", dtype, " needs ", static_cast<uint64_t>(count) * element, " bytes, its offsets give ", end - begin);
        ranges.emplace_back(begin, end);
        if (!read_as_float(dtype)) {
            out.not_read.emplace(name, dtype);
            continue;
        }
        Tensor tensor = Tensor::empty(shape);
        const char* from = bytes.data() + data_start + begin;
        for (int64_t i = 0; i < count; ++i) {
            if (dtype == "F32") {
                std::memcpy(tensor.data() + i, from + 4 * i, 4);
            } else {
                uint16_t value = 0;
                std::memcpy(&value, from + 2 * i, 2);
                tensor.data()[i] = dtype == "F16" ? half_to_float(value) : std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
            }
        }
        out.tensors.emplace(name, std::move(tensor));  // JSON objects cannot repeat a key: parse_json keeps one
    }
    std::sort(ranges.begin(), ranges.end());
    uint64_t covered = 0;
    for (const auto& [begin, end] : ranges) {
        HNAS_CHECK(begin == covered, path, ": the tensors' bytes ", begin < covered ? "overlap" : "leave a hole", " at data byte ",
                   std::min(begin, covered));
        covered = end;
    }
    HNAS_CHECK(covered == data_size, path, ": ", data_size - covered, " data bytes after the last tensor belong to none");
    return out;
}

void write_safetensors(const std::string& path, const SafeTensors& contents) {
    Json header = Json::object();
    if (!contents.metadata.empty()) {
        Json metadata = Json::object();
        for (const auto& [key, value] : contents.metadata) metadata[key] = value;
        header["__metadata__"] = metadata;
    }
    uint64_t offset = 0;
    for (const auto& [name, tensor] : contents.tensors) {
        HNAS_CHECK(tensor.dtype() == DType::f32, "safetensors ", path, ": tensor ", name, " is not f32");
        const uint64_t size = static_cast<uint64_t>(tensor.numel()) * 4;
        header[name] = {{"dtype", "F32"}, {"shape", tensor.shape()}, {"data_offsets", {offset, offset + size}}};
        offset += size;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as Hugging Face writes it
    std::string file(8, '\0');
    const uint64_t header_size = text.size();
    std::memcpy(file.data(), &header_size, 8);
    file += text;
    for (const auto& [name, tensor] : contents.tensors) {
        file.append(reinterpret_cast<const char*>(tensor.data()), static_cast<size_t>(tensor.numel()) * 4);
    }
    write_file_atomically(path, file);
}

}  // namespace hnas::io
