// SQuAD's exact match and F1 as the official evaluation script (evaluate-v2.0.py, which also scores
// 1.1) computes them: both answers normalized (lower case, punctuation of Python's string.punctuation
// removed, the articles a / an / the removed as whole words, whitespace collapsed); F1 over the bag of
// normalized tokens, 1 when both are empty and 0 when one is; per question the best over its gold
// answers, an unanswerable question's gold answer being "". Two simplifications, both exact on ASCII
// text: lower-casing is ASCII only, and every non-ASCII character counts as a letter for the
// article's word boundaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hnas::eval {

std::string normalize_answer(std::string_view text);
double exact_match(std::string_view prediction, std::string_view gold);  // 0 or 1
double answer_f1(std::string_view prediction, std::string_view gold);

// Percentages as the script reports them: over all questions, and over those with (HasAns) and
// without (NoAns) gold answers.
struct SquadScores {
    double exact = 0.0, f1 = 0.0;
    int64_t total = 0;
    double has_answer_exact = 0.0, has_answer_f1 = 0.0;
    int64_t has_answer = 0;
    double no_answer_exact = 0.0, no_answer_f1 = 0.0;
    int64_t no_answer = 0;
};

// gold[i]: the gold answers of question i (empty: unanswerable); predictions[i]: its predicted answer.
SquadScores score_squad(const std::vector<std::vector<std::string>>& gold, const std::vector<std::string>& predictions);

}  // namespace hnas::eval
