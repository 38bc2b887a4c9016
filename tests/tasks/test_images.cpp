// The images task (paper 003 §9 Table 1 at CPU scale): the CSV reader's errors and patch layout, the
// bundled digits' counts and class shares (data/digits/README.md), same-class partners drawn within
// the training file, the ViT's gradients and parameter count, and a run whose last layer is `ot` with
// the same-class recipe: the loss falls, a resumed run is bit-identical, `hnas test` scores each image.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "analysis/training_observers.h"
#include "config/experiment_config.h"
#include "data/images.h"
#include "experiments/run_result.h"
#include "io/checkpoint.h"
#include "models/memory_estimate.h"
#include "models/vit.h"
#include "tasks/task.h"
#include "test_support.h"
#include "train/trainer.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const std::string kDigits = std::string(HNAS_SOURCE_DIR) + "/data/digits/";

const testing::ScratchDir& scratch() {
    static const testing::ScratchDir dir("hnas_images_test_");
    return dir;
}

// Two 4 × 4 images whose pixel at (r, c) is 4r + c (+ 16 for the second), labels 1 and 0.
std::string two_images() {
    std::string text;
    for (int image = 0; image < 2; ++image) {
        for (int p = 0; p < 16; ++p) text += std::to_string(p + 16 * image) + ",";
        text += image == 0 ? "1\n" : "0\n";
    }
    return text;
}

TEST(ImageData, PatchesAreRowMajorTilesOfScaledPixels) {
    const std::string path = scratch().write("two.csv", two_images());
    data::ImageDataOptions options;
    options.path = path;
    options.layout = {4, 4, 2, 32.0};
    options.shuffle = false;
    options.batch = 2;
    data::ImageBatcher batcher(options);
    const data::ImageBatch batch = *batcher.next();
    ASSERT_EQ(batch.patches.shape(), (Shape{2, 4, 4}));
    // patch 1 of image 0 is the top-right 2 × 2 tile: pixels 2, 3, 6, 7
    const float* tile = batch.patches.data() + 1 * 4;
    EXPECT_EQ(std::vector<float>(tile, tile + 4), (std::vector<float>{2 / 32.f, 3 / 32.f, 6 / 32.f, 7 / 32.f}));
    const float* last = batch.patches.data() + (4 + 3) * 4;  // image 1, bottom-right tile
    EXPECT_EQ(std::vector<float>(last, last + 4), (std::vector<float>{26 / 32.f, 27 / 32.f, 30 / 32.f, 31 / 32.f}));
    EXPECT_EQ(batch.labels.ints()[0], 1);
    EXPECT_EQ(batch.labels.ints()[1], 0);
}

