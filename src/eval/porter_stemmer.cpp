// Porter stemmer and WordNet exception lookup, reproducing ROUGE-1.5.5's `-m` stemming.
//
// ROUGE's stemmer is Martin Porter's Perl implementation of the 1980 algorithm, written with
// regular expressions. Where that implementation and the paper could disagree, this file follows
// the Perl's behaviour, because the goal is ROUGE's numbers:
// - A leading 'y' is uppercased during stemming, so it always counts as a consonant.
// - "m" (the number of vowel-consonant sequences) follows Porter's definition of a vowel: a, e, i,
//   o, u, and y when it follows a consonant. The Perl regexes allow a y either reading, but since
//   each y starts a new run and runs must alternate, only Porter's reading can match.
// - The *o condition (stem is consonant-vowel-consonant, last not w, x, y) is tested on the whole
//   stem: one leading consonant run, exactly one vowel, one final consonant.
// - Every step tries only the longest listed suffix that ends the word; if its condition fails the
//   step does nothing (no fall-back to a shorter suffix).
// - Step 4 was changed by ROUGE's author in 2004: -ement is in the main suffix list, and -ment,
//   then -ent (or else -sion/-tion), are tried afterwards on whatever the first rule left.
#include "eval/porter_stemmer.h"

#include <array>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/check.h"

