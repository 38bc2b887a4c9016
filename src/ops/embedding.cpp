// Embedding lookup: rows of a (V, D) table gathered by int32 ids; backward scatter-adds into the rows.
#include <algorithm>
#include <cstring>

#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

Var embedding(const Var& weight, const Tensor& ids) {
    HNAS_CHECK(weight.rank() == 2, "embedding: weight must be (vocabulary, width), got ", shape_str(weight.shape()));
    HNAS_CHECK(ids.dtype() == DType::i32, "embedding: ids must be int32, got ", name_of(ids.dtype()));
    const int64_t vocabulary = weight.dim(0), width = weight.dim(1), count = ids.numel();
    const int32_t* id = ids.ints();
    for (int64_t t = 0; t < count; ++t) {
        HNAS_CHECK(id[t] >= 0 && id[t] < vocabulary, "embedding: id ", id[t], " at position ", t,
                   " is outside the vocabulary of ", vocabulary);
    }
    Shape out_shape = ids.shape();
    out_shape.push_back(width);
    Tensor out = Tensor::empty(out_shape);
    const float* table = weight.value().data();
    float* o = out.data();
#pragma omp parallel for schedule(static) if (count * width >= kernels::kParallelGrain)
    for (int64_t t = 0; t < count; ++t) {
        std::memcpy(o + t * width, table + static_cast<int64_t>(id[t]) * width, static_cast<size_t>(width) * sizeof(float));
    }
    return make_result("embedding", out, {weight}, [ids, count, width](const Tensor& dy, GradSink& sink) {
        const GradSink::Target target = sink.target(0);
        Tensor& dw = target.grad;
        const bool accumulate = target.accumulate;
        if (!accumulate) dw.fill(0.0f);
        const int32_t* id = ids.ints();
        const float* g = dy.data();
        float* d = dw.data();
        // Threads own disjoint column blocks, so repeated ids never race.
        constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (count * width >= kernels::kParallelGrain)
        for (int64_t column = 0; column < width; column += kBlock) {
            const int64_t end = std::min(width, column + kBlock);
            for (int64_t t = 0; t < count; ++t) {
                float* row = d + static_cast<int64_t>(id[t]) * width;
                const float* grow = g + t * width;
                for (int64_t j = column; j < end; ++j) row[j] += grow[j];
            }
        }
    });
}

}  // namespace hnas::ops
