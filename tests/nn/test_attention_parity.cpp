// PyTorch parity of a whole multi-head attention layer for every attention kind: self-attention padded
// on both axes, cross-attention with L_q ≠ L_k, causal self-attention, the relative-position prior,
// paper 003's α and context preference (tests/fixtures/attention.json); and of whole encoder layers in
// every block and mixer of paper 002
// (tests/fixtures/layers.json); of paper 004's whole multi-view model, boxes to loss, per kind and
// pooling baseline (tests/fixtures/multiview.json); and of paper 003's ViT, patches to loss, with ot as
// its last layer (tests/fixtures/vit.json). All written by scripts/make_fixtures.py (float64
// reference from the same float32 inputs): the output and the gradients of the inputs and of every
// parameter by name.
#include "config/experiment_config.h"
#include "models/multiview.h"
#include "models/vit.h"
#include "nn/attention.h"
#include "nn/attention_probe.h"
#include "nn/transformer_layer.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::Json;
using testing::json_tensor;

// Copies the fixture's parameters into the module by name; the two sets must be the same.
void set_parameters(const nn::Module& module, const Json& parameters) {
    const auto named_parameters = module.named_parameters();
    ASSERT_EQ(named_parameters.size(), parameters.size());
    for (const auto& named : named_parameters) {
        ASSERT_TRUE(parameters.contains(named.name)) << "fixture lacks " << named.name;
        const Tensor value = json_tensor(parameters.at(named.name));
        ASSERT_EQ(value.shape(), named.parameter.shape()) << named.name;
        std::copy_n(value.data(), value.numel(), const_cast<Var&>(named.parameter).value().data());
    }
}

// The attention stack's config keys of a fixture's kind settings (scripts/make_fixtures.py's attrs).
Json kind_keys(const Json& attrs) {
    Json keys = Json::object();
    if (attrs.contains("iterations")) keys["sinkhorn_iterations"] = attrs.at("iterations");
    if (attrs.contains("eps")) keys["nap_eps"] = attrs.at("eps");
    if (attrs.contains("denominator")) keys["nap_denominator"] = attrs.at("denominator");
    return keys;
}

class AttentionParity : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionParity, OutputAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("attention.json", GetParam());
    const bool self_attention = c.at("self_attention").get<bool>(), causal = c.at("causal").get<bool>();
    const Json& attrs = c.at("attrs");

    nn::AttentionOptions options;
    options.width = c.at("width").get<int64_t>();
    options.heads = c.at("heads").get<int64_t>();
    options.kind = c.at("kind").get<std::string>();
    options.role = causal ? nn::AttentionRole::causal_self : nn::AttentionRole::bidirectional;
    options.kind_settings = testing::stack_kind_settings(options.kind, kind_keys(attrs));
    if (attrs.contains("alpha")) options.alpha = attrs.at("alpha").get<float>();
    if (attrs.contains("context_prior")) {
        options.context_prior = nn::ContextPreferenceOptions{attrs.at("context_prior").at("hidden").get<int64_t>()};
    }
    if (attrs.contains("score_scale")) {
        options.score_scale = parse_enum<nn::ScoreScale>(attrs.at("score_scale").get<std::string>(), "score_scale");
    }
    if (attrs.contains("prior")) {
        const Json& prior = attrs.at("prior");
        options.prior = nn::RelativePositionOptions{prior.at("num_buckets").get<int64_t>(),
                                                    prior.at("max_distance").get<int64_t>(),
                                                    prior.at("bidirectional").get<bool>()};
    }
    Rng init(1), dropout(2);
    nn::MultiHeadAttention attention(options, init, dropout);

    set_parameters(attention, c.at("parameters"));
    const auto parameters = attention.named_parameters();

    const Json& inputs = c.at("inputs");
    Var x(json_tensor(inputs.at("x")), true);
    Var memory = self_attention ? x : Var(json_tensor(inputs.at("memory")), true);
    const ops::AttentionMask mask{json_tensor(inputs.at("key_valid")), json_tensor(inputs.at("query_valid")), causal};
    const nn::AttentionProbe probe({&attention});
    Var output = attention.forward(x, memory, mask);
    testing::expect_close(output.value(), c.at("output"), 1e-5, 1e-4, GetParam() + " output");
    output.backward(json_tensor(c.at("grad_output")));

    const Json& grads = c.at("grads");
    testing::expect_close(x.grad(), grads.at("x"), 1e-5, 1e-3, GetParam() + " grad x");
    if (!self_attention) testing::expect_close(memory.grad(), grads.at("memory"), 1e-5, 1e-3, GetParam() + " grad memory");
    for (const auto& named : parameters) {
        ASSERT_TRUE(named.parameter.grad().defined()) << named.name;
        testing::expect_close(named.parameter.grad(), grads.at(named.name), 1e-5, 1e-3, GetParam() + " grad " + named.name);
    }
    // The recorded explaining-away statistic is the column sum of the fixture's weights.
    const Tensor weights = json_tensor(c.at("weights"));
    const Tensor& sums = probe.record(attention).key_weight_sums;
    const int64_t batch = weights.dim(0), heads = weights.dim(1), queries = weights.dim(2), keys = weights.dim(3);
    for (int64_t s = 0; s < batch * heads; ++s)
        for (int64_t j = 0; j < keys; ++j) {
            double column = 0.0;
            for (int64_t i = 0; i < queries; ++i) column += weights.data()[(s * queries + i) * keys + j];
            EXPECT_NEAR(sums.data()[s * keys + j], column, 1e-5) << GetParam() << " key " << j;
        }
}

class LayerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerParity, OutputAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("layers.json", GetParam());
    const Json& attrs = c.at("attrs");
    nn::TransformerLayerOptions options;
    options.self_attention.width = c.at("width").get<int64_t>();
    options.self_attention.heads = c.at("heads").get<int64_t>();
    options.self_attention.kind = c.at("kind").get<std::string>();
    options.self_attention.kind_settings = testing::stack_kind_settings(options.self_attention.kind, kind_keys(attrs));
    if (attrs.contains("score_scale")) {
        options.self_attention.score_scale = parse_enum<nn::ScoreScale>(attrs.at("score_scale").get<std::string>(), "score_scale");
    }
    options.hidden = c.at("hidden").get<int64_t>();
    options.norm = parse_enum<nn::NormPlacement>(c.at("norm").get<std::string>(), "norm");
    options.mixer = parse_enum<nn::Mixer>(c.at("mixer").get<std::string>(), "mixer");
    options.mte_attention_norm = options.self_attention.kind != "non";
    options.layer_norm_eps = c.at("layer_norm_eps").get<float>();
    Rng init(1), dropout(2);
    nn::TransformerLayer layer(options, init, dropout);
    set_parameters(layer, c.at("parameters"));

    Var x(json_tensor(c.at("inputs").at("x")), true);
    const Tensor key_valid = json_tensor(c.at("inputs").at("key_valid"));
    Var output = layer.forward(x, {key_valid, key_valid});
    testing::expect_close(output.value(), c.at("output"), 1e-5, 1e-4, GetParam() + " output");
    output.backward(json_tensor(c.at("grad_output")));
    testing::expect_close(x.grad(), c.at("grads").at("x"), 1e-5, 1e-3, GetParam() + " grad x");
    for (const auto& named : layer.named_parameters()) {
        ASSERT_TRUE(named.parameter.grad().defined()) << named.name;
        testing::expect_close(named.parameter.grad(), c.at("grads").at(named.name), 1e-5, 1e-3, GetParam() + " grad " + named.name);
    }
}

class MultiviewParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiviewParity, LogitsLossAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("multiview.json", GetParam());
    const auto classes = c.at("classes").get<int64_t>();
    const Json raw = {{"task", "multiview"},
                      {"model", {{"d_model", c.at("width")}, {"heads", c.at("heads")}, {"ffn_dim", c.at("readout")},
                                 {"mixer", c.at("mixer")}, {"layer_norm_eps", c.at("layer_norm_eps")},
                                 {"attention", {{"encoder", {{"kind", c.at("kind")}}}}}}},
                      {"data", {{"colors", 2}, {"count_classes", classes / 2}}}};
    const config::ExperimentConfig config = tasks::parse_config(raw);
    Rng init(1), dropout(2);
    models::MultiviewModel model(config.model, init, dropout);
    set_parameters(model, c.at("parameters"));
    const Json& inputs = c.at("inputs");
    models::MultiviewInput views;
    for (size_t v = 0; v < views.size(); ++v) {
        views[v] = {json_tensor(inputs.at("features_" + std::to_string(v))), json_tensor(inputs.at("valid_" + std::to_string(v)))};
    }
    const Var logits = model.logits(views);
    testing::expect_close(logits.value(), c.at("logits"), 1e-5, 1e-4, GetParam() + " logits");
    Var loss = ops::cross_entropy(logits, Tensor::from_ints({2}, inputs.at("labels").get<std::vector<int32_t>>()));
    EXPECT_NEAR(loss.item(), c.at("loss").get<double>(), 1e-5) << GetParam();
    loss.backward();
    for (const auto& named : model.named_parameters()) {
        ASSERT_TRUE(named.parameter.grad().defined()) << named.name;
        testing::expect_close(named.parameter.grad(), c.at("grads").at(named.name), 1e-5, 1e-3, GetParam() + " grad " + named.name);
    }
}

INSTANTIATE_TEST_SUITE_P(Paper004, MultiviewParity, ::testing::ValuesIn(testing::fixture_case_names("multiview.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(VitParity, LogitsLossAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("vit.json", "lnas_ot");
    const int64_t side = 4;  // the fixture's 4 patches of 2 × 2 values tile a 4 × 4 image
    const Json raw = {{"task", "images"},
                      {"model", {{"d_model", c.at("width")}, {"heads", c.at("heads")}, {"ffn_dim", c.at("ffn")},
                                 {"encoder_layers", c.at("kinds").size()}, {"layer_norm_eps", c.at("layer_norm_eps")},
                                 {"attention", {{"encoder", {{"kind", c.at("kinds")}}}}}}},
                      {"data", {{"train_file", "TRAIN"}, {"image_height", side}, {"image_width", side}, {"patch", 2},
                                {"classes", c.at("classes")}}}};
    const config::ExperimentConfig config = tasks::parse_config(raw);
    ASSERT_EQ(config.model.image.patches, c.at("patches").get<int64_t>());
    Rng init(1), dropout(2);
    models::VitModel model(config.model, init, dropout);
    model.set_training(false);
    set_parameters(model, c.at("parameters"));
    const Json& inputs = c.at("inputs");
    const Var logits = model.logits(model.encode(json_tensor(inputs.at("patches"))));
    testing::expect_close(logits.value(), c.at("logits"), 1e-5, 1e-4, "vit logits");
    const std::vector<int32_t> labels = inputs.at("labels").get<std::vector<int32_t>>();
    Var loss = ops::cross_entropy(logits, Tensor::from_ints({static_cast<int64_t>(labels.size())}, labels));
    EXPECT_NEAR(loss.item(), c.at("loss").get<double>(), 1e-5);
    loss.backward();
    for (const auto& named : model.named_parameters()) {
        ASSERT_TRUE(named.parameter.grad().defined()) << named.name;
        testing::expect_close(named.parameter.grad(), c.at("grads").at(named.name), 1e-5, 1e-3, "vit grad " + named.name);
    }
}

INSTANTIATE_TEST_SUITE_P(Paper002, LayerParity, ::testing::ValuesIn(testing::fixture_case_names("layers.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Kind, AttentionParity, ::testing::ValuesIn(testing::fixture_case_names("attention.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace hnas