TEST(ImageData, ErrorsNameFileAndLine) {
    const data::ImageLayout layout{4, 4, 2, 16.0};
    const auto error_for = [&](const std::string& name, const std::string& text) {
        return error_of([&] { data::read_image_csv(scratch().write(name, text), layout); });
    };
    EXPECT_CONTAINS(error_for("short.csv", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n"), "short.csv:1: 16 values, not 16 pixels and a label");
    EXPECT_CONTAINS(error_for("bright.csv", "17,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n"), "bright.csv:1: pixel 1 is 17, outside [0, 16]");
    EXPECT_CONTAINS(error_for("label.csv", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2.5\n"), "label.csv:1: label 2.5 is not a class id");
    EXPECT_CONTAINS(error_for("word.csv", "0,0,0,0,0,x,0,0,0,0,0,0,0,0,0,0,1\n"), "word.csv:1: \"x\" is not a number");
    EXPECT_CONTAINS(error_of([&] { data::read_image_csv(scratch().write("ok.csv", "0\n"), {4, 4, 3, 16.0}); }),
                    "patches of 3 × 3 do not tile 4 × 4 images");
}

// The bundled split (data/digits/README.md): its counts per class, each image in one split.
TEST(ImageData, BundledDigitsHaveTheirDocumentedCountsAndShares) {
    const std::map<std::string, std::vector<int64_t>> expected{
        {"train", {107, 109, 106, 110, 109, 109, 109, 107, 104, 108}},
        {"valid", {36, 36, 35, 37, 36, 36, 36, 36, 35, 36}},
        {"test", {35, 37, 36, 36, 36, 37, 36, 36, 35, 36}}};
    std::set<std::string> lines;
    int64_t total = 0;
    for (const auto& [split, counts] : expected) {
        const data::ImageSet set = data::read_image_csv(kDigits + split + ".csv", {});
        std::vector<int64_t> per_class(10, 0);
        for (int32_t label : set.labels) ++per_class.at(static_cast<size_t>(label));
        EXPECT_EQ(per_class, counts) << split;
        total += set.size();
        std::ifstream in(kDigits + split + ".csv");
        for (std::string line; std::getline(in, line);) lines.insert(line);
    }
    EXPECT_EQ(total, 1797);
    EXPECT_EQ(lines.size(), 1797u);  // every image distinct and in one split
}

TEST(ImageData, TemplatePartnersAreOtherImagesOfTheClassInTheFile) {
    data::ImageDataOptions options;
    options.path = kDigits + "valid.csv";
    options.same_class_templates = 1.0;
    options.seed = 4;
    data::ImageBatcher batcher(options);
    for (int b = 0; b < 6; ++b) {
        const data::ImageBatch batch = *batcher.next();
        ASSERT_EQ(batch.template_partner.size(), batch.example_index.size());
        for (size_t r = 0; r < batch.example_index.size(); ++r) {
            const int64_t partner = batch.template_partner[r];
            ASSERT_GE(partner, 0);
            EXPECT_NE(partner, batch.example_index[r]);
            EXPECT_EQ(batcher.images().labels[static_cast<size_t>(partner)], batcher.images().labels[static_cast<size_t>(batch.example_index[r])]);
        }
        const data::PartneredImageBatch extended = batcher.with_template_partners(batch);
        EXPECT_EQ(extended.batch.patches.dim(0), 2 * extended.inputs);
        EXPECT_EQ(extended.batch.example_index[static_cast<size_t>(extended.partner_row[0])], batch.template_partner[0]);
    }
}

// A ViT on 4 × 4 images in 2 × 2 patches, d 8, its last layer ot.
TEST(VitModel, MatchesFiniteDifferencesAndTheMemoryEstimate) {
    const Json raw = {{"task", "images"},
                      {"model", {{"d_model", 8}, {"heads", 2}, {"ffn_dim", 8}, {"encoder_layers", 2},
                                 {"attention", {{"encoder", {{"kind", {"lnas", "ot"}}}}}}}},
                      {"data", {{"train_file", "TRAIN"}, {"image_height", 4}, {"image_width", 4}, {"classes", 3}}}};
    const config::ExperimentConfig config = tasks::parse_config(raw);
    Rng init(5), dropout(6);
    models::VitModel model(config.model, init, dropout);
    model.set_training(false);
    EXPECT_EQ(models::estimate_training_memory(config.model, {4, 5, 0, 0}).parameters, model.parameter_count());
    const Tensor patches = testing::random_tensor({3, 4, 4}, 7, 0.0f, 1.0f);
    const nn::TemplatePartners partners{{2, -1, 0}};
    testing::check_parameter_gradients(model, [&] { return model.logits(model.encode(patches, &partners)); }, {1e-2f, 3e-3},
                                       "vit with ot and partners");
    EXPECT_CONTAINS(error_of([&] { model.encode(testing::random_tensor({3, 5, 4}, 8)); }),
                    "vit model: patches (3, 5, 4) must be (B, 4, 4)");
}

train::TrainResult run(const Json& raw, const fs::path& dir, bool resume = false, int64_t stop_after = 0) {
    train::TrainOptions options;
    options.run_dir = dir.string();
    options.resume = resume;
    options.stop_after_steps = stop_after;
    const auto observers = analysis::training_observers();  // as `hnas train` registers them
    options.observers = analysis::observer_pointers(observers);
    return train::train(tasks::parse_config(raw), options);
}

TEST(ImagesTask, OtWithSameClassTemplatesTrainsResumesAndTests) {
    const Json raw = {{"task", "images"},
                      {"seed", 3},
                      {"model", {{"d_model", 16}, {"heads", 2}, {"ffn_dim", 32}, {"encoder_layers", 2},
                                 {"attention", {{"encoder", {{"kind", {"lnas", "ot"}}}}}}}},
                      {"data", {{"train_file", kDigits + "train.csv"}, {"valid_file", kDigits + "valid.csv"}, {"batch_sentences", 32},
                                {"same_class_templates", 0.5}}},
                      {"train", {{"learning_rate", 3e-3}, {"warmup_steps", 5}, {"steps", 60}, {"log_every", 1}}},
                      {"validation", {{"every", 20}}},
                      {"test", {{"file", kDigits + "test.csv"}}},
                      {"checkpoint", {{"every", 100}}}};
    const testing::RunDir whole(scratch(), "whole"), halves(scratch(), "halves");
    run(raw, whole.path);
    const std::vector<double> losses = testing::logged_losses(whole.path.string());
    ASSERT_EQ(losses.size(), 60u);
    EXPECT_LT((losses[57] + losses[58] + losses[59]) / 3, 0.8 * (losses[0] + losses[1] + losses[2]) / 3);
    run(raw, halves.path, false, 30);
    run(raw, halves.path, true);
    EXPECT_EQ(testing::logged_losses(whole.path.string()), testing::logged_losses(halves.path.string()));
    const auto a = io::Checkpoint::load((whole.path / "checkpoints" / "step-00000060.ckpt").string());
    const auto b = io::Checkpoint::load((halves.path / "checkpoints" / "step-00000060.ckpt").string());
    const Tensor x = a.tensor("classifier.weight"), y = b.tensor("classifier.weight");
    EXPECT_EQ(std::memcmp(x.data(), y.data(), static_cast<size_t>(x.numel()) * 4), 0);
    EXPECT_EQ(a.metadata().at("config").at("data").at("classes"), 10);  // collected from the training file

    const Json result = experiments::test_run(whole.path);
    EXPECT_EQ(result.at("metrics").at("examples"), 360);
    EXPECT_GT(result.at("metrics").at("accuracy").get<double>(), 0.2);
}

}  // namespace
}  // namespace hnas
