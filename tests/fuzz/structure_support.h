// What the structure-aware targets share: they build a file whose framing is valid (a header that
// parses, offsets that tile, checksums that match) from the fuzzer's bytes, so the hostile values the
// input chooses (shapes, dtypes, offsets, names, metadata) reach the code behind the JSON parser.
// Byte-level mutation of a JSON header rarely gets that far.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "base/json.h"

namespace hnas::fuzz {

// Raw bytes as valid UTF-8 (bytes above 0x7F become '?'): names and strings come from the input, and
// nlohmann's dump throws on invalid UTF-8, which no writer of a real file could have produced.
inline std::string valid_utf8(const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) out += c < 0x80 ? static_cast<char>(c) : '?';
    return out;
}

// A dimension: mostly small, often at the edges where counts wrap or cross hnas's limit
// (kMaxTensorElements is 2^36), sometimes a JSON value that is no dimension at all.
inline Json hostile_dimension(FuzzedDataProvider& input) {
    static constexpr uint64_t kEdges[] = {0,
                                          1,
                                          2,
                                          3,
                                          7,
                                          uint64_t{1} << 31,
                                          uint64_t{1} << 32,
                                          uint64_t{1} << 33,
                                          (uint64_t{1} << 36) - 1,
                                          uint64_t{1} << 36,
                                          (uint64_t{1} << 36) + 1,
                                          uint64_t{1} << 62,
                                          uint64_t{1} << 63,
                                          ~uint64_t{0}};
    switch (input.ConsumeIntegralInRange<int>(0, 5)) {
        case 0:
        case 1: return input.ConsumeIntegralInRange<uint64_t>(0, 8);
        case 2: return input.PickValueInArray(kEdges);
        case 3: return input.ConsumeIntegral<uint64_t>();
        case 4: return -input.ConsumeIntegralInRange<int64_t>(1, 1 << 20);
        default: return input.ConsumeBool() ? Json(input.ConsumeFloatingPoint<double>()) : Json(valid_utf8(input.ConsumeRandomLengthString(8)));
    }
}

// A shape of rank 0-4 and the product of its dimensions as the file's writer could have computed it:
// in 64-bit arithmetic that wraps, as an attacker crafting offsets to pass a size check would.
struct HostileShape {
    Json dims = Json::array();
    uint64_t wrapped_count = 1;
};

inline HostileShape hostile_shape(FuzzedDataProvider& input) {
    HostileShape shape;
    const int rank = input.ConsumeIntegralInRange<int>(0, 4);
    for (int i = 0; i < rank; ++i) {
        shape.dims.push_back(hostile_dimension(input));
        const Json& dim = shape.dims.back();
        shape.wrapped_count *= dim.is_number_integer() ? dim.get<uint64_t>() : 1;  // unsigned: wraps, as intended
    }
    return shape;
}

// Metadata values: strings, or any other JSON a file could hold there.
inline Json hostile_value(FuzzedDataProvider& input) {
    switch (input.ConsumeIntegralInRange<int>(0, 4)) {
        case 0: return valid_utf8(input.ConsumeRandomLengthString(24));
        case 1: return input.ConsumeIntegral<int64_t>();
        case 2: return input.ConsumeIntegral<uint64_t>();
        case 3: return input.ConsumeFloatingPoint<double>();
        default: return Json::array({valid_utf8(input.ConsumeRandomLengthString(8))});
    }
}

}  // namespace hnas::fuzz
