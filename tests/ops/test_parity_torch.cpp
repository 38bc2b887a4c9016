// PyTorch parity for single ops: every case of tests/fixtures/ops.json (scripts/make_fixtures.py) runs
// the op on the fixture's inputs and compares the output and the vector-Jacobian product with the
// fixture's grad_output against PyTorch's, computed in float64 from the same float32 inputs.
#include <set>

#include "test_support.h"

namespace hnas {
namespace {

using testing::Json;
using testing::json_tensor;

// Builds the op named in a fixture case from its float inputs (in fixture order) and attributes.
Var run_op(const std::string& op, const Json& attrs, const std::vector<Var>& in, const std::vector<Tensor>& fixed) {
    auto attr_int = [&](const char* key) { return attrs.at(key).get<int>(); };
    auto attr_bool = [&](const char* key) { return attrs.at(key).get<bool>(); };
    if (op == "matmul") return ops::matmul(in[0], in[1], attr_bool("trans_a"), attr_bool("trans_b"));
    if (op == "linear") return ops::linear(in[0], in[1], in[2]);
    if (op == "add") return ops::add(in[0], in[1]);
    if (op == "sub") return ops::sub(in[0], in[1]);
    if (op == "mul") return ops::mul(in[0], in[1]);
    if (op == "div") return ops::div(in[0], in[1]);
    if (op == "scale") return ops::scale(in[0], attrs.at("factor").get<float>());
    if (op == "sum") return ops::sum(in[0], attr_int("axis"), attr_bool("keepdim"));
    if (op == "mean") return ops::mean(in[0], attr_int("axis"), attr_bool("keepdim"));
    if (op == "max") return ops::max(in[0], attr_int("axis"), attr_bool("keepdim"));
    if (op == "logsumexp") return ops::logsumexp(in[0], attr_int("axis"), attr_bool("keepdim"));
    if (op == "exp") return ops::exp(in[0]);
    if (op == "log") return ops::log(in[0]);
    if (op == "sqrt") return ops::sqrt(in[0]);
    if (op == "rsqrt") return ops::rsqrt(in[0]);
    if (op == "relu") return ops::relu(in[0]);
    if (op == "tanh") return ops::tanh(in[0]);
    if (op == "sigmoid") return ops::sigmoid(in[0]);
    if (op == "gelu") {
        return ops::gelu(in[0], attrs.at("approximate").get<std::string>() == "tanh" ? ops::GeluForm::tanh
                                                                                    : ops::GeluForm::erf);
    }
    if (op == "softmax") return ops::softmax(in[0], attr_int("axis"), fixed.at(0));
    if (op == "log_softmax") return ops::log_softmax(in[0], attr_int("axis"), fixed.at(0));
    if (op == "layer_norm") return ops::layer_norm(in[0], in[1], in[2], attrs.at("eps").get<float>());
    if (op == "embedding") return ops::embedding(in[0], fixed.at(0));
    if (op == "cross_entropy") {
        return ops::cross_entropy(in[0], fixed.at(0), attr_int("ignore_index"), attrs.at("label_smoothing").get<float>());
    }
    if (op == "transpose") return ops::transpose(in[0], attr_int("axis0"), attr_int("axis1"));
    if (op == "permute") return ops::permute(in[0], attrs.at("dims").get<std::vector<int>>());
    if (op == "reshape") return ops::reshape(in[0], attrs.at("shape").get<Shape>());
    if (op == "concat") return ops::concat(in, attr_int("axis"));
    if (op == "slice") return ops::slice(in[0], attr_int("axis"), attrs.at("start").get<int64_t>(), attrs.at("end").get<int64_t>());
    if (op == "head_scores") return ops::head_scores(in[0], in[1], attr_int("heads"), attrs.at("alpha").get<float>());
    if (op == "head_context") return ops::head_context(in[0], in[1]);
    throw Error("fixture names an op this test does not know: " + op);
}

class TorchParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchParity, OutputAndGradientsMatch) {
    const Json& c = testing::fixture_case("ops.json", GetParam());
    const std::string& name = GetParam();
    // Differentiable inputs are those with a gradient in the fixture; the rest (masks, ids) are fixed.
    std::vector<Var> inputs;
    std::vector<std::string> input_names;
    std::vector<Tensor> fixed;
    for (const auto& [input_name, tensor] : c.at("inputs").items()) {
        if (c.at("grads").contains(input_name)) {
            inputs.emplace_back(json_tensor(tensor), true);
            input_names.push_back(input_name);
        } else {
            fixed.push_back(json_tensor(tensor));
        }
    }
    Var output = run_op(c.at("op").get<std::string>(), c.at("attrs"), inputs, fixed);
    // Masked log-softmax entries sit near −1e9, where f32 resolves only ~64: hence a relative bound too.
    testing::expect_close(output.value(), c.at("output"), 2e-5, 2e-5, name + " output");
    Var loss = ops::sum_all(ops::mul(output, Var(json_tensor(c.at("grad_output")))));
    loss.backward();
    for (size_t i = 0; i < inputs.size(); ++i) {
        ASSERT_TRUE(inputs[i].grad().defined()) << name << ": no gradient for " << input_names[i];
        testing::expect_close(inputs[i].grad(), c.at("grads").at(input_names[i]), 2e-5, 2e-4,
                              name + " grad of " + input_names[i]);
    }
}

INSTANTIATE_TEST_SUITE_P(Op, TorchParity, ::testing::ValuesIn(testing::fixture_case_names("ops.json")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The ops the numeric core must match PyTorch on are all present in the fixture.
TEST(TorchParityCoverage, RequiredOpsPresent) {
    std::set<std::string> ops_seen;
    for (const Json& c : testing::fixture_cases("ops.json")) ops_seen.insert(c.at("op").get<std::string>());
    for (const char* required : {"softmax", "log_softmax", "layer_norm", "gelu", "cross_entropy", "matmul", "embedding"}) {
        EXPECT_TRUE(ops_seen.count(required)) << "fixture has no case for " << required;
    }
}

}  // namespace
}  // namespace hnas
