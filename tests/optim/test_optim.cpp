// Optimizers and learning-rate schedules: Adam, AdamW, LAMB and ALBERT's LAMB over five steps against
// tests/fixtures/optim.json (torch.optim's Adam and AdamW, LAMB written out from You et al. 2019 and
// from ALBERT's lamb_optimizer.py; scripts/make_fixtures.py), the parameters' roles, every schedule at hand-computed steps, gradient
// clipping, parameters without a gradient, and a save/load round trip that resumes bit-identically.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend/matmul.h"
#include "io/checkpoint.h"
#include "models/model_factory.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"
#include "test_support.h"
#include "tiny_config.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using optim::OptimizerKind;
using optim::OptimizerOptions;
using optim::ScheduleKind;
using optim::ScheduleOptions;
using testing::Json;
using testing::json_tensor;

// Gradients go in through the public API: d/dw Σ w ⊙ g is exactly g. Call zero_grad() first, since
// backward() adds into an existing gradient.
void set_grad(const Var& parameter, const Tensor& g) { ops::sum_all(ops::mul(parameter, Var(g))).backward(); }

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// ---- the fixture -------------------------------------------------------------------------------------

const Json& fixture_cases() {
    static const Json cases = testing::load_fixture("optim.json").at("cases");
    return cases;
}

const Json& fixture_case(const std::string& name) {
    for (const Json& c : fixture_cases()) {
        if (c.at("name") == name) return c;
    }
    throw Error("optim.json has no case " + name);
}

OptimizerOptions fixture_options(const Json& c) {
    const std::string kind = c.at("kind").get<std::string>();
    const Json& o = c.at("options");
    OptimizerOptions options;
    options.kind = parse_enum<OptimizerKind>(kind, "optimizer");
    options.beta1 = o.at("beta1").get<float>();
    options.beta2 = o.at("beta2").get<float>();
    options.epsilon = o.at("epsilon").get<float>();
    options.weight_decay = o.at("weight_decay").get<float>();
    return options;
}

// Fresh leaves holding the fixture's initial values, in fixture order; those it lists as decayed are
// weights, the others tensors decay leaves alone.
std::vector<nn::NamedParameter> fixture_parameters(const Json& c) {
    const Json& decayed = c.at("decayed");
    std::vector<nn::NamedParameter> parameters;
    for (const auto& item : c.at("parameters").items()) {
        const bool weight = std::find(decayed.begin(), decayed.end(), item.key()) != decayed.end();
        parameters.push_back({item.key(), Var(json_tensor(item.value()), true),
                              weight ? nn::ParameterRole::weight : nn::ParameterRole::no_decay});
    }
    return parameters;
}

// One step of the fixture's run: step t's gradients (0-based), then the update.
void fixture_step(optim::Optimizer& optimizer, const std::vector<nn::NamedParameter>& parameters, const Json& c,
                  size_t t) {
    optimizer.zero_grad();
    for (const auto& named : parameters) set_grad(named.parameter, json_tensor(c.at("grads").at(t).at(named.name)));
    optimizer.step(c.at("options").at("learning_rate").get<float>());
}

class OptimizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerParity, FiveStepsMatchTheReference) {
    const Json& c = fixture_case(GetParam());
    const auto parameters = fixture_parameters(c);
    ASSERT_EQ(parameters.size(), 3u);
    optim::Optimizer optimizer(parameters, fixture_options(c));
    ASSERT_EQ(c.at("steps").size(), 5u);
    for (size_t t = 0; t < c.at("steps").size(); ++t) {
        fixture_step(optimizer, parameters, c, t);
        EXPECT_EQ(optimizer.steps_taken(), static_cast<int64_t>(t + 1));
        for (const auto& named : parameters) {
            // the gradient went in exactly
            EXPECT_TRUE(same_bits(named.parameter.grad(), json_tensor(c.at("grads").at(t).at(named.name)))) << named.name;
            // float32 against float64: the worst seen is 1.2e-7 absolute; without LAMB's decay term the
            // step-5 error would be 4e-4
            testing::expect_close(named.parameter.value(), c.at("steps").at(t).at(named.name), 5e-7, 1e-6,
                                  GetParam() + " step " + std::to_string(t + 1) + " " + named.name);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Optim, OptimizerParity, ::testing::Values("adamw", "adam", "lamb", "lamb_albert"),
                         [](const auto& info) { return info.param; });

// ---- the loops on large tensors ---------------------------------------------------------------------

// The optimizers one value at a time, as their definitions read (LAMB's norms summed in order).
void reference_step(OptimizerKind kind, const OptimizerOptions& o, std::vector<float>& w, std::vector<float>& m,
                    std::vector<float>& v, const std::vector<float>& g, int step, float rate) {
    const bool lamb = kind == OptimizerKind::lamb;
    const float c1 = 1.0f - std::pow(o.beta1, static_cast<float>(step)), c2 = 1.0f - std::pow(o.beta2, static_cast<float>(step));
    std::vector<float> r(w.size());
    double weight_squares = 0.0, update_squares = 0.0;
    for (size_t i = 0; i < w.size(); ++i) {
        const float gi = kind == OptimizerKind::adam ? g[i] + o.weight_decay * w[i] : g[i];
        m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * gi;
        v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * gi * gi;
        r[i] = (m[i] / c1) / (std::sqrt(v[i] / c2) + o.epsilon);
        if (lamb) r[i] += o.weight_decay * w[i];
        weight_squares += static_cast<double>(w[i]) * w[i];
        update_squares += static_cast<double>(r[i]) * r[i];
    }
    const float trust = lamb ? static_cast<float>(std::sqrt(weight_squares) / std::sqrt(update_squares)) : 1.0f;
    for (size_t i = 0; i < w.size(); ++i) {
        w[i] -= kind == OptimizerKind::adamw ? rate * (r[i] + o.weight_decay * w[i]) : rate * trust * r[i];
    }
}

// Tensors large enough for two threads and for several of LAMB's blocks of norms: every kind follows
// its definition to float rounding (the library's build fuses multiply-adds, LAMB sums its norms in
// blocks), and gives the same bits on one thread as on two.
TEST(OptimizerLoops, LargeTensorsMatchTheDefinitionOnAnyThreadCount) {
    const int64_t n = 3 * 16384 + 5;
    const int steps = 3;
    const float rate = 1e-2f;
    const int threads_before = backend::num_threads();
    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::lamb}) {
        OptimizerOptions options;
        options.kind = kind;
        options.weight_decay = 0.01f;
        std::vector<Tensor> results;
        for (int threads : {1, 2}) {
            backend::set_num_threads(threads);
            const Var weight(testing::random_tensor({n}, 5), true);
            optim::Optimizer optimizer({{"layer.weight", weight}}, options);
            std::vector<float> w = weight.value().to_floats(), m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
            for (int t = 1; t <= steps; ++t) {
                const Tensor g = testing::random_tensor({n}, 100 + static_cast<uint64_t>(t));
                optimizer.zero_grad();
                set_grad(weight, g);
                optimizer.step(rate);
                reference_step(kind, options, w, m, v, g.to_floats(), t, rate);
            }
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_NEAR(weight.value().data()[i], w[static_cast<size_t>(i)], 1e-6)
                    << name_of(kind) << " on " << threads << " threads, value " << i;
            }
            results.push_back(weight.value().clone());
        }
        EXPECT_TRUE(same_bits(results[0], results[1])) << name_of(kind) << ": 1 thread against 2";
    }
    backend::set_num_threads(threads_before);
}

