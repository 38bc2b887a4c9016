// Fine-tuning classification data (GLUE-style TSV, src/data/glue.h) and GLUE's metrics
// (src/eval/glue_metrics.h), against hand-worked cases.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/glue.h"
#include "eval/glue_metrics.h"
#include "same_tensor.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using data::ClassificationBatcher;
using data::ClassificationDataOptions;
using data::LabelSpace;
using data::TsvLayout;
using testing::error_of;

const testing::ScratchWithTokenizer& scratch() {
    static const testing::ScratchWithTokenizer files("hnas_glue_test_");
    return files;
}

const std::string kPairs =
    "id\tfirst\tsecond\tlabel\n"
    "1\tCall me Ishmael.\tSome years ago.\tyes\n"
    "2\tThe whale!\tA ship.\tno\n"
    "3\tNever mind how long.\tPrecisely.\tyes\n";

TEST(GlueData, ReadsPairsWithAHeaderAndGivenLabels) {
    const std::string path = scratch().write("pairs.tsv", kPairs);
    const auto examples = data::read_classification_file(path, {1, 2, 3, true}, {false, {"no", "yes"}}, true, DamagedLines::reject);
    ASSERT_EQ(examples.size(), 3u);
    EXPECT_EQ(examples[0].text_a, "Call me Ishmael.");
    EXPECT_EQ(examples[0].text_b, "Some years ago.");
    EXPECT_EQ(examples[0].label, 1);
    EXPECT_EQ(examples[1].label, 0);
    EXPECT_EQ(examples[2].line, 4);
    EXPECT_EQ(data::collect_label_names(path, {1, 2, 3, true}, DamagedLines::reject), std::vector<std::string>({"yes", "no"}));
}

TEST(GlueData, ReadsSingleTextsWithoutAHeaderAndRegressionTargets) {
    const std::string path = scratch().write("scores.tsv", "3.5\tA fine day.\n-1e-2\tRain.\n");
    const auto examples = data::read_classification_file(path, {1, -1, 0, false}, {true, {}}, true, DamagedLines::reject);
    ASSERT_EQ(examples.size(), 2u);
    EXPECT_EQ(examples[0].text_a, "A fine day.");
    EXPECT_FLOAT_EQ(examples[0].target, 3.5f);
    EXPECT_FLOAT_EQ(examples[1].target, -0.01f);
}

TEST(GlueData, ErrorsNameFileAndLine) {
    const testing::ScratchWithTokenizer& files = scratch();
    const TsvLayout layout{1, 2, 3, true};
    const LabelSpace classes{false, {"no", "yes"}};
    auto error = [&](const std::string& name, const std::string& text, const LabelSpace& labels) {
        const std::string path = files.write(name, text);
        return error_of([&] { data::read_classification_file(path, layout, labels, true, DamagedLines::reject); });
    };
    EXPECT_CONTAINS(error("columns.tsv", kPairs + "4\tonly three\tcolumns\n", classes),
                    "columns.tsv:5: 3 tab-separated columns, but the header has 4");
    EXPECT_CONTAINS(error("label.tsv", kPairs + "4\tA\tB\tmaybe\n", classes),
                    "label.tsv:5: unknown label \"maybe\" (the labels are \"no\", \"yes\")");
    EXPECT_CONTAINS(error("empty.tsv", kPairs + "4\t \tB\tno\n", classes), "empty.tsv:5: the text in column 1 is empty");
    EXPECT_CONTAINS(error("target.tsv", "id\ta\tb\tscore\n1\tA\tB\tfast\n", {true, {}}),
                    "target.tsv:2: the regression target \"fast\" is not a finite number");
    EXPECT_CONTAINS(error("huge.tsv", "id\ta\tb\tscore\n1\tA\tB\t1e999\n", {true, {}}),
                    "huge.tsv:2: the regression target \"1e999\" is not a finite number");
    EXPECT_CONTAINS(error("narrow.tsv", "a\tb\n1\t2\n", classes), "narrow.tsv:1: 2 columns, but column 3 (0-based) is read");
    EXPECT_CONTAINS(error("nothing.tsv", "id\ta\tb\tlabel\n", classes), "nothing.tsv: no examples");
}

TEST(GlueData, PairsAreCutLongestFirst) {
    // a 5 and b 3 pieces into 8 positions: 5 for text; a loses two (it is longer), then b loses one (a tie).
    const data::EncodedPair pair = data::encode_pair({10, 11, 12, 13, 14}, {20, 21, 22}, true, 8);
    EXPECT_EQ(pair.ids, std::vector<int32_t>({data::kClsId, 10, 11, 12, data::kSepId, 20, 21, data::kSepId}));
    EXPECT_EQ(pair.segments, std::vector<int32_t>({0, 0, 0, 0, 0, 1, 1, 1}));
    const data::EncodedPair single = data::encode_pair({10, 11, 12, 13, 14}, {}, false, 5);
    EXPECT_EQ(single.ids, std::vector<int32_t>({data::kClsId, 10, 11, 12, data::kSepId}));
    EXPECT_EQ(single.segments, std::vector<int32_t>({0, 0, 0, 0, 0}));
}

