// The lookups over the generated tables of unicode_tables.cpp (see unicode_tables.h).
#include <algorithm>

#include "data/unicode_tables.h"

namespace hnas::data::unicode {

namespace {

bool in_ranges(const CodePointRange* ranges, size_t size, char32_t code_point) {
    const CodePointRange* end = ranges + size;
    const CodePointRange* after = std::upper_bound(ranges, end, code_point,
                                                   [](char32_t value, const CodePointRange& range) { return value < range.first; });
    return after != ranges && code_point <= (after - 1)->last;
}

constexpr char32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3;

}  // namespace

void append_folded(char32_t code_point, std::u32string& out) {
    if (code_point >= kHangulFirst && code_point <= kHangulLast) {
        // The Unicode standard's arithmetic decomposition of a Hangul syllable (Section 3.12).
        const char32_t index = code_point - kHangulFirst;
        out += static_cast<char32_t>(0x1100 + index / 588);
        out += static_cast<char32_t>(0x1161 + index % 588 / 28);
        if (index % 28 != 0) out += static_cast<char32_t>(0x11A7 + index % 28);
        return;
    }
    const FoldedCodePoint* end = kFolded + kFoldedSize;
    const FoldedCodePoint* found = std::lower_bound(kFolded, end, code_point,
                                                    [](const FoldedCodePoint& entry, char32_t value) { return entry.code_point < value; });
    if (found == end || found->code_point != code_point) {
        out += code_point;
        return;
    }
    out.append(kFoldedText + found->offset, found->length);
}

bool is_control(char32_t code_point) { return in_ranges(kControl, kControlSize, code_point); }

bool is_whitespace(char32_t code_point) {
    return code_point == ' ' || code_point == '\t' || code_point == '\n' || code_point == '\r' ||
           in_ranges(kWhitespace, kWhitespaceSize, code_point);
}

bool is_punctuation(char32_t code_point) {
    if ((code_point >= 33 && code_point <= 47) || (code_point >= 58 && code_point <= 64) ||
        (code_point >= 91 && code_point <= 96) || (code_point >= 123 && code_point <= 126)) {
        return true;
    }
    return in_ranges(kPunctuation, kPunctuationSize, code_point);
}

bool is_cjk(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace hnas::data::unicode