// Adam's update and the clipping norm run over every tensor's stretches in one parallel region: each
// tensor still gets its own definition's update (a large one, a small one, one without a gradient left
// alone), and the norm and weights are the same bits on one thread as on two.
TEST(OptimizerLoops, TensorsUpdatedInOneRegionMatchTheirDefinitionsOnAnyThreadCount) {
    const std::vector<int64_t> sizes{2 * 16384 + 9, 7, 4096 + 1};
    const int threads_before = backend::num_threads();
    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw}) {
        OptimizerOptions options;
        options.kind = kind;
        options.weight_decay = 0.01f;
        std::vector<std::vector<Tensor>> results;
        std::vector<double> norms;
        for (int threads : {1, 2}) {
            backend::set_num_threads(threads);
            std::vector<nn::NamedParameter> parameters;
            std::vector<std::vector<float>> w, m, v;
            for (size_t p = 0; p < sizes.size(); ++p) {
                parameters.push_back({"layer" + std::to_string(p) + ".weight",
                                      Var(testing::random_tensor({sizes[p]}, 20 + p), true)});
                w.push_back(parameters[p].parameter.value().to_floats());
                m.emplace_back(static_cast<size_t>(sizes[p]));
                v.emplace_back(static_cast<size_t>(sizes[p]));
            }
            optim::Optimizer optimizer(parameters, options);
            for (int t = 1; t <= 2; ++t) {
                optimizer.zero_grad();
                for (size_t p = 0; p < 2; ++p) {  // the last tensor has no gradient
                    const Tensor g = testing::random_tensor({sizes[p]}, 200 + 10 * static_cast<uint64_t>(t) + p);
                    set_grad(parameters[p].parameter, g);
                    reference_step(kind, options, w[p], m[p], v[p], g.to_floats(), t, 1e-2f);
                }
                norms.push_back(optim::clip_factors(parameters, 1.0).norm);
                optimizer.step(1e-2f);
            }
            results.emplace_back();
            for (size_t p = 0; p < sizes.size(); ++p) {
                for (int64_t i = 0; i < sizes[p]; ++i) {
                    ASSERT_NEAR(parameters[p].parameter.value().data()[i], w[p][static_cast<size_t>(i)], 1e-6)
                        << name_of(kind) << " on " << threads << " threads, tensor " << p << " value " << i;
                }
                results.back().push_back(parameters[p].parameter.value().clone());
            }
        }
        for (size_t p = 0; p < sizes.size(); ++p) EXPECT_TRUE(same_bits(results[0][p], results[1][p])) << name_of(kind) << " tensor " << p;
        EXPECT_EQ(norms[0], norms[2]) << "the first step's norm, 1 thread against 2";
        EXPECT_EQ(norms[1], norms[3]) << "the second step's norm, 1 thread against 2";
    }
    backend::set_num_threads(threads_before);
}

// Under bf16 a step writes each weight's bf16 copy with its new values, for the products that read it,
// and leaves biases' alone; under f32, no copy.
TEST(OptimizerLoops, UnderBf16TheStepWritesTheWeightsBf16Copies) {
    HNAS_SKIP_WITHOUT_BF16();
    const int64_t n = 2 * 4096 + 7;
    for (backend::MatmulPrecision precision : {backend::MatmulPrecision::bf16, backend::MatmulPrecision::f32}) {
        testing::PrecisionScope scope(precision);
        for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::lamb}) {
            OptimizerOptions options;
            options.kind = kind;
            const Var weight(testing::random_tensor({n}, 5), true), bias(testing::random_tensor({7}, 6), true);
            optim::Optimizer optimizer({{"layer.weight", weight}, {"layer.bias", bias, nn::ParameterRole::no_decay}}, options);
            for (int t = 1; t <= 2; ++t) {
                optimizer.zero_grad();
                set_grad(weight, testing::random_tensor({n}, 100 + static_cast<uint64_t>(t)));
                set_grad(bias, testing::random_tensor({7}, 200 + static_cast<uint64_t>(t)));
                optimizer.step(1e-2f);
            }
            if (precision == backend::MatmulPrecision::bf16) {
                EXPECT_TRUE(testing::holds_current_bf16_copy(weight.value())) << name_of(kind);
            } else {
                EXPECT_FALSE(weight.value().bf16_copy().second) << name_of(kind);
            }
            EXPECT_FALSE(bias.value().bf16_copy().second) << name_of(kind);
        }
    }
}

// ---- which parameters are decayed --------------------------------------------------------------------

// Each parameter's role is declared where the parameter is registered; over every kind of parameter the
// models hold, it agrees with what the parameter is: biases, layer norms, the attention kinds' own
// parameters (under an attention's "norm") and the relative-position priors are not decayed, hnas's θ is
// the gate, and everything else is a decayed weight.
TEST(ParameterRoles, BiasesNormsKindsAndPriorsAreNotDecayedAndTheGatesAreMarked) {
    const auto expected_role = [](const std::string& name) {
        if (name.ends_with(".hybrid_theta")) return nn::ParameterRole::hybrid_gate;
        const bool offset_or_scale = name.ends_with(".bias") || name.find("norm.") != std::string::npos ||
                                     name.find("relative_bias.") != std::string::npos;
        return offset_or_scale ? nn::ParameterRole::no_decay : nn::ParameterRole::weight;
    };
    std::map<nn::ParameterRole, int> seen;
    for (const std::string task : {"headline", "mlm"}) {
        for (const std::string kind : {"hnas", "nap"}) {
            Json raw = testing::tiny_config(task);
            raw["model"]["attention"]["encoder"] = {{"kind", kind}, {"prior", {{"enabled", true}}}};
            const config::ExperimentConfig config = tasks::parse_config(raw);
            Rng init(1), dropout(2);
            const auto model = models::build_model(config.model, init, dropout);
            for (const nn::NamedParameter& named : model->named_parameters()) {
                EXPECT_EQ(named.role, expected_role(named.name)) << task << "/" << kind << ": " << named.name;
                ++seen[named.role];
            }
        }
    }
    EXPECT_GT(seen[nn::ParameterRole::weight], 0);
    EXPECT_GT(seen[nn::ParameterRole::no_decay], 0);
    EXPECT_GT(seen[nn::ParameterRole::hybrid_gate], 0);
}