ClassificationDataOptions pair_options(const std::string& path) {
    ClassificationDataOptions options;
    options.path = path;
    options.layout = {1, 2, 3, true};
    options.labels = {false, {"no", "yes"}};
    options.max_seq = 24;
    options.seed = 7;
    options.batch = {2, 0, 1};
    return options;
}

std::string many_pairs() {
    std::string text = "id\tfirst\tsecond\tlabel\n";
    for (int i = 0; i < 11; ++i) {
        text += std::to_string(i) + "\tThe whale number " + std::to_string(i) + std::string(static_cast<size_t>(i % 4), '!') +
                "\tA ship\t" + (i % 3 == 0 ? "yes" : "no") + "\n";
    }
    return text;
}

TEST(GlueData, EveryExampleOncePerEpochAndResumable) {
    const std::string path = scratch().write("many.tsv", many_pairs());
    ClassificationDataOptions options = pair_options(path);
    ClassificationBatcher batcher(scratch().tokenizer, options);
    std::multiset<int64_t> seen;
    for (int b = 0; b < 6; ++b) {  // 11 examples in batches of 2: 6 batches
        const auto batch = batcher.next();
        ASSERT_TRUE(batch);
        seen.insert(batch->example_index.begin(), batch->example_index.end());
        for (size_t r = 0; r < batch->example_index.size(); ++r) {
            const auto& example = batcher.examples()[static_cast<size_t>(batch->example_index[r])];
            EXPECT_EQ(batch->labels.ints()[r], example.label);
            EXPECT_EQ(batch->input_ids.ints()[static_cast<int64_t>(r) * batch->input_ids.dim(1)], data::kClsId);
        }
    }
    EXPECT_EQ(seen.size(), 11u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 11u);
    EXPECT_EQ(batcher.position().epoch, 1);

    const data::DataPosition saved = batcher.position();
    std::vector<data::ClassificationBatch> expected;
    for (int b = 0; b < 4; ++b) expected.push_back(*batcher.next());
    ClassificationBatcher resumed(scratch().tokenizer, options);
    resumed.restore(saved);
    for (const auto& batch : expected) {
        const auto again = resumed.next();
        EXPECT_TRUE(testing::same_tensor(batch.input_ids, again->input_ids));
        EXPECT_EQ(batch.example_index, again->example_index);
    }
    options.max_seq = 16;
    ClassificationBatcher other(scratch().tokenizer, options);
    EXPECT_CONTAINS(error_of([&] { other.restore(saved); }), "data position: saved for different classification data");

    const auto two_rows = std::find_if(expected.begin(), expected.end(), [](const auto& b) { return b.input_ids.dim(0) == 2; });
    ASSERT_NE(two_rows, expected.end());
    const data::ClassificationBatch one = data::slice_rows(*two_rows, 1, 2);
    EXPECT_EQ(one.input_ids.dim(0), 1);
    EXPECT_EQ(one.example_index[0], two_rows->example_index[1]);
    EXPECT_EQ(one.labels.ints()[0], two_rows->labels.ints()[1]);
}

// Paper 003 §9's recipe: a partner is another example of the same class, drawn uniformly, at the
// given rate; a class of one example has none to give.
TEST(GlueData, SameClassSamplerDrawsAnotherExampleOfTheClassAtTheGivenRate) {
    std::vector<int32_t> labels;
    for (int i = 0; i < 300; ++i) labels.push_back(i % 3);
    labels.push_back(7);  // a class of one
    const data::SameClassSampler half(labels, 0.5);
    Rng rng(5);
    int64_t drawn = 0, draws = 0;
    std::set<int64_t> partners_of_zero;
    for (int round = 0; round < 20; ++round)
        for (int64_t example = 0; example < 300; ++example, ++draws) {
            const int64_t partner = half.draw(example, rng);
            if (partner < 0) continue;
            ++drawn;
            ASSERT_NE(partner, example);
            ASSERT_EQ(labels[static_cast<size_t>(partner)], labels[static_cast<size_t>(example)]) << example << " drew " << partner;
            if (example == 0) partners_of_zero.insert(partner);
        }
    EXPECT_NEAR(static_cast<double>(drawn) / static_cast<double>(draws), 0.5, 0.02);
    EXPECT_GT(partners_of_zero.size(), 5u);  // not one fixed partner
    const data::SameClassSampler always(labels, 1.0), never(labels, 0.0);
    for (int i = 0; i < 50; ++i) {
        EXPECT_EQ(always.draw(300, rng), -1) << "the class of one";
        EXPECT_GE(always.draw(i, rng), 0);
        EXPECT_EQ(never.draw(i, rng), -1);
    }
    EXPECT_CONTAINS(error_of([&] { data::SameClassSampler(labels, 1.5); }), "probability 1.5 is not in [0, 1]");
}

