// Paper 004's multi-view attention (§6.1, App. B) on synthetic scenes: the label on hand-made scenes;
// batches reproducible from (seed, index) that hold every object once in the secondary views and the
// primary view's share of them; the model's gradients against finite differences for every kind and
// pooling baseline; Lemma 1 on its DNAS weights (and LNAS explaining keys away on the same scores);
// its parameters in the memory estimate.
#include <cmath>

#include "config/experiment_config.h"
#include "data/multiview.h"
#include "models/memory_estimate.h"
#include "models/multiview.h"
#include "nn/attention_probe.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

using data::SceneObject;

TEST(MultiviewLabels, MarkedColorAndCappedCountOfColorZero) {
    const std::vector<SceneObject> scene{{0.1f, 0.2f, 0, false}, {0.5f, 0.5f, 2, true}, {0.9f, 0.1f, 0, false}, {0.3f, 0.7f, 1, false}};
    EXPECT_EQ(data::multiview_label(scene, 4).color, 2);
    EXPECT_EQ(data::multiview_label(scene, 4).count, 2);
    EXPECT_EQ(data::multiview_label(scene, 2).count, 1);  // "1 or more"
    std::vector<SceneObject> unmarked = scene;
    unmarked[1].marked = false;
    EXPECT_CONTAINS(testing::error_of([&] { data::multiview_label(unmarked, 4); }), "exactly one marked object, got 0");
    std::vector<SceneObject> twice = scene;
    twice[0].marked = true;
    EXPECT_CONTAINS(testing::error_of([&] { data::multiview_label(twice, 4); }), "exactly one marked object, got 2");
}

int64_t real_boxes(const data::ViewBoxes& view, int64_t row) {
    int64_t count = 0;
    for (int64_t b = 0; b < view.boxes; ++b) count += view.valid[static_cast<size_t>(row * view.boxes + b)] > 0.5f;
    return count;
}

TEST(MultiviewData, BatchesAreReproducibleAndHoldEveryObject) {
    data::MultiviewOptions options;
    options.seed = 5;
    const data::MultiviewGenerator generator(options);
    const data::MultiviewBatch third = generator.batch(3);
    EXPECT_EQ(third.views[1].features, generator.batch(3).views[1].features);
    EXPECT_EQ(third.labels, generator.batch(3).labels);
    EXPECT_NE(third.views[0].features, generator.batch(4).views[0].features);
    options.seed = 6;
    EXPECT_NE(third.views[0].features, data::MultiviewGenerator(options).batch(3).views[0].features);

    // Each object is one secondary view's box; the primary view holds the others less those it missed.
    int64_t objects = 0, primary = 0, first_secondary = 0;
    const int batches = 100;
    for (int k = 0; k < batches; ++k) {
        const data::MultiviewBatch batch = generator.batch(static_cast<uint64_t>(k));
        ASSERT_EQ(batch.views[0].features.size(), static_cast<size_t>(batch.rows * batch.views[0].boxes * options.width));
        for (int64_t row = 0; row < batch.rows; ++row) {
            const int64_t scene = real_boxes(batch.views[1], row) + real_boxes(batch.views[2], row);
            EXPECT_GE(scene, options.objects_min);
            EXPECT_LE(scene, options.objects_max);
            EXPECT_EQ(real_boxes(batch.views[0], row) + batch.primary_missed[static_cast<size_t>(row)], scene);
            const data::MultiviewLabel& part = batch.parts[static_cast<size_t>(row)];
            EXPECT_EQ(batch.labels[static_cast<size_t>(row)], part.color * options.count_classes + part.count);
            EXPECT_LT(part.color, options.colors);
            EXPECT_LT(part.count, options.count_classes);
            objects += scene - 1;  // the marked object is always detected
            primary += real_boxes(batch.views[0], row) - 1;
            first_secondary += real_boxes(batch.views[1], row);
        }
    }
    // The primary view's recall and the secondary views' even split, within 4 standard errors.
    const double n = static_cast<double>(objects);
    EXPECT_NEAR(static_cast<double>(primary) / n, options.primary_recall, 4.0 * std::sqrt(0.25 / n));
    const double all = n + batches * options.batch;
    EXPECT_NEAR(static_cast<double>(first_secondary) / all, 0.5, 4.0 * std::sqrt(0.25 / all));
}

