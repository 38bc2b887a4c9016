// Cross-entropy over logits, fused with log-softmax, with an ignore index and label smoothing.
#include <algorithm>
#include <cmath>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

Var cross_entropy(const Var& logits, const Tensor& targets, int ignore_index, float label_smoothing) {
    HNAS_CHECK(logits.rank() == 2, "cross_entropy: logits must be (N, V), got ", shape_str(logits.shape()));
    HNAS_CHECK(targets.dtype() == DType::i32 && targets.shape() == Shape{logits.dim(0)},
               "cross_entropy: targets must be int32 (", logits.dim(0), "), got ", name_of(targets.dtype()), " ",
               shape_str(targets.shape()));
    HNAS_CHECK(label_smoothing >= 0.0f && label_smoothing < 1.0f, "cross_entropy: label smoothing must be in [0, 1), got ",
               label_smoothing);
    const int64_t rows = logits.dim(0), classes = logits.dim(1);
    const int32_t* target = targets.ints();
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
        if (target[r] == ignore_index) continue;
        HNAS_CHECK(target[r] >= 0 && target[r] < classes, "cross_entropy: target ", target[r], " at row ", r,
                   " is outside the ", classes, " classes");
        ++counted;
    }
    // Per row: the loss −(1−ε)·log p_t − (ε/V)·Σ_j log p_j, and logsumexp for the backward pass.
    // The 8,000-wide rows are summed in vector lanes (omp simd) with the vectorizable fast_exp.
    Tensor row_lse = Tensor::empty({rows});
    const float* in = logits.value().data();
    float* lse = row_lse.data();
    double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (logits.numel() >= kernels::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
        if (target[r] == ignore_index) continue;
        const float* row = in + r * classes;
        const float top = kernels::max_value(row, classes);
        float sum_exp = 0.0f, sum_logits = 0.0f;
#pragma omp simd reduction(+ : sum_exp, sum_logits)
        for (int64_t j = 0; j < classes; ++j) {
            sum_exp += kernels::fast_exp(row[j] - top);
            sum_logits += row[j];
        }
        const double log_normalizer = top + std::log(static_cast<double>(sum_exp));
        lse[r] = static_cast<float>(log_normalizer);
        const double nll = log_normalizer - row[target[r]];
        const double smooth = log_normalizer - static_cast<double>(sum_logits) / static_cast<double>(classes);
        total += (1.0 - label_smoothing) * nll + label_smoothing * smooth;
    }
    const float loss = counted > 0 ? static_cast<float>(total / static_cast<double>(counted)) : 0.0f;
    Tensor lv = logits.value(), targets_kept = targets;
    return make_result("cross_entropy", Tensor::scalar(loss), {logits},
                       [=, targets = targets_kept](const Tensor& dy, GradSink& sink) {
                           // d loss / d logit_j = (softmax_j − (1−ε)·[j = t] − ε/V) · dy / count
                           const GradSink::Target logits_target = sink.target(0);
                           Tensor& dx = logits_target.grad;
                           const bool accumulate = logits_target.accumulate;
                           const float upstream = counted > 0 ? dy.item() / static_cast<float>(counted) : 0.0f;
                           const float uniform = label_smoothing / static_cast<float>(classes);
                           const float *in = lv.data(), *lse = row_lse.data();
                           const int32_t* target = targets.ints();
                           float* d = dx.data();
                           // The logits' gradient feeds the output projection's backward products.
                           uint16_t* rounded = backend::operand_copy_to_fill(dx);
#pragma omp parallel for schedule(static) if (dx.numel() >= kernels::kParallelGrain)
                           for (int64_t r = 0; r < rows; ++r) {
                               float* drow = d + r * classes;
                               uint16_t* rounded_row = rounded == nullptr ? nullptr : rounded + r * classes;
                               const float* row = in + r * classes;
                               if (target[r] == ignore_index) {
                                   if (!accumulate) std::fill(drow, drow + classes, 0.0f);
                                   kernels::round_row_to_bf16(drow, rounded_row, classes);
                                   continue;
                               }
                               const float row_lse = lse[r];
#pragma omp simd
                               for (int64_t j = 0; j < classes; ++j) {
                                   const float value = (kernels::fast_exp(row[j] - row_lse) - uniform) * upstream;
                                   write_gradient(drow[j], value, accumulate);
                               }
                               drow[target[r]] -= (1.0f - label_smoothing) * upstream;
                               kernels::round_row_to_bf16(drow, rounded_row, classes);
                           }
                       });
}

}  // namespace hnas::ops