// Training batches draw partners from their own file and class, the same again after a restore;
// with_template_partners appends the partners' rows after the batch's own.
TEST(GlueData, TemplatePartnersComeFromTheSameFileAndClassAndResume) {
    const std::string path = scratch().write("partners.tsv", many_pairs());
    ClassificationDataOptions options = pair_options(path);
    options.same_class_templates = 1.0;
    ClassificationBatcher batcher(scratch().tokenizer, options);
    const data::DataPosition start = batcher.position();
    std::vector<data::ClassificationBatch> batches;
    for (int b = 0; b < 8; ++b) batches.push_back(*batcher.next());
    for (const data::ClassificationBatch& batch : batches) {
        ASSERT_EQ(batch.template_partner.size(), batch.example_index.size());
        for (size_t r = 0; r < batch.example_index.size(); ++r) {
            const int64_t partner = batch.template_partner[r];
            ASSERT_GE(partner, 0);
            ASSERT_LT(partner, 11);
            EXPECT_NE(partner, batch.example_index[r]);
            EXPECT_EQ(batcher.examples()[static_cast<size_t>(partner)].label,
                      batcher.examples()[static_cast<size_t>(batch.example_index[r])].label);
        }
        const data::PartneredBatch extended = batcher.with_template_partners(batch);
        const auto rows = static_cast<int64_t>(batch.example_index.size());
        ASSERT_EQ(extended.inputs, rows);
        ASSERT_EQ(extended.batch.input_ids.dim(0), 2 * rows);
        ASSERT_EQ(extended.partner_row.size(), static_cast<size_t>(2 * rows));
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t row = extended.partner_row[static_cast<size_t>(r)];
            EXPECT_EQ(extended.batch.example_index[static_cast<size_t>(row)], batch.template_partner[static_cast<size_t>(r)]);
            EXPECT_EQ(extended.batch.example_index[static_cast<size_t>(r)], batch.example_index[static_cast<size_t>(r)]);
            EXPECT_EQ(extended.partner_row[static_cast<size_t>(rows + r)], -1);
        }
    }
    ClassificationBatcher resumed(scratch().tokenizer, options);
    resumed.restore(start);
    for (int b = 0; b < 3; ++b) resumed.next();
    for (size_t b = 3; b < batches.size(); ++b) EXPECT_EQ(resumed.next()->template_partner, batches[b].template_partner) << b;
    const data::ClassificationBatch one = data::slice_rows(batches[0], 1, 2);
    EXPECT_EQ(one.template_partner, std::vector<int64_t>{batches[0].template_partner[1]});

    options.same_class_templates = 0.0;  // validation and evaluation
    ClassificationBatcher plain(scratch().tokenizer, options);
    EXPECT_TRUE(plain.next()->template_partner.empty());
}

TEST(GlueMetrics, HandWorkedCases) {
    EXPECT_DOUBLE_EQ(eval::accuracy({1, 0, 1, 1}, {1, 1, 1, 0}), 0.5);
    // TP 2, FP 1, FN 1, TN 1: F1 = 2·2 / (3 + 3); MCC = (2·1 − 1·1) / sqrt(3·3·2·2)
    EXPECT_NEAR(eval::binary_f1({1, 0, 1, 1, 0}, {1, 1, 0, 1, 0}), 4.0 / 6.0, 1e-15);
    EXPECT_NEAR(eval::matthews_correlation({1, 0, 1, 1, 0}, {1, 1, 0, 1, 0}), 1.0 / 6.0, 1e-15);
    // Three classes: 4 of 6 right, predicted counts (2, 3, 1), true (2, 2, 2):
    // (4·6 − 12) / sqrt((36 − 14)(36 − 12)) = 12 / sqrt(528)
    EXPECT_NEAR(eval::matthews_correlation({0, 1, 1, 1, 2, 0}, {0, 0, 1, 1, 2, 2}), 12.0 / std::sqrt(528.0), 1e-15);
    EXPECT_NEAR(eval::pearson({1, 2, 3, 4}, {2, 4, 5, 9}), 0.9647638212377322, 1e-14);
    // Ties share their average rank: x ranks (1, 2.5, 2.5, 4).
    EXPECT_EQ(eval::average_ranks({1, 2, 2, 3}), std::vector<double>({1, 2.5, 2.5, 4}));
    EXPECT_NEAR(eval::spearman({1, 2, 2, 3}, {10, 20, 30, 40}), 0.9486832980505138, 1e-14);
    EXPECT_NEAR(eval::spearman({1, 5, 2}, {-3, 100, 0}), 1.0, 1e-15);
}

TEST(GlueMetrics, DegenerateInputsAsScikitLearnAndScipy) {
    EXPECT_EQ(eval::matthews_correlation({1, 1, 1}, {0, 1, 0}), 0.0);  // one predicted class
    EXPECT_EQ(eval::binary_f1({0, 0}, {0, 0}), 0.0);                    // no positives at all
    EXPECT_TRUE(std::isnan(eval::pearson({1, 1, 1}, {1, 2, 3})));
    EXPECT_TRUE(std::isnan(eval::spearman({1, 2, 3}, {4, 4, 4})));
    EXPECT_CONTAINS(error_of([] { eval::accuracy({1}, {1, 0}); }), "accuracy: 1 predictions for 2 gold values");
    EXPECT_CONTAINS(error_of([] { eval::pearson({}, {}); }), "pearson: no examples");
}

}  // namespace
}  // namespace hnas