// hnas's gates step at train.gate_learning_rate_scale times the rate: given the same gradient, a gate
// moves `scale` times as far as a norm's gain (Adam's first step: lr·g/(|g| + ε) each).
TEST(GateRateScale, OnlyTheHybridGatesStepAtTheirMultiple) {
    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::lamb_albert}) {
        OptimizerOptions options;
        options.kind = kind;
        options.gate_rate_scale = 30.0f;
        std::vector<nn::NamedParameter> parameters = {
            {"layer.norm.hybrid_theta", Var(Tensor::full({2}, 0.0f), true), nn::ParameterRole::hybrid_gate},
            {"layer.norm.gain", Var(Tensor::full({2}, 0.0f), true), nn::ParameterRole::no_decay}};
        optim::Optimizer optimizer(parameters, options);
        optimizer.zero_grad();
        for (auto& named : parameters) set_grad(named.parameter, Tensor::full({2}, 0.5f));
        optimizer.step(1e-3f);
        const float gate = parameters[0].parameter.value().data()[0], gain = parameters[1].parameter.value().data()[0];
        if (kind != OptimizerKind::lamb_albert) {  // ALBERT's LAMB has no bias correction
            EXPECT_NEAR(gain, -1e-3f, 1e-8f) << static_cast<int>(kind);
        }
        EXPECT_LT(gain, 0.0f) << static_cast<int>(kind);
        EXPECT_NEAR(gate, 30.0f * gain, 1e-5f * std::abs(gain)) << static_cast<int>(kind);
    }
}

// ---- schedules ---------------------------------------------------------------------------------------

ScheduleOptions schedule(ScheduleKind kind, int64_t warmup, int64_t total, double min_lr = 0.0) {
    ScheduleOptions options;
    options.kind = kind;
    options.learning_rate = 1e-3;
    options.warmup_steps = warmup;
    options.total_steps = total;
    options.min_learning_rate = min_lr;
    return options;
}

TEST(Schedule, ConstantIgnoresWarmupAndTotal) {
    const auto o = schedule(ScheduleKind::constant, 10, 110);
    for (int64_t step : {1, 5, 10, 11, 110, 1000000}) EXPECT_EQ(optim::learning_rate_at(o, step), 1e-3) << step;
}

TEST(Schedule, LinearWarmsUpThenDecaysToZeroAtTotal) {
    const auto o = schedule(ScheduleKind::linear, 10, 110);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 1), 1e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 5), 5e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 10), 1e-3);   // end of warm-up: the peak
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 11), 9.9e-4);  // 99 of 100 decay steps left
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 60), 5e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 109), 1e-5);
    EXPECT_EQ(optim::learning_rate_at(o, 110), 0.0);
    EXPECT_EQ(optim::learning_rate_at(o, 111), 0.0);
    EXPECT_EQ(optim::learning_rate_at(o, 1000), 0.0);

    const auto no_warmup = schedule(ScheduleKind::linear, 0, 100);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(no_warmup, 1), 9.9e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(no_warmup, 50), 5e-4);
    EXPECT_EQ(optim::learning_rate_at(no_warmup, 100), 0.0);
}

// BERT's form (paper 002's code, WarmUpThenLinDecaySchedule): warm-up, then the decay that began at step 0.
TEST(Schedule, BertLinearDecaysFromStepZeroAfterWarmup) {
    const auto o = schedule(ScheduleKind::bert_linear, 10, 100);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 5), 5e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 10), 1e-3);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 11), 8.9e-4);  // 89 of 100 steps left: the drop after warm-up
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 50), 5e-4);
    EXPECT_EQ(optim::learning_rate_at(o, 100), 0.0);
}