namespace hnas::eval {
namespace {

bool is_strict_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

bool ends_with(const std::string& w, std::string_view suffix) {
    return w.size() >= suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Porter's consonant test: y is a consonant at the start or after a vowel. Anything that is not
// a letter (digits) is a consonant, as in the Perl character classes.
bool is_consonant(std::string_view s, size_t i) {
    if (is_strict_vowel(s[i])) return false;
    if (s[i] != 'y') return true;
    return i == 0 || !is_consonant(s, i - 1);
}

// m in Porter's [C](VC)^m[V].
int measure(std::string_view s) {
    int m = 0;
    for (size_t i = 1; i < s.size(); ++i)
        if (is_consonant(s, i) && !is_consonant(s, i - 1)) ++m;
    return m;
}

bool contains_vowel(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i)
        if (!is_consonant(s, i)) return true;
    return false;
}

// ROUGE's *o test, anchored at both ends: consonant run, one vowel (y included), final consonant
// that is not a vowel, w, x or y.
bool is_cvc_word(std::string_view s) {
    const size_t n = s.size();
    if (n < 3 || is_strict_vowel(s[0])) return false;
    for (size_t i = 1; i + 2 < n; ++i)
        if (is_strict_vowel(s[i]) || s[i] == 'y') return false;
    const char v = s[n - 2];
    const char last = s[n - 1];
    const bool vowel_ok = is_strict_vowel(v) || v == 'y';
    const bool last_ok = !is_strict_vowel(last) && last != 'w' && last != 'x' && last != 'y';
    return vowel_ok && last_ok;
}

bool ends_double_consonant(std::string_view s) {
    const size_t n = s.size();
    if (n < 2 || s[n - 1] != s[n - 2]) return false;
    const char c = s[n - 1];
    return !is_strict_vowel(c) && c != 'y' && c != 'l' && c != 's' && c != 'z';
}

struct SuffixRule {
    std::string_view suffix;
    std::string_view replacement;
};

// The longest suffix of `rules` that ends `w`, or nullptr.
template <size_t N>
const SuffixRule* longest_suffix(const std::string& w, const std::array<SuffixRule, N>& rules) {
    const SuffixRule* best = nullptr;
    for (const SuffixRule& rule : rules)
        if (ends_with(w, rule.suffix) && (best == nullptr || rule.suffix.size() > best->suffix.size()))
            best = &rule;
    return best;
}

constexpr std::array<SuffixRule, 21> kStep2 = {{
    {"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"},   {"anci", "ance"},   {"izer", "ize"},
    {"bli", "ble"},     {"alli", "al"},     {"entli", "ent"},   {"eli", "e"},       {"ousli", "ous"},
    {"ization", "ize"}, {"ation", "ate"},   {"ator", "ate"},    {"alism", "al"},    {"iveness", "ive"},
    {"fulness", "ful"}, {"ousness", "ous"}, {"aliti", "al"},    {"iviti", "ive"},   {"biliti", "ble"},
    {"logi", "log"},
}};

constexpr std::array<SuffixRule, 7> kStep3 = {{
    {"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"}, {"ical", "ic"}, {"ful", ""}, {"ness", ""},
}};

constexpr std::array<SuffixRule, 16> kStep4 = {{
    {"al", ""},  {"ance", ""}, {"ence", ""}, {"er", ""},  {"ic", ""},  {"able", ""}, {"ible", ""}, {"ant", ""},
    {"ement", ""}, {"ou", ""}, {"ism", ""},  {"ate", ""}, {"iti", ""}, {"ous", ""},  {"ive", ""},  {"ize", ""},
}};

std::string without_suffix(const std::string& w, size_t suffix_len) { return w.substr(0, w.size() - suffix_len); }

// Drops `suffix` from w when w ends in it and what remains has m > 1.
void strip_if_m_gt_1(std::string& w, std::string_view suffix) {
    if (!ends_with(w, suffix)) return;
    std::string stem = without_suffix(w, suffix.size());
    if (measure(stem) > 1) w = std::move(stem);
}

}  // namespace

std::string porter_stem(std::string_view word) {
    std::string w(word);
    if (w.size() < 3) return w;
    const bool initial_y = w[0] == 'y';
    if (initial_y) w[0] = 'Y';

    // Step 1a: plurals.
    if (ends_with(w, "sses") || ends_with(w, "ies")) {
        w.resize(w.size() - 2);
    } else if (w.size() >= 2 && w.back() == 's' && w[w.size() - 2] != 's') {
        w.pop_back();
    }

    // Step 1b: -eed, -ed, -ing. A word in -eed never reaches the -ed rule, even when m = 0.
    if (ends_with(w, "eed")) {
        if (measure(without_suffix(w, 3)) > 0) w.pop_back();
    } else if (ends_with(w, "ed") || ends_with(w, "ing")) {
        std::string stem = without_suffix(w, ends_with(w, "ed") ? 2 : 3);
        if (contains_vowel(stem)) {
            w = std::move(stem);
            if (ends_with(w, "at") || ends_with(w, "bl") || ends_with(w, "iz")) {
                w += 'e';
            } else if (ends_double_consonant(w)) {
                w.pop_back();
            } else if (is_cvc_word(w)) {
                w += 'e';
            }
        }
    }

    // Step 1c: terminal y -> i when the stem has a vowel.
    if (!w.empty() && w.back() == 'y') {
        std::string stem = without_suffix(w, 1);
        if (contains_vowel(stem)) w = stem + 'i';
    }

    // Steps 2 and 3: map double suffixes to single ones when m > 0.
    if (const SuffixRule* rule = longest_suffix(w, kStep2)) {
        std::string stem = without_suffix(w, rule->suffix.size());
        if (measure(stem) > 0) w = stem + std::string(rule->replacement);
    }
    if (const SuffixRule* rule = longest_suffix(w, kStep3)) {
        std::string stem = without_suffix(w, rule->suffix.size());
        if (measure(stem) > 0) w = stem + std::string(rule->replacement);
    }

    // Step 4 (ROUGE's variant, see the file comment): remove a suffix when m > 1.
    if (const SuffixRule* rule = longest_suffix(w, kStep4)) strip_if_m_gt_1(w, rule->suffix);
    strip_if_m_gt_1(w, "ment");
    if (ends_with(w, "ent")) {
        strip_if_m_gt_1(w, "ent");
    } else if (ends_with(w, "sion") || ends_with(w, "tion")) {
        std::string stem = without_suffix(w, 3);  // keeps the s or t
        if (measure(stem) > 1) w = std::move(stem);
    }

    // Step 5: final -e, and -ll -> -l. The -ll test measures the whole word, as ROUGE does.
    if (!w.empty() && w.back() == 'e') {
        std::string stem = without_suffix(w, 1);
        const int m = measure(stem);
        if (m > 1 || (m == 1 && !is_cvc_word(stem))) w = std::move(stem);
    }
    if (ends_with(w, "ll") && measure(w) > 1) w.pop_back();

    if (initial_y) w[0] = 'y';
    return w;
}

WordNetExceptions::WordNetExceptions(const std::string& dir) {
    // ROUGE's table was built from the files in this order; a word listed in several files keeps
    // the entry read last (e.g. "best" is "well" in adv.exc but "good" in adj.exc -> "good").
    for (const char* name : {"adv.exc", "adj.exc", "noun.exc", "verb.exc"}) {
        const std::string path = dir + "/" + name;
        std::ifstream in(path);
        HNAS_CHECK(in, "cannot open WordNet exception list: ", path);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string inflected, base;
            // Only the first base form counts ("axes ax axis" -> "ax").
            if (fields >> inflected >> base) table_[inflected] = base;
        }
    }
}

const std::string* WordNetExceptions::find(std::string_view word) const {
    auto it = table_.find(std::string(word));
    return it == table_.end() ? nullptr : &it->second;
}

std::string MorphStemmer::stem(std::string_view token) const {
    std::string lower(token);
    for (char& c : lower)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (const std::string* base = exceptions_.find(lower)) return *base;
    return porter_stem(lower);
}

}  // namespace hnas::eval
