// The masked-LM task's data options: training follows the config's packing and masking; validation
// keeps one document per sequence and the default masking, so that its accuracy compares across
// pretraining recipes (issue 48).
#include "data/mlm.h"
#include "tasks/mlm/mlm_options.h"
#include "tasks/mlm/mlm_task.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

TEST(MlmTaskData, ValidationKeepsDocumentsAndDefaultMaskingWhateverTheRecipe) {
    const testing::Json raw = {{"task", "mlm"},
                               {"data",
                                {{"train_sources", {{{"path", "train.txt"}, {"unit", "line"}}}},
                                 {"valid_sources", {{{"path", "valid.txt"}, {"unit", "line"}}}},
                                 {"packing", "corpus"},
                                 {"mask_prob", 0.3},
                                 {"max_ngram", 1},
                                 {"max_predictions", 12}}}};
    const config::ExperimentConfig config = tasks::parse_config(raw);
    const data::MlmDataOptions train = tasks::mlm::data_options(config, tasks::mlm::DataRole::train);
    EXPECT_EQ(train.sources.front().path, "train.txt");
    EXPECT_EQ(train.packing, data::Packing::corpus);
    EXPECT_EQ(train.masking.mask_prob, 0.3);
    EXPECT_EQ(train.masking.max_ngram, 1);
    EXPECT_EQ(train.masking.max_predictions, 12);
    EXPECT_TRUE(train.shuffle);

    const data::MlmDataOptions valid = tasks::mlm::data_options(config, tasks::mlm::DataRole::validation);
    const data::MaskingOptions defaults;
    EXPECT_EQ(valid.sources.front().path, "valid.txt");
    EXPECT_EQ(valid.packing, data::Packing::document);
    EXPECT_EQ(valid.masking.mask_prob, defaults.mask_prob);
    EXPECT_EQ(valid.masking.max_ngram, defaults.max_ngram);
    EXPECT_EQ(valid.masking.max_predictions, defaults.max_predictions);
    EXPECT_EQ(valid.masking.mask_token_prob, defaults.mask_token_prob);
    EXPECT_FALSE(valid.shuffle);
    EXPECT_EQ(valid.epochs, 1);
    EXPECT_NE(valid.seed, train.seed);
}

TEST(MlmTaskData, TestSourcesAreCheckedAtTheStartAndDefaultToValidation) {
    testing::Json raw = {{"task", "mlm"},
                         {"data", {{"train_sources", {{{"path", "train.txt"}, {"unit", "line"}}}},
                                   {"valid_sources", {{{"path", "valid.txt"}, {"unit", "line"}}}}}}};
    EXPECT_TRUE(tasks::mlm::options(tasks::parse_config(raw)).test_sources.empty());
    raw["test"] = {{"sources", {{{"path", "test.txt"}, {"unit", "line"}}}}};
    const config::ExperimentConfig config = tasks::parse_config(raw);
    ASSERT_EQ(tasks::mlm::options(config).test_sources.size(), 1u);
    EXPECT_EQ(tasks::mlm::options(config).test_sources.front().path, "test.txt");
    const std::vector<tasks::DataFile> files = tasks::task_definition(*config.task).data_files(config);
    ASSERT_FALSE(files.empty());
    EXPECT_EQ(files.back().key, "test.sources[0].path");
    EXPECT_EQ(files.back().path, "test.txt");
}

}  // namespace
}  // namespace hnas
