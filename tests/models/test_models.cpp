// Models: tiny seq2seq and BERT models build from JSON and train a step; shared weights and tables are
// the sums of their copies; the memory estimate counts what is built; model checkpoints round-trip
// bit-exactly; ⟨BERT,BERT⟩ initialization copies what it should and nothing else. Configs alone are in
// tests/config/test_config.cpp.
#include <cmath>
#include <cstring>
#include <map>

#include "config/experiment_config.h"
#include "models/bert.h"
#include "models/memory_estimate.h"
#include "models/model_factory.h"
#include "models/model_io.h"
#include "models/seq2seq.h"
#include "tasks/task.h"
#include "test_support.h"
#include "tiny_config.h"

namespace hnas {
namespace {

using config::Json;
using testing::tiny_config;

// The largest sizes a config allows multiply past int64 in the activations' estimate: it saturates at
// 2^50 bytes instead of wrapping to a small number that would pass the memory check.
TEST(Models, MemoryEstimateOfTheLargestConfigSaturatesInsteadOfWrapping) {
    Json raw = tiny_config("headline");
    raw["model"]["d_model"] = 1 << 20;
    raw["model"]["heads"] = 4096;
    raw["model"]["ffn_dim"] = 1 << 20;
    raw["model"]["encoder_layers"] = 1024;
    raw["model"]["decoder_layers"] = 1024;
    const config::ExperimentConfig parsed = tasks::parse_config(raw);
    const int64_t rows = 1 << 20, length = 1 << 20;
    const models::MemoryEstimate estimate = models::estimate_training_memory(parsed.model, {rows, length, length, rows * length});
    EXPECT_EQ(estimate.activation_bytes, int64_t{1} << 50);
    EXPECT_GT(estimate.total_bytes(), int64_t{1} << 50);
}

TEST(Models, MemoryEstimateCountsTheParametersOfTheBuiltModel) {
    for (const std::string task : {"headline", "mlm"}) {
        for (const std::string norm : {"post", "pre", "mte"}) {
            for (const std::string mixer : {"attention", "sum", "max"}) {
                for (const bool attention_norm : {true, false}) {
                    if ((mixer != "attention" || !attention_norm) && norm != "mte") continue;
                    const std::string label = task + " " + norm + " " + mixer + (attention_norm ? "" : " without attention norm");
                    Json raw = tiny_config(task);
                    raw["model"]["norm"] = norm;
                    raw["model"]["mixer"] = mixer;
                    raw["model"]["mte_attention_norm"] = attention_norm;
                    if (task == "headline") raw["model"]["tie_embeddings"] = norm == "pre";
                    const config::ExperimentConfig parsed = tasks::parse_config(raw);
                    Rng init(1), dropout(2);
                    const int64_t built = task == "headline" ? models::Seq2SeqModel(parsed.model, init, dropout).parameter_count()
                                                             : models::BertModel(parsed.model, init, dropout).parameter_count();
                    const models::MemoryEstimate estimate = models::estimate_training_memory(parsed.model, {4, 16, 16, 64});
                    // Only the attention kinds' per-head scalars are left out (hnas: one u per head and layer).
                    const int64_t per_head_scalars = mixer == "attention" ? parsed.model.heads * parsed.model.encoder_layers : 0;
                    EXPECT_EQ(estimate.parameters + per_head_scalars, built) << label;
                    EXPECT_EQ(estimate.parameter_bytes, 16 * estimate.parameters);
                    EXPECT_GT(estimate.activation_bytes, 0);
                }
            }
        }
    }
    // Paper 002's symbol encoder, for each of its outputs and with or without positions (nap: gain and
    // bias per head are the scalars left out).
    for (const auto& [problem, output] : std::vector<std::pair<std::string, std::string>>{
             {"case_distinction", "every_position"}, {"case_distinction", "first_position"}, {"mode", "first_position"}}) {
        const Json raw = {{"task", "synthetic"},
                          {"model", {{"vocab_size", 107}, {"d_model", 16}, {"heads", 2}, {"norm", "mte"},
                                     {"positions", problem == "mode" ? "none" : "learned"},
                                     {"attention", {{"encoder", {{"kind", "nap"}}}}}}},
                          {"data", {{"problem", problem}, {"output", output}}}};
        const config::ExperimentConfig parsed = tasks::parse_config(raw);
        Rng init(1), dropout(2);
        const int64_t built = models::build_model(parsed.model, init, dropout)->parameter_count();
        const int64_t per_head_scalars = 2 * parsed.model.heads * parsed.model.encoder_layers;
        EXPECT_EQ(models::estimate_training_memory(parsed.model, {4, 16, 0, 0}).parameters + per_head_scalars, built)
            << problem << " " << output;
    }
}

// T5's prior shared by each stack (`prior.shared`): one table per stack and none in the layers; the
// model computes what a model whose layers each hold that table computes, the shared table's gradient
// is the sum of theirs, and the memory estimate counts it once.
TEST(Models, SharedPriorIsEveryLayerHoldingTheSameTable) {
    for (const std::string task : {"headline", "mlm"}) {
        Json per_layer = tiny_config(task), shared = tiny_config(task);
        const std::vector<std::string> stacks =
            task == "headline" ? std::vector<std::string>{"encoder", "decoder", "cross"} : std::vector<std::string>{"encoder"};
        for (const std::string& stack : stacks) {
            const Json prior = {{"enabled", true}, {"buckets", 8}, {"max_distance", 16}};
            per_layer["model"]["attention"][stack]["prior"] = prior;
            shared["model"]["attention"][stack]["prior"] = prior;
            shared["model"]["attention"][stack]["prior"]["shared"] = true;
        }
        const config::ExperimentConfig a = tasks::parse_config(per_layer), b = tasks::parse_config(shared);
        Rng init_a(1), dropout_a(2), init_b(1), dropout_b(2);
        const auto layered = models::build_model(a.model, init_a, dropout_a);
        const auto stacked = models::build_model(b.model, init_b, dropout_b);
        // Each stack's table at random, and the same table in each layer of the other model.
        struct Owner {
            std::string table, stack, attention;  // the shared table; its layers' stack and attention
        };
        std::vector<Owner> owners{{"encoder.relative_bias.weight", "encoder", "self_attn"}};
        if (task == "headline") {
            owners.push_back({"decoder.relative_bias.weight", "decoder", "self_attn"});
            owners.push_back({"decoder.cross_relative_bias.weight", "decoder", "cross_attn"});
        }
        auto layer_table = [](const Owner& owner, int layer) {
            return owner.stack + ".layers." + std::to_string(layer) + "." + owner.attention + ".relative_bias.weight";
        };
        for (size_t o = 0; o < owners.size(); ++o) {
            Tensor table = stacked->parameter(owners[o].table).value();
            const Tensor values = testing::random_tensor(table.shape(), 60 + o, -1.0f, 1.0f);
            std::copy_n(values.data(), values.numel(), table.data());
            for (int layer = 0; layer < 2; ++layer) {
                Tensor own = layered->parameter(layer_table(owners[o], layer)).value();
                std::copy_n(values.data(), values.numel(), own.data());
            }
            EXPECT_CONTAINS(testing::error_of([&] { stacked->parameter(layer_table(owners[o], 0)); }), "relative_bias");
        }
        EXPECT_EQ(layered->parameter_count() - stacked->parameter_count(), static_cast<int64_t>(owners.size()) * 8 * 4) << task;
        const int64_t per_head_scalars = b.model.heads * b.model.encoder_layers;  // hnas's u, left out of the estimate
        EXPECT_EQ(models::estimate_training_memory(b.model, {4, 16, 16, 64}).parameters + per_head_scalars,
                  stacked->parameter_count()) << task;

        const Tensor ids = Tensor::from_ints({2, 6}, {5, 9, 12, 7, 30, 8, 6, 11, 40, 13, 0, 0});
        const Tensor valid = Tensor::from_floats({2, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
        auto loss_of = [&](const models::Model& model) {
            if (task == "headline") {
                const auto& seq2seq = dynamic_cast<const models::Seq2SeqModel&>(model);
                const Tensor targets = Tensor::from_ints({2, 4}, {1, 14, 15, 16, 1, 17, 18, 0});
                const Tensor outputs = Tensor::from_ints({2, 4}, {14, 15, 16, 2, 17, 18, 2, 0});
                return seq2seq.loss(ids, valid, targets, outputs, Tensor::from_floats({2, 4}, {1, 1, 1, 1, 1, 1, 1, 0}), 0.0f);
            }
            const Var states = dynamic_cast<const models::TokenModel&>(model).encode_tokens(ids, valid);
            return ops::sum_all(ops::mul(states, Var(testing::random_tensor(states.shape(), 64))));
        };
        Var loss_a = loss_of(*layered), loss_b = loss_of(*stacked);
        EXPECT_EQ(loss_a.value().data()[0], loss_b.value().data()[0]) << task;
        loss_a.backward();
        loss_b.backward();
        for (const Owner& owner : owners) {
            const Tensor grad = stacked->parameter(owner.table).grad();
            const Tensor g0 = layered->parameter(layer_table(owner, 0)).grad(), g1 = layered->parameter(layer_table(owner, 1)).grad();
            double norm = 0.0;
            for (int64_t e = 0; e < grad.numel(); ++e) {
                EXPECT_NEAR(grad.data()[e], g0.data()[e] + g1.data()[e], 1e-5) << task << " " << owner.table << " element " << e;
                norm += std::fabs(grad.data()[e]);
            }
            EXPECT_GT(norm, 0.0) << owner.table;
        }
    }
}

// The seq2seq model with share_encoder_decoder, and one without whose decoder layers hold copies of
// its encoder layers' weights (the attention projections in both self- and cross-attention): the same
// loss, and each shared weight's gradient is the sum of its copies' gradients.
TEST(Models, SharedEncoderDecoderIsTheDecoderRunningOnTheEncodersWeights) {
    Json separate = tiny_config("headline"), shared = tiny_config("headline");
    shared["model"]["share_encoder_decoder"] = true;
    const config::ExperimentConfig a = tasks::parse_config(separate), b = tasks::parse_config(shared);
    Rng init_a(1), dropout_a(2), init_b(1), dropout_b(2);
    const models::Seq2SeqModel copies(a.model, init_a, dropout_a), tied(b.model, init_b, dropout_b);
    // The parameter of `tied` that parameter `name` of `copies` is a copy of.
    auto tied_source = [&](std::string name) {
        const std::string decoder = "decoder.layers.";
        if (name.rfind(decoder, 0) != 0 || name.find("cross_attn_norm") != std::string::npos) return name;
        name.replace(0, decoder.size(), "encoder.layers.");
        const size_t cross = name.find("cross_attn.");
        if (cross != std::string::npos) name.replace(cross, 11, "self_attn.");
        return name;
    };
    for (const auto& named : copies.named_parameters()) {
        const Tensor source = tied.parameter(tied_source(named.name)).value();
        ASSERT_EQ(source.shape(), named.parameter.shape()) << named.name;
        std::copy_n(source.data(), source.numel(), const_cast<Var&>(named.parameter).value().data());
    }
    EXPECT_CONTAINS(testing::error_of([&] { tied.parameter("decoder.layers.1.ffn.fc1.weight"); }), "no parameter named");
    EXPECT_CONTAINS(testing::error_of([&] { tied.parameter("decoder.layers.0.cross_attn.k_proj.weight"); }), "no parameter named");
    const int64_t hnas_scalars = b.model.heads * b.model.encoder_layers;
    EXPECT_EQ(models::estimate_training_memory(b.model, {4, 16, 16, 64}).parameters + hnas_scalars, tied.parameter_count());
    const int64_t decoder_layer = 2 * 4 * (32 * 32 + 32) + (32 * 64 + 64 + 64 * 32 + 32) + 2 * 2 * 32;  // two attentions, FFN, two norms
    EXPECT_EQ(copies.parameter_count() - tied.parameter_count(), 2 * decoder_layer);

    const Tensor ids = Tensor::from_ints({2, 6}, {5, 9, 12, 7, 30, 8, 6, 11, 40, 13, 0, 0});
    const Tensor valid = Tensor::from_floats({2, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    const Tensor targets = Tensor::from_ints({2, 4}, {1, 14, 15, 16, 1, 17, 18, 0});
    const Tensor outputs = Tensor::from_ints({2, 4}, {14, 15, 16, 2, 17, 18, 2, 0});
    const Tensor target_valid = Tensor::from_floats({2, 4}, {1, 1, 1, 1, 1, 1, 1, 0});
    Var loss_a = copies.loss(ids, valid, targets, outputs, target_valid, 0.0f);
    Var loss_b = tied.loss(ids, valid, targets, outputs, target_valid, 0.0f);
    EXPECT_EQ(loss_a.item(), loss_b.item());
    loss_a.backward();
    loss_b.backward();
    std::map<std::string, Tensor> summed;
    for (const auto& named : copies.named_parameters()) {
        const Tensor grad = named.parameter.grad();
        ASSERT_TRUE(grad.defined()) << named.name;
        auto [entry, fresh] = summed.try_emplace(tied_source(named.name), grad.clone());
        if (!fresh) {
            for (int64_t e = 0; e < grad.numel(); ++e) entry->second.data()[e] += grad.data()[e];
        }
    }
    ASSERT_EQ(summed.size(), tied.named_parameters().size());
    for (const auto& named : tied.named_parameters()) {
        const Tensor grad = named.parameter.grad(), expected = summed.at(named.name);
        for (int64_t e = 0; e < grad.numel(); ++e) {
            EXPECT_NEAR(grad.data()[e], expected.data()[e], 1e-5f * (1.0f + std::fabs(expected.data()[e]))) << named.name << " element " << e;
        }
    }
}

TEST(Models, SharedEncoderDecoderMatchesFiniteDifferences) {
    const Json raw = {{"task", "headline"},
                      {"seed", 3},
                      {"model",
                       {{"vocab_size", 12}, {"d_model", 8}, {"heads", 2}, {"ffn_dim", 12}, {"encoder_layers", 1},
                        {"decoder_layers", 1}, {"max_source_positions", 6}, {"max_target_positions", 4},
                        {"share_encoder_decoder", true},
                        {"dropout", {{"embedding", 0.0}, {"attention", 0.0}, {"residual", 0.0}}},
                        {"attention", {{"encoder", {{"kind", "hnas"}}}, {"decoder", {{"kind", "lnas"}}}}}}}};
    const config::ExperimentConfig parsed = tasks::parse_config(raw);
    Rng init(5), dropout(6);
    const models::Seq2SeqModel model(parsed.model, init, dropout);
    const Tensor ids = Tensor::from_ints({2, 5}, {4, 9, 7, 5, 3, 6, 11, 8, 0, 0});
    const Tensor valid = Tensor::from_floats({2, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    const Tensor targets = Tensor::from_ints({2, 3}, {1, 5, 6, 1, 10, 0});
    const Tensor target_valid = Tensor::from_floats({2, 3}, {1, 1, 1, 1, 1, 0});
    testing::check_parameter_gradients(
        model, [&] { return model.logits(model.decode(model.encode(ids, valid), valid, targets, target_valid)); }, {1e-2f, 3e-3},
        "shared encoder-decoder");
}

// data.pad_multiple pads batches further: with dropout off, a batch padded to longer
// source and target rows gives the same loss and the same gradient of every parameter, for each kind.
TEST(Models, FurtherPaddingLeavesLossAndGradientsUnchanged) {
    auto pad_columns = [](const Tensor& t, int64_t length) {
        Tensor padded = Tensor::zeros({t.dim(0), length}, t.dtype());
        for (int64_t r = 0; r < t.dim(0); ++r) {
            for (int64_t c = 0; c < t.dim(1); ++c) {
                if (t.dtype() == DType::i32) {
                    padded.ints()[r * length + c] = t.ints()[r * t.dim(1) + c];
                } else {
                    padded.data()[r * length + c] = t.data()[r * t.dim(1) + c];
                }
            }
        }
        return padded;
    };
    for (const std::string kind : {"lnas", "dnas", "hnas"}) {
        const Json raw = {{"task", "headline"},
                          {"model",
                           {{"vocab_size", 12}, {"d_model", 8}, {"heads", 2}, {"ffn_dim", 12}, {"encoder_layers", 1},
                            {"decoder_layers", 1}, {"max_source_positions", 8}, {"max_target_positions", 8},
                            {"dropout", {{"embedding", 0.0}, {"attention", 0.0}, {"residual", 0.0}}},
                            {"attention", {{"encoder", {{"kind", kind}}}, {"decoder", {{"kind", kind == "dnas" ? "dnas_causal" : "lnas"}}}}}}}};
        const config::ExperimentConfig parsed = tasks::parse_config(raw);
        Rng init(5), dropout(6);
        const models::Seq2SeqModel model(parsed.model, init, dropout);
        const Tensor ids = Tensor::from_ints({2, 5}, {4, 9, 7, 5, 3, 6, 11, 8, 0, 0});
        const Tensor valid = Tensor::from_floats({2, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
        const Tensor input = Tensor::from_ints({2, 3}, {2, 5, 6, 2, 10, 0});
        const Tensor output = Tensor::from_ints({2, 3}, {5, 6, 3, 10, 3, 0});
        const Tensor target_valid = Tensor::from_floats({2, 3}, {1, 1, 1, 1, 1, 0});
        auto loss_and_gradients = [&](int64_t source, int64_t target) {
            for (auto& named : model.named_parameters()) named.parameter.zero_grad();
            Var loss = model.loss(pad_columns(ids, source), pad_columns(valid, source), pad_columns(input, target),
                                  pad_columns(output, target), pad_columns(target_valid, target), 0.1f);
            loss.backward();
            std::vector<Tensor> gradients;
            for (const auto& named : model.named_parameters()) gradients.push_back(named.parameter.grad().clone());
            return std::make_pair(static_cast<double>(loss.item()), gradients);
        };
        const auto [loss, gradients] = loss_and_gradients(5, 3);
        const auto [padded_loss, padded_gradients] = loss_and_gradients(8, 8);
        EXPECT_NEAR(padded_loss, loss, 1e-6) << kind;
        const auto parameters = model.named_parameters();
        for (size_t p = 0; p < gradients.size(); ++p) {
            ASSERT_EQ(padded_gradients[p].shape(), gradients[p].shape());
            for (int64_t e = 0; e < gradients[p].numel(); ++e) {
                ASSERT_NEAR(padded_gradients[p].data()[e], gradients[p].data()[e], 1e-6 + 1e-4 * std::abs(gradients[p].data()[e]))
                    << kind << " " << parameters[p].name << " element " << e;
            }
        }
    }
}

// weight_init truncated_normal: every matrix (embeddings and projections) from N(0, 0.02²) cut at 2σ;
// layer norms and biases keep their start.
TEST(Models, TruncatedNormalInitDrawsEveryMatrixWithinTwoSigma) {
    Json raw = tiny_config("mlm");
    raw["model"]["weight_init"] = "truncated_normal";
    const config::ExperimentConfig parsed = tasks::parse_config(raw);
    Rng init(1), dropout(2);
    const auto model = models::build_model(parsed.model, init, dropout);
    double squares = 0.0;
    int64_t count = 0;
    for (const auto& named : model->named_parameters()) {
        const Tensor& value = named.parameter.value();
        if (value.rank() != 2) continue;
        for (int64_t e = 0; e < value.numel(); ++e) {
            ASSERT_LE(std::abs(value.data()[e]), 0.04f) << named.name;
            squares += static_cast<double>(value.data()[e]) * value.data()[e];
        }
        count += value.numel();
    }
    // The standard deviation of N(0, 1) truncated at ±2 is 0.880.
    EXPECT_NEAR(std::sqrt(squares / static_cast<double>(count)), 0.02 * 0.880, 0.0005);
    EXPECT_EQ(model->parameter("encoder.layers.0.ffn_norm.weight").value().data()[0], 1.0f);
    EXPECT_EQ(model->parameter("encoder.layers.0.ffn.fc1.bias").value().data()[0], 0.0f);
}

TEST(Models, TinyModelsBuildAndLearn) {
    for (const std::string task : {"headline", "mlm"}) {
        const config::ExperimentConfig parsed = tasks::parse_config(tiny_config(task));
        Rng init(1), dropout(2);
        std::unique_ptr<nn::Module> model;
        std::function<Var()> loss;
        const Tensor ids = Tensor::from_ints({2, 5}, {5, 6, 7, 8, 9, 10, 11, 12, 0, 0});
        const Tensor valid = Tensor::from_floats({2, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
        if (task == "headline") {
            auto seq2seq = std::make_unique<models::Seq2SeqModel>(parsed.model, init, dropout);
            const Tensor target_in = Tensor::from_ints({2, 3}, {2, 13, 14, 2, 15, 0});
            const Tensor target_out = Tensor::from_ints({2, 3}, {13, 14, 3, 15, 3, 0});
            const Tensor target_valid = Tensor::from_floats({2, 3}, {1, 1, 1, 1, 1, 0});
            loss = [m = seq2seq.get(), ids, valid, target_in, target_out, target_valid] {
                return m->loss(ids, valid, target_in, target_out, target_valid, 0.1f);
            };
            model = std::move(seq2seq);
        } else {
            auto bert = std::make_unique<models::BertModel>(parsed.model, init, dropout);
            const Tensor segments = Tensor::from_ints({2, 5}, {0, 0, 0, 1, 1, 0, 0, 1, 0, 0});
            const Tensor positions = Tensor::from_ints({3}, {1, 3, 6}), labels = Tensor::from_ints({3}, {20, 21, 22});
            loss = [m = bert.get(), ids, segments, valid, positions, labels] {
                return m->mlm_loss(ids, segments, valid, positions, labels);
            };
            model = std::move(bert);
        }
        const float first = loss().item();
        EXPECT_TRUE(std::isfinite(first)) << task;
        // One plain SGD step along the gradient lowers the loss.
        model->zero_grad();
        loss().backward();
        for (auto& named : model->named_parameters()) {
            if (!named.parameter.grad().defined()) continue;
            float* w = named.parameter.value().data();
            const float* g = named.parameter.grad().data();
            for (int64_t i = 0; i < named.parameter.numel(); ++i) w[i] -= 0.05f * g[i];
        }
        EXPECT_LT(loss().item(), first) << task;
    }
}

TEST(Models, ParameterCountsGroupByModuleKind) {
    const auto groups = models::group_parameter_counts({{"embedding.weight", 10},
                                                         {"encoder.layers.0.self_attn.q_proj.weight", 4},
                                                         {"encoder.layers.11.self_attn.q_proj.bias", 2},
                                                         {"encoder.layers.3.ffn_norm.weight", 1},
                                                         {"mlm_head.bias", 5}});
    const std::vector<std::pair<std::string, int64_t>> expected{
        {"embedding", 10}, {"encoder.layers.*.self_attn", 6}, {"encoder.layers.*.ffn_norm", 1}, {"mlm_head", 5}};
    EXPECT_EQ(groups, expected);
}

TEST(Models, ParameterNamesFollowTheModuleTree) {
    const config::ExperimentConfig parsed = tasks::parse_config(tiny_config("headline"));
    Rng init(1), dropout(2);
    models::Seq2SeqModel model(parsed.model, init, dropout);
    for (const char* name : {"embedding.weight", "encoder.positions.weight", "encoder.layers.1.self_attn.q_proj.weight",
                             "encoder.layers.0.self_attn.norm.hybrid_theta", "decoder.layers.1.cross_attn.out_proj.bias",
                             "decoder.layers.0.ffn_norm.weight"}) {
        EXPECT_NO_THROW(model.parameter(name)) << name;
    }
    EXPECT_THROW(model.parameter("decoder.layers.0.self_attn.norm.hybrid_theta"), Error);  // lnas there
}

TEST(Models, CheckpointRoundTripIsBitExact) {
    const testing::ScratchDir dir(testing::name_for_this_test("hnas_models_"));
    const config::ExperimentConfig parsed = tasks::parse_config(tiny_config("headline"));
    Rng init_a(1), init_b(99), dropout(2);
    models::Seq2SeqModel a(parsed.model, init_a, dropout), b(parsed.model, init_b, dropout);
    io::CheckpointWriter writer(Json{{"config", parsed.resolved}});
    models::add_parameters(writer, a);
    const std::string path = dir.path("model.ckpt");
    writer.write(path);
    models::load_parameters(io::Checkpoint::load(path), b);
    for (const auto& named : a.named_parameters()) {
        const Tensor& x = named.parameter.value();
        const Tensor& y = b.parameter(named.name).value();
        ASSERT_EQ(std::memcmp(x.data(), y.data(), static_cast<size_t>(x.numel()) * 4), 0) << named.name;
    }
    // A model of another shape cannot load it, and the error names parameter and shapes.
    Json other = tiny_config("headline");
    other["model"]["ffn_dim"] = 48;
    Rng init_c(3);
    models::Seq2SeqModel c(tasks::parse_config(other).model, init_c, dropout);
    try {
        models::load_parameters(io::Checkpoint::load(path), c);
        FAIL() << "loaded a mismatched checkpoint";
    } catch (const Error& e) {
        EXPECT_CONTAINS(e.what(), "ffn.fc1.weight");
        EXPECT_CONTAINS(e.what(), "(64, 32)");
        EXPECT_CONTAINS(e.what(), "(48, 32)");
    }
}

// model.scale_embeddings is the seq2seq option; BERT's token embeddings are never scaled, however a
// config built in code sets it (hnas-bench's reference config sets it for both tasks).
TEST(Models, BertIgnoresTheSeq2SeqEmbeddingScale) {
    config::ExperimentConfig config = tasks::parse_config(tiny_config("mlm"));
    config.model.embedding_dropout = config.model.attention_dropout = config.model.residual_dropout = 0.0f;
    auto loss_with_scale = [&](bool scale) {
        config.model.scale_embeddings = scale;
        Rng init(5), dropout(2);
        const models::BertModel bert(config.model, init, dropout);
        const Tensor ids = Tensor::from_ints({1, 4}, {7, 8, 9, 10}), segments = Tensor::from_ints({1, 4}, {0, 0, 1, 1});
        return bert.mlm_loss(ids, segments, Tensor::full({1, 4}, 1.0f), Tensor::from_ints({2}, {1, 2}),
                             Tensor::from_ints({2}, {11, 12}))
            .item();
    };
    EXPECT_EQ(loss_with_scale(true), loss_with_scale(false));
}

TEST(Models, BertBertInitializationCopiesEncoderIntoBothStacks) {
    const testing::ScratchDir dir(testing::name_for_this_test("hnas_models_"));
    const config::ExperimentConfig bert_config = tasks::parse_config(tiny_config("mlm"));
    Rng bert_init(5), dropout(2);
    models::BertModel bert(bert_config.model, bert_init, dropout);
    io::CheckpointWriter writer(Json::object());
    models::add_parameters(writer, bert);
    const std::string path = dir.path("bert.ckpt");
    writer.write(path);

    Json raw = tiny_config("headline");
    raw["model"]["embedding_norm"] = true;
    raw["model"]["scale_embeddings"] = false;
    const config::ExperimentConfig seq2seq_config = tasks::parse_config(raw);
    Rng init(6);
    models::Seq2SeqModel model(seq2seq_config.model, init, dropout);
    const Tensor cross_before = model.parameter("decoder.layers.0.cross_attn.q_proj.weight").value().clone();
    const models::InitReport report = models::initialize_from_bert(io::Checkpoint::load(path), model);

    auto equal = [](const Tensor& a, const Tensor& b, int64_t count) {
        return std::memcmp(a.data(), b.data(), static_cast<size_t>(count) * 4) == 0;
    };
    for (const auto& [source, target] : report.mapped) {
        const Tensor& to = model.parameter(target).value();
        EXPECT_TRUE(equal(bert.parameter(source).value(), to, to.numel())) << source << " -> " << target;
    }
    // Encoder layer N feeds encoder and decoder layer N; embeddings feed the shared table and both norms.
    for (const char* target : {"embedding.weight", "encoder.norm.weight", "decoder.norm.bias", "encoder.positions.weight",
                               "decoder.positions.weight", "encoder.layers.1.ffn.fc2.weight",
                               "decoder.layers.1.self_attn.k_proj.bias", "decoder.layers.0.ffn_norm.weight"}) {
        const bool found = std::any_of(report.mapped.begin(), report.mapped.end(),
                                       [&](const auto& pair) { return pair.second == target; });
        EXPECT_TRUE(found) << target << " was not mapped";
    }
    // Cross-attention is fresh; BERT's heads and its decoder-less hybrid weights are unused.
    EXPECT_TRUE(equal(cross_before, model.parameter("decoder.layers.0.cross_attn.q_proj.weight").value(), cross_before.numel()));
    EXPECT_NE(std::find(report.fresh.begin(), report.fresh.end(), "decoder.layers.0.cross_attn.q_proj.weight"), report.fresh.end());
    EXPECT_NE(std::find(report.unused.begin(), report.unused.end(), "mlm_head.dense.weight"), report.unused.end());

    // Pre-norm stacks: BERT's final norm (before its heads) starts both stacks' final norms.
    Json pre_bert_raw = tiny_config("mlm");
    pre_bert_raw["model"]["norm"] = "pre";
    Rng pre_bert_init(8);
    models::BertModel pre_bert(tasks::parse_config(pre_bert_raw).model, pre_bert_init, dropout);
    // A trained norm, so that a fresh one (ones and zeros) cannot pass for the copy.
    for (const char* name : {"encoder.final_norm.weight", "encoder.final_norm.bias"}) {
        Tensor& value = pre_bert.parameter(name).value();
        const Tensor trained = testing::random_tensor(value.shape(), 70, -1.0f, 1.0f);
        std::memcpy(value.data(), trained.data(), static_cast<size_t>(value.numel()) * sizeof(float));
    }
    io::CheckpointWriter pre_writer(Json::object());
    models::add_parameters(pre_writer, pre_bert);
    const std::string pre_path = dir.path("pre_bert.ckpt");
    pre_writer.write(pre_path);
    Json pre_raw = raw;
    pre_raw["model"]["norm"] = "pre";
    Rng pre_init(9);
    models::Seq2SeqModel pre_model(tasks::parse_config(pre_raw).model, pre_init, dropout);
    const models::InitReport pre_report = models::initialize_from_bert(io::Checkpoint::load(pre_path), pre_model);
    for (const char* target : {"encoder.final_norm.weight", "encoder.final_norm.bias", "decoder.final_norm.weight",
                               "decoder.final_norm.bias"}) {
        const std::string source = std::string("encoder.final_norm.") + (std::string(target).ends_with("weight") ? "weight" : "bias");
        const bool found = std::any_of(pre_report.mapped.begin(), pre_report.mapped.end(), [&](const auto& pair) {
            return pair.first == source && pair.second == target;
        });
        EXPECT_TRUE(found) << target << " was not mapped from " << source;
        const Tensor& to = pre_model.parameter(target).value();
        EXPECT_TRUE(equal(pre_bert.parameter(source).value(), to, to.numel())) << target;
    }
    EXPECT_EQ(std::find(pre_report.unused.begin(), pre_report.unused.end(), "encoder.final_norm.weight"), pre_report.unused.end());

    // Embeddings that are not BERT's (scaled by √d) cannot start from it.
    Json scaled = raw;
    scaled["model"]["scale_embeddings"] = true;
    Rng init_scaled(10);
    models::Seq2SeqModel scaled_model(tasks::parse_config(scaled).model, init_scaled, dropout);
    try {
        models::initialize_from_bert(io::Checkpoint::load(path), scaled_model);
        FAIL() << "mapped BERT's embeddings into scaled ones";
    } catch (const Error& e) {
        EXPECT_CONTAINS(e.what(), "model.embedding_norm true and model.scale_embeddings false (they are true and true)");
    }

    // A wider seq2seq model cannot start from it.
    Json wide = raw;
    wide["model"]["d_model"] = 64;
    Rng init_wide(7);
    models::Seq2SeqModel wide_model(tasks::parse_config(wide).model, init_wide, dropout);
    try {
        models::initialize_from_bert(io::Checkpoint::load(path), wide_model);
        FAIL() << "mapped mismatched sizes";
    } catch (const Error& e) {
        EXPECT_CONTAINS(e.what(), "embeddings.tokens.weight has shape (50, 32)");
        EXPECT_CONTAINS(e.what(), "(50, 64)");
    }
}

}  // namespace
}  // namespace hnas
