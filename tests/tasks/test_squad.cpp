// Span extraction: SQuAD files and their features (src/data/squad_features.h), the official
// evaluation's exact match and F1 (src/eval/squad_metrics.h), and the best-span decision
// (src/tasks/span/span_task.h), against hand-worked cases.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/squad_features.h"
#include "eval/squad_metrics.h"
#include "tasks/span/span_task.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const std::string kTiny = std::string(HNAS_SOURCE_DIR) + "/tests/fixtures/squad/tiny.json";

const testing::ScratchWithTokenizer& scratch() {
    static const testing::ScratchWithTokenizer files("hnas_squad_test_");
    return files;
}

TEST(SquadMetrics, NormalizationAsTheOfficialScript) {
    EXPECT_EQ(eval::normalize_answer("The Eiffel Tower"), "eiffel tower");
    EXPECT_EQ(eval::normalize_answer("  an   apple, a day!  "), "apple day");
    EXPECT_EQ(eval::normalize_answer("Theatre"), "theatre");  // "the" only as a whole word
    EXPECT_EQ(eval::normalize_answer("U.S.-born"), "usborn");  // punctuation goes, joining the pieces
    EXPECT_EQ(eval::normalize_answer("the"), "");
    EXPECT_EQ(eval::exact_match("the Eiffel tower.", "Eiffel Tower"), 1.0);
    EXPECT_EQ(eval::exact_match("Eiffel", "Eiffel Tower"), 0.0);
}

TEST(SquadMetrics, TokenF1) {
    // prediction {eiffel, tower, paris}, gold {eiffel, tower}: precision 2/3, recall 1
    EXPECT_NEAR(eval::answer_f1("Eiffel Tower, Paris", "the Eiffel Tower"), 2 * (2.0 / 3) / (2.0 / 3 + 1), 1e-15);
    // repeated tokens count as a bag: {1, 1, 2} against {1}: one in common
    EXPECT_NEAR(eval::answer_f1("1 1 2", "1"), 2 * (1.0 / 3) * 1 / (1.0 / 3 + 1), 1e-15);
    EXPECT_EQ(eval::answer_f1("", ""), 1.0);
    EXPECT_EQ(eval::answer_f1("the", ""), 1.0);  // both normalize to nothing
    EXPECT_EQ(eval::answer_f1("whale", ""), 0.0);
    EXPECT_EQ(eval::answer_f1("whale", "ship"), 0.0);
}

TEST(SquadMetrics, TotalsTakeTheBestGoldAnswerAndSplitHasAnsNoAns) {
    const std::vector<std::vector<std::string>> gold = {{"Ishmael", "Call me Ishmael"}, {"a leg"}, {}, {}};
    const std::vector<std::string> predicted = {"me Ishmael", "leg", "", "Ahab"};
    const eval::SquadScores scores = eval::score_squad(gold, predicted);
    // q1: exact 0, F1 max(2·(1/2)·1/(1/2+1), 2·1·(2/3)/(1+2/3)) = 0.8; q2: exact 1 ("a" is an article), F1 1;
    // q3: no answer, predicted none: 1 and 1; q4: no answer, predicted one: 0 and 0.
    EXPECT_NEAR(scores.exact, 100.0 * 2 / 4, 1e-12);
    EXPECT_NEAR(scores.f1, 100.0 * (0.8 + 1 + 1 + 0) / 4, 1e-12);
    EXPECT_EQ(scores.has_answer, 2);
    EXPECT_NEAR(scores.has_answer_f1, 100.0 * 1.8 / 2, 1e-12);
    EXPECT_EQ(scores.no_answer, 2);
    EXPECT_NEAR(scores.no_answer_exact, 50.0, 1e-12);
    EXPECT_CONTAINS(error_of([] { eval::score_squad({{"a"}}, {}); }), "0 predictions for 1 questions");
}

TEST(SquadData, ReadsAndChecksTheFile) {
    const data::SquadFile file = data::read_squad(kTiny);
    ASSERT_EQ(file.examples.size(), 9u);
    EXPECT_TRUE(file.version_2);
    EXPECT_EQ(file.examples[1].answers[0].text, "the watery part of the world");
    EXPECT_TRUE(file.examples[2].answers.empty());
    EXPECT_EQ(file.examples[0].words.size(), 27u);

    const testing::ScratchWithTokenizer& files = scratch();
    auto error = [&](const std::string& name, const std::string& text) {
        const std::string path = files.write(name, text);
        return error_of([&] { data::read_squad(path); });
    };
    const std::string head = R"({"data": [{"paragraphs": [{"context": "Call me Ishmael.", "qas": [)";
    EXPECT_CONTAINS(error("start.json", head + R"({"id": "a", "question": "Who?", "answers": [{"text": "Ishmael", "answer_start": 7}]}]}]}]})"),
                    "start.json: data[0].paragraphs[0].qas[0].answers[0]: \"Ishmael\" is not the context at answer_start 7 "
                    "(the context there reads \" Ishmae\")");
    EXPECT_CONTAINS(error("type.json", head + R"({"id": "a", "question": 5, "answers": []}]}]}]})"),
                    "type.json: data[0].paragraphs[0].qas[0].question is number, expected a string");
    EXPECT_CONTAINS(error("twice.json", head + R"({"id": "a", "question": "Q", "answers": [], "is_impossible": true},
                                                  {"id": "a", "question": "Q", "answers": [], "is_impossible": true}]}]}]})"),
                    "twice.json: data[0].paragraphs[0].qas[1].id \"a\" is used twice");
    EXPECT_CONTAINS(error("none.json", head + R"({"id": "a", "question": "Q", "answers": []}]}]}]})"),
                    "none.json: data[0].paragraphs[0].qas[0] has no answers and is not marked is_impossible");
    EXPECT_CONTAINS(error("keys.json", R"({"data": [{"title": "x"}]})"), "keys.json: data[0] has no \"paragraphs\"");
    // answer_start counts characters, not bytes: "é" is two bytes.
    const std::string path = files.write(
        "utf8.json", R"({"data": [{"paragraphs": [{"context": "Café Ahab", "qas": [{"id": "a", "question": "Who?", "answers": [{"text": "Ahab", "answer_start": 5}]}]}]}]})");
    EXPECT_EQ(data::read_squad(path).examples[0].answers[0].start, 6);
}

