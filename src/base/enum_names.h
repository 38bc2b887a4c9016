// One {enumerator, "name"} table per enum, serving parsing, printing, error messages and --help. Each
// enum E declares its table beside itself and makes it findable by argument-dependent lookup:
//
//     enum class ScheduleKind { constant, linear, inverse_sqrt, cosine };
//     inline constexpr EnumName<ScheduleKind> kScheduleKindNames[]{
//         {ScheduleKind::constant, "constant"}, {ScheduleKind::linear, "linear"}, ...};
//     constexpr const auto& enum_names(ScheduleKind) { return kScheduleKindNames; }
//
// and every use checks at compile time that the table lists each enumerator once, in declaration order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace hnas {

template <class E>
struct EnumName {
    E value;
    const char* name;
};

namespace detail {

// Whether V is one of its enum's enumerators: GCC and Clang spell a template argument that is an
// enumerator by its name ("V = ns::E::name") and any other value of the type as a cast ("V = (ns::E)4").
template <auto V>
constexpr bool names_an_enumerator() {
    constexpr std::string_view signature = __PRETTY_FUNCTION__;
    return signature[signature.find("V = ") + 4] != '(';
}

// The table lists enumerators 0, 1, ..., N−1 in order, and N is not an enumerator: every one is listed.
template <class E, size_t N>
constexpr bool covers_enum(const EnumName<E> (&names)[N]) {
    for (size_t i = 0; i < N; ++i) {
        if (static_cast<size_t>(names[i].value) != i) return false;
    }
    return !names_an_enumerator<static_cast<E>(N)>();
}

}  // namespace detail

// E's table, checked.
template <class E>
constexpr const auto& names_of() {
    constexpr const auto& names = enum_names(E{});
    static_assert(detail::covers_enum(names), "the enum's name table must list every enumerator once, in order");
    return names;
}

template <class E>
const char* name_of(E value) {
    return names_of<E>()[static_cast<size_t>(value)].name;
}

// "a", "b" or "c" (for messages) and a|b|c (for --help).
template <class E>
std::string quoted_names(const char* last_separator = " or ") {
    const auto& names = names_of<E>();
    const size_t n = std::size(names);
    std::string text;
    for (size_t i = 0; i < n; ++i) {
        text.append(i == 0 ? "" : i + 1 == n ? last_separator : ", ").append("\"").append(names[i].name).append("\"");
    }
    return text;
}

template <class E>
std::vector<std::string> name_list() {
    std::vector<std::string> list;
    for (const auto& entry : names_of<E>()) list.emplace_back(entry.name);
    return list;
}

// The enumerator called `name`; `what` names the setting in the error, which lists the choices.
template <class E>
E parse_enum(std::string_view name, std::string_view what) {
    for (const auto& entry : names_of<E>()) {
        if (name == entry.name) return entry.value;
    }
    throw Error(concat_message(what, ": unknown value \"", name, "\"; expected ", quoted_names<E>()));
}

}  // namespace hnas
