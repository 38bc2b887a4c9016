// PyTorch parity of whole tiny models: an encoder-decoder and a BERT-style encoder, each with lnas and
// with hnas, padding in the batch. Fixtures: tests/fixtures/models.json (scripts/make_fixtures.py). The
// model is built from the fixture's config in our format, its parameters set by name; the logits, the
// loss and the gradient of every parameter must match.
#include "config/experiment_config.h"
#include "models/bert.h"
#include "models/model_factory.h"
#include "models/seq2seq.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

using testing::Json;
using testing::json_tensor;

// Every parameter set by name from the fixture case (which must hold exactly the model's).
void set_parameters(const std::vector<nn::NamedParameter>& parameters, const Json& c) {
    ASSERT_EQ(parameters.size(), c.at("parameters").size());
    for (const auto& named : parameters) {
        ASSERT_TRUE(c.at("parameters").contains(named.name)) << "fixture lacks " << named.name;
        const Tensor value = json_tensor(c.at("parameters").at(named.name));
        ASSERT_EQ(value.shape(), named.parameter.shape()) << named.name;
        std::copy_n(value.data(), value.numel(), const_cast<Var&>(named.parameter).value().data());
    }
}

// Every parameter's gradient against the fixture's. Only parameters the loss does not reach (the
// pooler) may lack a gradient; theirs is zero.
void expect_fixture_gradients(const std::vector<nn::NamedParameter>& parameters, const Json& c, const std::string& name) {
    for (const auto& named : parameters) {
        const Json& expected = c.at("grads").at(named.name);
        if (!named.parameter.grad().defined()) {
            for (const auto& value : expected.at("data")) ASSERT_EQ(value.get<double>(), 0.0) << named.name;
            continue;
        }
        testing::expect_close(named.parameter.grad(), expected, 1e-6, 1e-4, name + " grad " + named.name);
    }
}

class ModelParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelParity, LogitsLossAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("models.json", GetParam());
    const config::ExperimentConfig parsed = tasks::parse_config(c.at("config"));
    Rng init(1), dropout(2);
    const auto model = models::build_model(parsed.model, init, dropout);
    model->set_training(false);

    const auto parameters = model->named_parameters();
    set_parameters(parameters, c);

    const Json& in = c.at("inputs");
    Var logits, loss;
    if (parsed.model.architecture == models::Architecture::seq2seq) {
        const auto& seq2seq = static_cast<const models::Seq2SeqModel&>(*model);
        const Tensor source_valid = json_tensor(in.at("source_valid"));
        Var memory = seq2seq.encode(json_tensor(in.at("source_ids")), source_valid);
        logits = seq2seq.logits(seq2seq.decode(memory, source_valid, json_tensor(in.at("target_input")),
                                               json_tensor(in.at("target_valid"))));
        loss = ops::cross_entropy(logits, json_tensor(in.at("target_output")).reshape({-1}), models::kPadId,
                                  c.at("label_smoothing").get<float>());
    } else {
        const auto& bert = static_cast<const models::BertModel&>(*model);
        Var states = bert.encode(json_tensor(in.at("input_ids")), json_tensor(in.at("segment_ids")), json_tensor(in.at("valid")));
        logits = bert.mlm_logits(states, json_tensor(in.at("masked_positions")));
        loss = ops::cross_entropy(logits, json_tensor(in.at("masked_labels")), models::kPadId);
    }
    testing::expect_close(logits.value(), c.at("logits"), 1e-6, 1e-5, GetParam() + " logits");
    testing::expect_close(loss.value(), c.at("loss"), 1e-5, 1e-5, GetParam() + " loss");
    loss.backward();
    expect_fixture_gradients(parameters, c, GetParam());
}

// The heads of every task on the BERT-style encoder, with their losses (tests/fixtures/heads.json).
class HeadParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HeadParity, LogitsLossAndEveryGradientMatch) {
    const Json& c = testing::fixture_case("heads.json", GetParam());
    config::ExperimentConfig parsed = tasks::parse_config(c.at("config"));
    const Json& heads = c.at("heads");
    parsed.model.bert_heads = {heads.value("masked_lm", true), heads.value("sentence_order", false),
                               heads.value("classes", int64_t{0}), heads.value("span", false)};
    Rng init(1), dropout(2);
    models::BertModel bert(parsed.model, init, dropout);
    bert.set_training(false);
    const auto parameters = bert.named_parameters();
    set_parameters(parameters, c);

    const Json& in = c.at("inputs");
    const Tensor valid = json_tensor(in.at("valid"));
    const Var states = bert.encode(json_tensor(in.at("input_ids")), json_tensor(in.at("segment_ids")), valid);
    Var logits, loss;
    if (GetParam() == "sop") {
        logits = bert.sentence_order_logits(bert.pooled(states));
        const Var masked_lm = ops::cross_entropy(bert.mlm_logits(states, json_tensor(in.at("masked_positions"))),
                                                 json_tensor(in.at("masked_labels")), models::kPadId);
        loss = ops::add(masked_lm, ops::cross_entropy(logits, json_tensor(in.at("sentence_order"))));
    } else if (GetParam() == "classify") {
        logits = bert.class_logits(bert.pooled(states));
        loss = ops::cross_entropy(logits, json_tensor(in.at("labels")));
    } else if (GetParam() == "regression") {
        logits = bert.class_logits(bert.pooled(states));
        loss = models::regression_loss(logits, json_tensor(in.at("targets")));
    } else {
        ASSERT_EQ(GetParam(), "span");
        const models::SpanLogits span = bert.span_logits(states, valid);
        logits = ops::concat({ops::reshape(span.start, {1, valid.dim(0), valid.dim(1)}),
                              ops::reshape(span.end, {1, valid.dim(0), valid.dim(1)})}, 0);
        loss = models::span_loss(span, json_tensor(in.at("start_positions")), json_tensor(in.at("end_positions")));
    }
    testing::expect_close(logits.value(), c.at("logits"), 1e-6, 1e-5, GetParam() + " logits");
    testing::expect_close(loss.value(), c.at("loss"), 1e-5, 1e-5, GetParam() + " loss");
    loss.backward();
    expect_fixture_gradients(parameters, c, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Head, HeadParity, ::testing::ValuesIn(testing::fixture_case_names("heads.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Model, ModelParity, ::testing::ValuesIn(testing::fixture_case_names("models.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace hnas