TEST(SquadData, WindowsCoverTheContextAndPlaceTheAnswer) {
    const data::SquadFile file = data::read_squad(kTiny);
    const data::Tokenizer& tokenizer = scratch().tokenizer;
    data::SpanFeatureOptions options;
    options.max_seq = 24;
    options.doc_stride = 5;
    options.max_query = 6;
    const std::vector<data::SpanFeature> features = data::make_span_features(file, tokenizer, options);
    for (size_t e = 0; e < file.examples.size(); ++e) {
        const data::SquadExample& example = file.examples[e];
        // The context's pieces, to check each window against.
        std::vector<int32_t> pieces;
        for (const auto& [begin, end] : example.words) {
            for (int32_t id : tokenizer.encode(example.context.substr(begin, end - begin))) pieces.push_back(id);
        }
        std::vector<int> max_context_windows(pieces.size(), 0);
        size_t covered = 0;
        bool answer_placed = false;
        for (const data::SpanFeature& feature : features) {
            if (feature.example != static_cast<int64_t>(e)) continue;
            ASSERT_LE(static_cast<int64_t>(feature.ids.size()), options.max_seq);
            ASSERT_EQ(feature.ids.front(), data::kClsId);
            ASSERT_EQ(feature.ids.back(), data::kSepId);
            const auto query = static_cast<size_t>(std::find(feature.ids.begin() + 1, feature.ids.end(), data::kSepId) - feature.ids.begin()) - 1;
            ASSERT_LE(static_cast<int64_t>(query), options.max_query);
            const size_t offset = query + 2, length = feature.ids.size() - offset - 1;
            // windows start every doc_stride pieces and continue where the context is
            const size_t start = covered == 0 ? 0 : covered;
            ASSERT_TRUE(std::equal(feature.ids.begin() + static_cast<std::ptrdiff_t>(offset), feature.ids.end() - 1,
                                   pieces.begin() + static_cast<std::ptrdiff_t>(start)));
            for (size_t i = 0; i < length; ++i) max_context_windows[start + i] += feature.max_context[offset + i];
            covered = start + length >= pieces.size() ? pieces.size() : start + static_cast<size_t>(options.doc_stride);
            if (feature.start != 0) {
                ASSERT_GE(static_cast<size_t>(feature.start), offset);
                ASSERT_LE(feature.start, feature.end);
                // the answer's pieces spell the answer
                const std::vector<int32_t> spelled = tokenizer.encode(example.answers[0].text);
                EXPECT_TRUE(std::equal(feature.ids.begin() + feature.start, feature.ids.begin() + feature.end + 1, spelled.begin(), spelled.end()))
                    << example.id;
                answer_placed = true;
            } else {
                EXPECT_EQ(feature.end, 0);
            }
        }
        EXPECT_EQ(covered, pieces.size()) << example.id;
        for (int windows : max_context_windows) EXPECT_EQ(windows, 1) << example.id << ": every piece has one max-context window";
        EXPECT_EQ(answer_placed, !example.answers.empty()) << example.id;
    }
}

// One example "The cat sat on the mat" in one window: [CLS] q [SEP] The cat sat on the mat [SEP].
struct HandWindow {
    data::SquadFile file;
    std::vector<data::SpanFeature> features;
    HandWindow() {
        data::SquadExample example;
        example.id = "x";
        example.context = "The cat  sat on the mat";
        example.words = {{0, 3}, {4, 7}, {9, 12}, {13, 15}, {16, 19}, {20, 23}};
        file.examples = {example};
        data::SpanFeature feature;
        feature.word = {-1, -1, -1, 0, 1, 2, 3, 4, 5, -1};
        feature.max_context = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0};
        features = {feature};
    }
};

TEST(SpanAnswers, BestSpanRespectsLengthContextAndNullThreshold) {
    HandWindow hand;
    tasks::span::WindowLogits logits{{0, 9, 0, 0, 5, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 4, 0, 0, 0, 0}};
    // The question's piece 1 has the largest start logit but is no context: "cat sat" (5 + 4) wins,
    // keeping the context's own spacing.
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 30, 0.0), std::vector<std::string>({"cat  sat"}));
    // At most one piece: the best single piece is "cat" (5 + 0) against "sat" (1 + 4): a tie keeps the first.
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 1, 0.0), std::vector<std::string>({"cat"}));
    // SQuAD 2.0: null score 12 ([CLS] 6 + 6) against the best span's 9: no answer unless the threshold allows 3.
    hand.file.version_2 = true;
    logits.start[0] = logits.end[0] = 6;
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 30, 0.0), std::vector<std::string>({""}));
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 30, 3.0), std::vector<std::string>({"cat  sat"}));
    // A piece whose max context is another window cannot start an answer: "sat" (1 + 4), 7 below the null score.
    hand.features[0].max_context[4] = 0;
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 30, 7.5), std::vector<std::string>({"sat"}));
    EXPECT_EQ(tasks::span::best_answers(hand.file, hand.features, {logits}, 30, 6.5), std::vector<std::string>({""}));
}

}  // namespace
}  // namespace hnas
