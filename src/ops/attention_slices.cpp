#include "ops/attention_slices.h"

namespace hnas::ops {

void check_attention_mask(const AttentionDims& d, const AttentionMask& mask, const char* op) {
    const Shape scores{d.batch, d.heads, d.queries, d.keys};
    HNAS_CHECK(!mask.key_valid.defined() || (mask.key_valid.shape() == Shape{d.batch, d.keys}), op, ": key_valid ",
               shape_str(mask.key_valid.shape()), " does not match scores ", shape_str(scores));
    HNAS_CHECK(!mask.query_valid.defined() || (mask.query_valid.shape() == Shape{d.batch, d.queries}), op,
               ": query_valid ", shape_str(mask.query_valid.shape()), " does not match scores ", shape_str(scores));
}

AttentionDims check_attention_shapes(const Var& scores, const AttentionMask& mask, const char* op) {
    HNAS_CHECK(scores.rank() == 4, op, ": scores must be (B, H, Lq, Lk), got ", shape_str(scores.shape()));
    const AttentionDims d{scores.dim(0), scores.dim(1), scores.dim(2), scores.dim(3)};
    check_attention_mask(d, mask, op);
    return d;
}

// Row by row, so the copy vectorizes.
void load_masked(const float* scores, const SliceMask& mask, int64_t queries, int64_t keys, float* out) {
    for (int64_t i = 0; i < queries; ++i) {
        const float* in = scores + i * keys;
        float* row = out + i * keys;
        const int64_t end = mask.query_real(i) ? mask.visible_end(i, keys) : 0;
        if (mask.key_valid) {
            for (int64_t j = 0; j < end; ++j) row[j] = mask.key_valid[j] > 0.5f ? in[j] : kMinusInfinity;
        } else {
            for (int64_t j = 0; j < end; ++j) row[j] = in[j];
        }
        for (int64_t j = end; j < keys; ++j) row[j] = kMinusInfinity;
    }
}

WantedGradient wanted_gradient(GradSink& sink, size_t input) {
    if (!sink.wants(input)) return {};
    const GradSink::Target target = sink.target(input);  // once: it marks the gradient initialized
    return {target.grad, target.accumulate, target.grad.data()};
}

void add_head_gradient(GradSink& sink, size_t input, const std::vector<double>& per_slice, const AttentionDims& d) {
    if (!sink.wants(input)) return;
    const GradSink::Target target = sink.target(input);
    for (int64_t h = 0; h < d.heads; ++h) {
        double total = 0.0;
        for (int64_t b = 0; b < d.batch; ++b) total += per_slice[static_cast<size_t>(b * d.heads + h)];
        write_gradient(target.grad.data()[h], static_cast<float>(total), target.accumulate);
    }
}

Var normalize_slices(const char* op, const Var& scores, const AttentionMask& mask, const SliceNormalizer& normalizer) {
    const AttentionDims d = check_attention_shapes(scores, mask, op);
    Tensor weights = Tensor::empty(scores.shape());
    const std::shared_ptr<SliceNormalization> norm = normalizer.make(d, {scores.value(), weights});
    const int64_t n = d.slice();
    const float* S = scores.value().data();
    float* A = weights.data();
    for_each_slice(d, [&](int64_t s, SliceScratch& scratch) {
        norm->forward(s, S + s * n, SliceMask(mask, d, s / d.heads), A + s * n, scratch);
    });
    std::vector<Var> inputs{scores};
    inputs.insert(inputs.end(), normalizer.parameters.begin(), normalizer.parameters.end());
    return make_result(op, weights, inputs, [=](const Tensor& dy, GradSink& sink) {
        const WantedGradient dscores = wanted_gradient(sink, 0).with_operand_copy();
        for_each_slice(d, [&](int64_t s, SliceScratch& scratch) {
            float* out = dscores.slice(s, n);
            float* G = out != nullptr && dscores.accumulate ? SliceScratch::sized(scratch.gradient, n) : out;
            norm->backward(s, dy.data() + s * n, SliceMask(mask, d, s / d.heads), G, scratch);
            if (G != out) {
#pragma omp simd
                for (int64_t e = 0; e < n; ++e) out[e] += G[e];
            }
            dscores.round_slice(s, n);
        });
        norm->write_parameter_gradients(sink, 1);
    });
}

}  // namespace hnas::ops
