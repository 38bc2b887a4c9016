// One spelling of non-finite numbers in everything hnas prints: "nan", "inf" and "-inf". A NaN is never
// printed with a sign: its sign bit means nothing and differs between CPUs and code paths (an AMD Zen 5
// machine produced "-nan" where others produce "nan"), yet std::ostream, printf and fmt all print it.
// The rules that follow from it:
//   - HNAS_CHECK formats its floating-point arguments through portable() itself (tensor/check.h);
//   - fmt and spdlog lines pass floating-point values through portable(), which keeps the format spec
//     for finite values: spdlog::info("loss {:.4f}", portable(loss));
//   - floating-point values are never printed with printf or std::to_string;
//   - JSON (nlohmann::json::dump: metrics.jsonl, reports, checkpoint headers) holds a non-finite number
//     as null, since strict JSON has no NaN or infinity; readers such as Python's json take null.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace hnas {

// "nan", "inf" or "-inf" for a non-finite value; empty for a finite one.
inline std::string_view non_finite_spelling(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    return {};
}

// A floating-point value to print: finite values print as the stream or format spec says, non-finite
// ones in the spelling above (padded to the spec's width in fmt).
struct PortableNumber {
    double value;
};

inline PortableNumber portable(double value) { return PortableNumber{value}; }

// A duration as h:mm:ss (progress lines' elapsed time and ETA); "?" for a non-finite or negative one.
inline std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const auto total = static_cast<int64_t>(seconds);
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

inline std::ostream& operator<<(std::ostream& out, PortableNumber number) {
    if (std::isfinite(number.value)) return out << number.value;
    return out << non_finite_spelling(number.value);
}

}  // namespace hnas

// The spec ("{:.4f}", "{:>9.2f}", ...) applies as to a double; fmt itself spells non-finite values "nan",
// "inf" and "-inf" (not the C library), so only the sign of a NaN needs clearing.
template <>
struct fmt::formatter<hnas::PortableNumber> : fmt::formatter<double> {
    template <typename FormatContext>
    auto format(hnas::PortableNumber number, FormatContext& context) const -> decltype(context.out()) {
        return fmt::formatter<double>::format(std::isnan(number.value) ? std::fabs(number.value) : number.value, context);
    }
};