// A tiny multi-view model: d 8, one head (two for `heads`), readout 6, 2 colors × 2 counts.
models::ModelConfig tiny_multiview(const std::string& kind, const std::string& mixer, int64_t heads = 1, double alpha = 1.0) {
    const testing::Json raw = {{"task", "multiview"},
                               {"model", {{"d_model", 8}, {"heads", heads}, {"ffn_dim", 6}, {"mixer", mixer},
                                          {"attention", {{"encoder", {{"kind", kind}, {"alpha", alpha}}}}}}},
                               {"data", {{"colors", 2}, {"count_classes", 2}}}};
    return tasks::parse_config(raw).model;
}

// Boxes of three views with ragged padding: primary 3 / 2, secondary 4 / 2 and 5 / 3.
models::MultiviewInput tiny_views(uint64_t seed, float scale = 1.0f) {
    const std::array<std::pair<int64_t, std::vector<float>>, 3> shapes{
        {{3, {1, 1, 1, 1, 1, 0}}, {4, {1, 1, 1, 1, 1, 1, 0, 0}}, {5, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}}};
    models::MultiviewInput views;
    for (size_t v = 0; v < views.size(); ++v) {
        const auto& [boxes, valid] = shapes[v];
        views[v] = {testing::random_tensor({2, boxes, 8}, seed + v, -scale, scale), Tensor::from_floats({2, boxes}, valid)};
    }
    return views;
}

TEST(MultiviewModel, EveryKindAndPoolingMatchesFiniteDifferences) {
    const models::MultiviewInput views = tiny_views(31);
    for (const auto& [kind, mixer] : std::vector<std::pair<std::string, std::string>>{
             {"lnas", "attention"}, {"dnas", "attention"}, {"hnas", "attention"}, {"sinkhorn", "attention"},
             {"nap", "attention"}, {"lnas", "sum"}, {"lnas", "max"}}) {
        Rng init(3), dropout(4);
        const models::MultiviewModel model(tiny_multiview(kind, mixer), init, dropout);
        testing::check_parameter_gradients(model, [&] { return model.logits(views); }, {1e-2f, 3e-3}, kind + "/" + mixer);
    }
}

// Lemma 1 (paper 000): under DNAS every real key of every view keeps Σ_i π_ij ≥ 1/L_k. The same
// parameters under LNAS, with scores sharpened by large query weights, leave some key below it.
TEST(MultiviewModel, DnasKeepsEveryKeyAboveOneOverItsKeys) {
    const models::MultiviewInput views = tiny_views(41, 2.0f);
    double lnas_smallest_ratio = 1e30;
    for (const std::string kind : {"dnas", "lnas"}) {
        Rng init(5), dropout(6);
        const models::MultiviewModel model(tiny_multiview(kind, "attention"), init, dropout);
        for (const auto& [name, attention] : model.attentions()) {
            for (const auto& named : attention->named_parameters()) {
                if (named.name != "q_proj.weight") continue;
                Tensor& weight = const_cast<Var&>(named.parameter).value();
                for (int64_t e = 0; e < weight.numel(); ++e) weight.data()[e] *= 8.0f;
            }
        }
        std::vector<const nn::MultiHeadAttention*> watched;
        for (const auto& [name, attention] : model.attentions()) watched.push_back(attention);
        const nn::AttentionProbe probe(watched);
        NoGradScope no_grad;
        model.logits(views);
        ASSERT_EQ(model.attentions().size(), 2u);
        for (size_t m = 0; m < 2; ++m) {
            const nn::MultiHeadAttention& attention = *model.attentions()[m].attention;
            const Tensor& sums = probe.record(attention).key_weight_sums;  // (B, 1, L_k)
            const Tensor& valid = views[m + 1].valid;
            const int64_t keys = valid.dim(1);
            for (int64_t b = 0; b < 2; ++b) {
                int64_t real = 0;
                for (int64_t j = 0; j < keys; ++j) real += valid.data()[b * keys + j] > 0.5f;
                for (int64_t j = 0; j < real; ++j) {
                    const double ratio = sums.data()[b * keys + j] * static_cast<double>(real);
                    if (kind == "dnas") {
                        EXPECT_GE(ratio, 1.0 - 1e-5) << "view " << m + 1 << " row " << b << " key " << j;
                    } else {
                        lnas_smallest_ratio = std::min(lnas_smallest_ratio, ratio);
                    }
                }
            }
        }
    }
    EXPECT_LT(lnas_smallest_ratio, 0.5);
}