TEST(Schedule, InverseSqrtWarmsUpThenDecaysAsOneOverRootStep) {
    const auto o = schedule(ScheduleKind::inverse_sqrt, 16, 0);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 1), 6.25e-5);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 8), 5e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 16), 1e-3);    // end of warm-up: the peak
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 64), 5e-4);    // √(16/64) = 1/2
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 400), 2e-4);   // √(16/400) = 1/5
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 1600), 1e-4);  // no end: total_steps plays no part

    const auto no_warmup = schedule(ScheduleKind::inverse_sqrt, 0, 0);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(no_warmup, 1), 1e-3);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(no_warmup, 4), 5e-4);
}

TEST(Schedule, CosineWarmsUpThenFallsToMinLearningRate) {
    const auto o = schedule(ScheduleKind::cosine, 10, 110, 2e-5);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 1), 1e-4);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 10), 1e-3);
    // min + (lr − min)/2 · (1 + cos(π · progress)), progress = (step − 10) / 100
    EXPECT_NEAR(optim::learning_rate_at(o, 11), 9.997582145792085e-4, 1e-17);  // cos(π/100)
    EXPECT_NEAR(optim::learning_rate_at(o, 35), 8.564823227814083e-4, 1e-17);  // 2e-5 + 4.9e-4 (1 + √½)
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 60), 5.1e-4);                  // half way: the mean
    EXPECT_NEAR(optim::learning_rate_at(o, 85), 1.6351767721859168e-4, 1e-17);  // 2e-5 + 4.9e-4 (1 − √½)
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 110), 2e-5);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 111), 2e-5);
    EXPECT_DOUBLE_EQ(optim::learning_rate_at(o, 10000), 2e-5);
}

TEST(Schedule, StepsCountFromOne) {
    for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::inverse_sqrt, ScheduleKind::cosine}) {
        EXPECT_THROW(optim::learning_rate_at(schedule(kind, 10, 110), 0), Error);
    }
}

// ---- gradient clipping -------------------------------------------------------------------------------

TEST(ClipGradients, ReturnsTheGlobalNormAndScalesOnlyAboveMaxNorm) {
    std::vector<nn::NamedParameter> parameters = {{"a", Var(Tensor::zeros({3}), true)},
                                                  {"b", Var(Tensor::zeros({2, 2}), true)},
                                                  {"unused", Var(Tensor::zeros({2}), true)}};
    const Tensor a = Tensor::from_floats({3}, {1.0f, -2.0f, 2.0f});
    const Tensor b = Tensor::from_floats({2, 2}, {0.0f, 4.0f, 0.0f, 0.0f});
    set_grad(parameters[0].parameter, a);
    set_grad(parameters[1].parameter, b);

    // √(1 + 4 + 4 + 16) = 5; at or below max_norm, or max_norm 0 (off), every factor is 1
    for (double max_norm : {10.0, 5.0, 0.0, -1.0}) {
        const optim::GradientClip clip = optim::clip_factors(parameters, max_norm);
        EXPECT_EQ(clip.norm, 5.0) << max_norm;
        EXPECT_EQ(clip.factors, (std::vector<float>{1.0f, 1.0f, 1.0f})) << max_norm;
    }
    const optim::GradientClip clip = optim::clip_factors(parameters, 2.5);
    EXPECT_EQ(clip.norm, 5.0);  // the norm before clipping
    EXPECT_EQ(clip.factors, (std::vector<float>{0.5f, 0.5f, 0.5f}));
    EXPECT_TRUE(same_bits(parameters[0].parameter.grad(), a));  // the gradients themselves stay as they are
    EXPECT_TRUE(same_bits(parameters[1].parameter.grad(), b));
    EXPECT_FALSE(parameters[2].parameter.grad().defined());
}

// Per tensor, each gradient is clipped on its own: a small one is left alone while a large one shrinks.
TEST(ClipGradients, PerTensorClipsEachTensorToMaxNorm) {
    std::vector<nn::NamedParameter> parameters = {{"a", Var(Tensor::zeros({3}), true)}, {"b", Var(Tensor::zeros({2, 2}), true)}};
    set_grad(parameters[0].parameter, Tensor::from_floats({3}, {1.0f, -2.0f, 2.0f}));      // norm 3
    set_grad(parameters[1].parameter, Tensor::from_floats({2, 2}, {0.0f, 4.0f, 0.0f, 0.0f}));  // norm 4
    const optim::GradientClip clip = optim::clip_factors(parameters, 3.5, optim::ClipScope::per_tensor);
    EXPECT_EQ(clip.norm, 5.0);  // the global norm before
    EXPECT_EQ(clip.factors, (std::vector<float>{1.0f, 3.5f / 4.0f}));
}

