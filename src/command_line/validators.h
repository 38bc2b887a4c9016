// Validators for the numeric options of hnas and hnas-bench. Their message states the option's real
// range, and CLI11 puts the option's name before it:
//   --beam: must be a positive integer, got 0
//   --hybrid-u: must be a number in [0, 1], got 1.5
// (CLI11's own PositiveNumber said "Value 0 not in range 0.000000 to 1.797…e308".) Each validator also
// rejects text that is not a number of the option's type, and numbers too large for that type, so the
// template argument is the type of the variable the option writes. Header-only: hnas-bench uses it too.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <concepts>
#include <limits>
#include <string>

#include "base/enum_names.h"

namespace hnas::command_line {

// An enum option's choices from the enum's name table (base/enum_names.h): each name becomes its
// enumerator, and any other value is an error listing the names ("--color: must be "auto", "always" or
// "never", got "sometimes"").
template <class E>
CLI::Validator enum_choices() {
    std::string names;
    for (const auto& entry : names_of<E>()) names.append(names.empty() ? "" : "|").append(entry.name);
    return CLI::Validator(
        [](std::string& value) -> std::string {
            for (const auto& entry : names_of<E>()) {
                if (value == entry.name) {
                    value = std::to_string(static_cast<int>(entry.value));  // CLI11 reads an enum as its number
                    return "";
                }
            }
            return "must be " + quoted_names<E>() + ", got \"" + value + "\"";
        },
        names);
}

namespace detail {

// A range in words: for messages ("a positive integer", "a number in [0, 1]") and, shorter, for the
// help beside the option's type ("INT:positive", "FLOAT:in [0, 1]").
struct RangeWords {
    std::string phrase, label;
};

template <std::integral T>
RangeWords describe_integers(T low, T high) {
    if (high != std::numeric_limits<T>::max()) {
        const std::string interval = fmt::format("in [{}, {}]", low, high);
        return {"an integer " + interval, interval};
    }
    if (low == 1) return {"a positive integer", "positive"};
    if (low == 0) return {"a non-negative integer", "non-negative"};
    return {fmt::format("an integer of at least {}", low), fmt::format("at least {}", low)};
}

// Bounds are finite: no option of hnas takes infinity.
inline RangeWords describe_numbers(double low, double high, bool exclude_low, double type_max) {
    if (high < type_max) {
        const std::string interval = fmt::format("in {}{}, {}]", exclude_low ? "(" : "[", low, high);
        return {"a number " + interval, interval};
    }
    if (low == 0 && exclude_low) return {"a positive number", "positive"};
    if (low == 0) return {"a non-negative number", "non-negative"};
    if (low == -type_max) return {"a finite number", "finite"};
    const std::string bound = fmt::format("{} {}", exclude_low ? "above" : "at least", low);
    return {"a number " + bound, bound};
}

}  // namespace detail

// Integers in [low, high], written into a T. Leading zeros are refused: CLI11 would read "010" as octal 8.
template <std::integral T>
CLI::Validator integer_in(T low, T high = std::numeric_limits<T>::max()) {
    const detail::RangeWords words = detail::describe_integers(low, high);
    auto check = [low, high, range = words.phrase](std::string& text) -> std::string {
        const std::string number = text.starts_with('+') ? text.substr(1) : text;
        const std::string digits = number.starts_with('-') ? number.substr(1) : number;
        if (digits.size() > 1 && digits.front() == '0') {
            return fmt::format("must be {} written without leading zeros, got {}", range, text);
        }
        T value{};
        const char* end = number.data() + number.size();
        const auto [stop, error] = std::from_chars(number.data(), end, value);
        const bool too_large = error == std::errc::result_out_of_range && !number.starts_with('-');
        if (too_large && high == std::numeric_limits<T>::max()) {
            return fmt::format("must be {} no larger than {}, got {}", range, high, text);
        }
        if (error != std::errc() || stop != end || value < low || value > high) {
            return fmt::format("must be {}, got {}", range, text);
        }
        return std::string();
    };
    return CLI::Validator(check, words.label, "integer range");
}

template <std::integral T>
CLI::Validator positive_integer() {
    return integer_in<T>(1);
}

template <std::integral T>
CLI::Validator non_negative_integer() {
    return integer_in<T>(0);
}

// Finite numbers in [low, high] (or (low, high] with exclude_low), written into a T.
template <std::floating_point T>
CLI::Validator number_in(double low, double high, bool exclude_low = false) {
    constexpr double type_max = std::numeric_limits<T>::max();
    const detail::RangeWords words = detail::describe_numbers(low, high, exclude_low, type_max);
    auto check = [low, high, exclude_low, range = words.phrase](std::string& text) -> std::string {
        char* stop = nullptr;
        const double value = std::strtod(text.c_str(), &stop);  // "1e999" reads as inf
        const bool parsed = !text.empty() && stop == text.c_str() + text.size();
        const bool in_range = std::isfinite(value) && (exclude_low ? value > low : value >= low) && value <= high;
        if (parsed && in_range) return std::string();
        if (parsed && std::fabs(value) > type_max && high == type_max) {
            return fmt::format("must be {} no larger in magnitude than {}, got {}", range, static_cast<T>(type_max), text);
        }
        return fmt::format("must be {}, got {}", range, text);
    };
    return CLI::Validator(check, words.label, "number range");
}

template <std::floating_point T>
CLI::Validator positive_number() {
    return number_in<T>(0, std::numeric_limits<T>::max(), true);
}

template <std::floating_point T>
CLI::Validator non_negative_number() {
    return number_in<T>(0, std::numeric_limits<T>::max());
}

template <std::floating_point T>
CLI::Validator finite_number() {
    return number_in<T>(-std::numeric_limits<T>::max(), std::numeric_limits<T>::max());
}

}  // namespace hnas::command_line