// α of the config scales every view's scores (α·QKᵀ/√d): the model at α 4 is the model at α 1 with its
// query projections (weight and bias) times 4.
TEST(MultiviewModel, ScoresCarryTheConfiguredAlpha) {
    const models::MultiviewInput views = tiny_views(51);
    for (const std::string kind : {"lnas", "dnas"}) {
        Rng init_sharp(7), dropout_sharp(8), init_scaled(7), dropout_scaled(8), init_plain(7), dropout_plain(8);
        const models::MultiviewModel sharp(tiny_multiview(kind, "attention", 1, 4.0), init_sharp, dropout_sharp);
        const models::MultiviewModel scaled(tiny_multiview(kind, "attention", 1, 1.0), init_scaled, dropout_scaled);
        const models::MultiviewModel plain(tiny_multiview(kind, "attention", 1, 1.0), init_plain, dropout_plain);
        for (const auto& [name, attention] : scaled.attentions()) {
            for (const auto& named : attention->named_parameters()) {
                if (named.name != "q_proj.weight" && named.name != "q_proj.bias") continue;
                Tensor& value = const_cast<Var&>(named.parameter).value();
                for (int64_t e = 0; e < value.numel(); ++e) value.data()[e] *= 4.0f;
            }
        }
        NoGradScope no_grad;
        const Tensor expected = scaled.logits(views).value(), got = sharp.logits(views).value();
        const Tensor unscaled = plain.logits(views).value();
        double largest = 0.0, moved = 0.0;
        for (int64_t e = 0; e < got.numel(); ++e) {
            largest = std::max(largest, std::abs(static_cast<double>(got.data()[e]) - expected.data()[e]));
            moved = std::max(moved, std::abs(static_cast<double>(got.data()[e]) - unscaled.data()[e]));
        }
        EXPECT_LT(largest, 1e-5) << kind;
        EXPECT_GT(moved, 1e-3) << kind << ": α 4 left the logits where α 1 has them";
    }
}

TEST(MultiviewModel, MemoryEstimateCountsItsParameters) {
    for (const auto& [kind, mixer] : std::vector<std::pair<std::string, std::string>>{
             {"lnas", "attention"}, {"hnas", "attention"}, {"lnas", "sum"}}) {
        const models::ModelConfig config = tiny_multiview(kind, mixer, 2);
        Rng init(1), dropout(2);
        const int64_t built = models::MultiviewModel(config, init, dropout).parameter_count();
        const int64_t per_head_scalars = kind == "hnas" ? 2 * config.heads : 0;  // u per head of each view's attention
        EXPECT_EQ(models::estimate_training_memory(config, {4, 8, 0, 0}).parameters + per_head_scalars, built) << kind << " " << mixer;
    }
    // Each view's attention with its own relative-position prior and context preference.
    const testing::Json raw = {{"task", "multiview"},
                               {"model", {{"d_model", 8}, {"heads", 2}, {"ffn_dim", 6},
                                          {"attention", {{"encoder", {{"prior", {{"enabled", true}}},
                                                                      {"context_prior", {{"enabled", true}}}}}}}}},
                               {"data", {{"colors", 2}, {"count_classes", 2}}}};
    const models::ModelConfig config = tasks::parse_config(raw).model;
    Rng init(1), dropout(2);
    EXPECT_EQ(models::estimate_training_memory(config, {4, 8, 0, 0}).parameters,
              models::MultiviewModel(config, init, dropout).parameter_count());
}

// A prior shared by a stack's layers has no stack to live in here: an error naming the key, not a prior dropped.
TEST(MultiviewModel, RejectsASharedPrior) {
    const testing::Json raw = {{"task", "multiview"},
                               {"model", {{"d_model", 8}, {"attention", {{"encoder", {{"prior", {{"enabled", true}, {"shared", true}}}}}}}}}};
    const models::ModelConfig config = tasks::parse_config(raw).model;
    Rng init(1), dropout(2);
    EXPECT_NE(testing::error_of([&] { models::MultiviewModel(config, init, dropout); }).find("prior.shared"), std::string::npos);
}

}  // namespace
}  // namespace hnas
