// Error reporting for the whole library: HNAS_CHECK throws hnas::Error with a message built from
// its arguments. Checks stay on in release builds; they guard op boundaries and inputs, never inner loops.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hnas {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

template <typename... Args>
std::string concat_message(const Args&... args) {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
}

}  // namespace hnas

#define HNAS_CHECK(condition, ...)                                      \
    do {                                                                \
        if (!(condition)) throw ::hnas::Error(::hnas::concat_message(__VA_ARGS__)); \
    } while (0)
