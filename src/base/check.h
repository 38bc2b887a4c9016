// Error reporting for the whole library: HNAS_CHECK throws hnas::Error with a message built from
// its arguments. Checks stay on in release builds; they guard op boundaries and inputs, never inner loops.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "base/number_format.h"

namespace hnas {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Floating-point arguments print in hnas's one spelling of non-finite values (tensor/number_format.h).
template <typename T>
void append_to_message(std::ostringstream& out, const T& argument) {
    if constexpr (std::is_floating_point_v<T>) {
        out << portable(static_cast<double>(argument));
    } else {
        out << argument;
    }
}

template <typename... Args>
std::string concat_message(const Args&... args) {
    std::ostringstream out;
    (append_to_message(out, args), ...);
    return out.str();
}

}  // namespace hnas

#define HNAS_CHECK(condition, ...)                                      \
    do {                                                                \
        if (!(condition)) throw ::hnas::Error(::hnas::concat_message(__VA_ARGS__)); \
    } while (0)
