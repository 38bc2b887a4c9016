#include "eval/squad_metrics.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "base/check.h"

namespace hnas::eval {

namespace {

constexpr std::string_view kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // Python's string.punctuation

bool is_word_byte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<std::string> tokens_of(std::string_view text) {
    std::vector<std::string> tokens;
    const std::string normalized = normalize_answer(text);
    size_t i = 0;
    while (i < normalized.size()) {
        const size_t space = normalized.find(' ', i);
        const size_t end = space == std::string::npos ? normalized.size() : space;
        if (end > i) tokens.emplace_back(normalized.substr(i, end - i));
        i = end + 1;
    }
    return tokens;
}

}  // namespace

std::string normalize_answer(std::string_view text) {
    // lower, then remove punctuation
    std::string kept;
    for (char c : text) {
        if (kPunctuation.find(c) != std::string_view::npos) continue;
        kept += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    // remove the articles as whole words (\b(a|an|the)\b): each becomes a space
    std::string without;
    for (size_t i = 0; i < kept.size();) {
        bool article = false;
        if (i == 0 || !is_word_byte(kept[i - 1])) {
            for (std::string_view word : {"the", "an", "a"}) {
                const size_t end = i + word.size();
                if (kept.compare(i, word.size(), word) == 0 && (end == kept.size() || !is_word_byte(kept[end]))) {
                    without += ' ';
                    i = end;
                    article = true;
                    break;
                }
            }
        }
        if (!article) without += kept[i++];
    }
    // collapse whitespace: ' '.join(text.split())
    std::string out;
    for (size_t i = 0; i < without.size();) {
        if (is_space(without[i])) {
            ++i;
            continue;
        }
        if (!out.empty()) out += ' ';
        while (i < without.size() && !is_space(without[i])) out += without[i++];
    }
    return out;
}

double exact_match(std::string_view prediction, std::string_view gold) {
    return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double answer_f1(std::string_view prediction, std::string_view gold) {
    const std::vector<std::string> predicted = tokens_of(prediction), expected = tokens_of(gold);
    if (predicted.empty() || expected.empty()) return predicted == expected ? 1.0 : 0.0;
    std::map<std::string, int64_t> counts;
    for (const std::string& token : expected) ++counts[token];
    int64_t same = 0;
    for (const std::string& token : predicted) {
        auto found = counts.find(token);
        if (found != counts.end() && found->second > 0) {
            --found->second;
            ++same;
        }
    }
    if (same == 0) return 0.0;
    const double precision = static_cast<double>(same) / static_cast<double>(predicted.size());
    const double recall = static_cast<double>(same) / static_cast<double>(expected.size());
    return 2.0 * precision * recall / (precision + recall);
}

SquadScores score_squad(const std::vector<std::vector<std::string>>& gold, const std::vector<std::string>& predictions) {
    HNAS_CHECK(gold.size() == predictions.size(), "squad scores: ", predictions.size(), " predictions for ", gold.size(),
               " questions");
    HNAS_CHECK(!gold.empty(), "squad scores: no questions");
    SquadScores scores;
    for (size_t q = 0; q < gold.size(); ++q) {
        const std::vector<std::string> answers = gold[q].empty() ? std::vector<std::string>{""} : gold[q];
        double exact = 0.0, f1 = 0.0;
        for (const std::string& answer : answers) {
            exact = std::max(exact, exact_match(predictions[q], answer));
            f1 = std::max(f1, answer_f1(predictions[q], answer));
        }
        scores.exact += exact;
        scores.f1 += f1;
        if (gold[q].empty()) {
            scores.no_answer_exact += exact;
            scores.no_answer_f1 += f1;
            ++scores.no_answer;
        } else {
            scores.has_answer_exact += exact;
            scores.has_answer_f1 += f1;
            ++scores.has_answer;
        }
    }
    scores.total = static_cast<int64_t>(gold.size());
    auto percent = [](double sum, int64_t count) { return count > 0 ? 100.0 * sum / static_cast<double>(count) : 0.0; };
    scores.exact = percent(scores.exact, scores.total);
    scores.f1 = percent(scores.f1, scores.total);
    scores.has_answer_exact = percent(scores.has_answer_exact, scores.has_answer);
    scores.has_answer_f1 = percent(scores.has_answer_f1, scores.has_answer);
    scores.no_answer_exact = percent(scores.no_answer_exact, scores.no_answer);
    scores.no_answer_f1 = percent(scores.no_answer_f1, scores.no_answer);
    return scores;
}

}  // namespace hnas::eval