TEST(ClipGradients, LargeGradientsClipToMaxNorm) {
    // 40000 elements: the parallel reduction; plus a small tensor
    std::vector<nn::NamedParameter> parameters = {{"big", Var(Tensor::zeros({200, 200}), true)},
                                                  {"small", Var(Tensor::zeros({7}), true)}};
    const Tensor big = testing::random_tensor({200, 200}, 11), small = testing::random_tensor({7}, 12, -3.0f, 3.0f);
    set_grad(parameters[0].parameter, big);
    set_grad(parameters[1].parameter, small);
    long double squares = 0.0L;
    for (const Tensor& t : {big, small}) {
        for (int64_t i = 0; i < t.numel(); ++i) squares += static_cast<long double>(t.data()[i]) * t.data()[i];
    }
    const double expected = static_cast<double>(std::sqrt(squares));
    ASSERT_GT(expected, 50.0);
    const optim::GradientClip clip = optim::clip_factors(parameters, 1.0);
    EXPECT_NEAR(clip.norm, expected, 1e-12 * expected);
    for (float factor : clip.factors) EXPECT_FLOAT_EQ(factor, static_cast<float>(1.0 / clip.norm));  // one common factor
}

// A step with gradient factors is the step on gradients scaled by them beforehand, for every kind: bit
// for bit, but for Adam's L2 term, which the compiler may fuse with the scaled gradient (one rounding
// fewer); and factors of the wrong count are refused.
TEST(ClipGradients, TheStepAppliesTheFactorsAsItReadsTheGradients) {
    const int64_t n = 3 * 4096 + 5;
    for (OptimizerKind kind :
         {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::lamb, OptimizerKind::lamb_albert}) {
        OptimizerOptions options;
        options.kind = kind;
        options.weight_decay = 0.01f;
        const std::vector<float> factors{0.375f, 1.0f};
        std::vector<Tensor> results;
        for (bool scaled_beforehand : {false, true}) {
            const Var weight(testing::random_tensor({n}, 5), true), bias(testing::random_tensor({7}, 6), true);
            optim::Optimizer optimizer({{"layer.weight", weight}, {"layer.bias", bias, nn::ParameterRole::no_decay}}, options);
            for (int t = 1; t <= 2; ++t) {
                Tensor g = testing::random_tensor({n}, 100 + static_cast<uint64_t>(t));
                if (scaled_beforehand) {
                    for (int64_t i = 0; i < n; ++i) g.data()[i] *= factors[0];
                }
                optimizer.zero_grad();
                set_grad(weight, g);
                set_grad(bias, testing::random_tensor({7}, 200 + static_cast<uint64_t>(t)));
                if (scaled_beforehand) {
                    optimizer.step(1e-2f);
                } else {
                    optimizer.step(1e-2f, factors);
                }
            }
            results.push_back(weight.value().clone());
        }
        if (kind == OptimizerKind::adam) {
            for (int64_t i = 0; i < n; ++i) {
                const float expected = results[1].data()[i];
                // relative to the weight plus the learning rate, the size of one step's move
                ASSERT_NEAR(results[0].data()[i], expected, 1e-6f * (std::abs(expected) + 1e-2f)) << i;
            }
        } else {
            EXPECT_TRUE(same_bits(results[0], results[1])) << name_of(kind);
        }
        EXPECT_FALSE(same_bits(results[0], testing::random_tensor({n}, 5))) << name_of(kind);
    }
    const Var weight(testing::random_tensor({4}, 5), true);
    optim::Optimizer optimizer({{"layer.weight", weight}}, OptimizerOptions{});
    set_grad(weight, testing::random_tensor({4}, 6));
    const std::vector<float> two{1.0f, 1.0f};
    EXPECT_THROW(optimizer.step(1e-2f, two), Error);
}

// ---- files: parameters without a gradient, save and load ---------------------------------------------

class OptimizerFiles : public ::testing::Test {
protected:
    std::string file(const std::string& name) const { return scratch_.path(name); }

    const testing::ScratchDir scratch_{testing::name_for_this_test("hnas_optim_")};
};

TEST_F(OptimizerFiles, ParameterWithoutGradientIsLeftAlone) {
    for (OptimizerKind kind :
         {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::lamb, OptimizerKind::lamb_albert}) {
        OptimizerOptions options;
        options.kind = kind;
        options.weight_decay = 0.1f;  // would move "idle.weight" if it were touched
        const Tensor idle_start = testing::random_tensor({3}, 21);
        std::vector<nn::NamedParameter> parameters = {{"used.weight", Var(testing::random_tensor({2, 2}, 20), true)},
                                                      {"idle.weight", Var(idle_start.clone(), true)}};
        optim::Optimizer optimizer(parameters, options);
        for (int t = 0; t < 2; ++t) {
            optimizer.zero_grad();
            set_grad(parameters[0].parameter, testing::random_tensor({2, 2}, 30 + static_cast<uint64_t>(t)));
            optimizer.step(1e-2f);
        }
        EXPECT_TRUE(same_bits(parameters[1].parameter.value(), idle_start));
        io::CheckpointWriter writer(Json::object());
        optimizer.save(writer);
        writer.write(file("moments.ckpt"));
        const auto checkpoint = io::Checkpoint::load(file("moments.ckpt"));
        ASSERT_EQ(checkpoint.entries().size(), 4u);
        for (const char* moment : {"optimizer/m/", "optimizer/v/"}) {
            const Tensor idle = checkpoint.tensor(std::string(moment) + "idle.weight", {3});
            EXPECT_TRUE(same_bits(idle, Tensor::zeros({3}))) << moment;
            const Tensor used = checkpoint.tensor(std::string(moment) + "used.weight", {2, 2});
            EXPECT_GT(std::abs(used.data()[0]), 0.0f) << moment;
        }
    }
}

class OptimizerResume : public OptimizerFiles, public ::testing::WithParamInterface<std::string> {};

// Three steps, then a checkpoint of the parameters and moments; a fresh optimizer on the loaded values
// must take steps 4 and 5 to the same bits as the run that never stopped.
TEST_P(OptimizerResume, LoadedRunContinuesBitIdentically) {
    const Json& c = fixture_case(GetParam());
    const OptimizerOptions options = fixture_options(c);
    const auto parameters = fixture_parameters(c);
    optim::Optimizer uninterrupted(parameters, options);
    for (size_t t = 0; t < 3; ++t) fixture_step(uninterrupted, parameters, c, t);

    io::CheckpointWriter writer(Json{{"step", uninterrupted.steps_taken()}});
    for (const auto& named : parameters) writer.add_tensor(named.name, named.parameter.value());
    uninterrupted.save(writer);
    writer.write(file("step3.ckpt"));

    const auto checkpoint = io::Checkpoint::load(file("step3.ckpt"));
    std::vector<nn::NamedParameter> resumed, restarted;  // restarted: the same values, fresh moments
    for (const auto& named : parameters) {
        const Tensor stored = checkpoint.tensor(named.name, named.parameter.shape());
        resumed.push_back({named.name, Var(stored.clone(), true), named.role});
        restarted.push_back({named.name, Var(stored.clone(), true), named.role});
    }
    optim::Optimizer loaded(resumed, options), fresh(restarted, options);
    loaded.load(checkpoint, checkpoint.metadata().at("step").get<int64_t>());
    EXPECT_EQ(loaded.steps_taken(), 3);

    bool fresh_differs = false;
    for (size_t t = 3; t < 5; ++t) {
        fixture_step(uninterrupted, parameters, c, t);
        fixture_step(loaded, resumed, c, t);
        fixture_step(fresh, restarted, c, t);
        for (size_t p = 0; p < parameters.size(); ++p) {
            EXPECT_TRUE(same_bits(resumed[p].parameter.value(), parameters[p].parameter.value()))
                << "step " << t + 1 << " " << parameters[p].name;
            fresh_differs = fresh_differs || !same_bits(restarted[p].parameter.value(), parameters[p].parameter.value());
        }
    }
    EXPECT_EQ(loaded.steps_taken(), 5);
    EXPECT_TRUE(fresh_differs) << "the moments should matter: without them the run must diverge";
}

INSTANTIATE_TEST_SUITE_P(Optim, OptimizerResume, ::testing::Values("adamw", "adam", "lamb", "lamb_albert"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hnas
