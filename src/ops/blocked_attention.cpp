// blocked_attention: the attention core head_context(dropout(normalize(head_scores(q, k))), v) computed
// one block of batch rows at a time, each thread on its own blocks: the block's scores, the kind's
// normalization, dropout and the product with V while the block is in cache, and backward likewise,
// so the (B, H, Lq, Lk) scores, dropped weights and their gradients never go to memory: what a kind's
// backward reads it keeps (SliceNormalization), and the dropout mask is kept one byte an entry. The
// composed ops it equals are in its test (AttentionFused.BlockedAttentionMatchesTheComposedOps).
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/attention_slices.h"
#include "ops/dropout_mask.h"

namespace hnas::ops {

namespace {

// A block's scores take about this much (a core's L2 holds them beside the block's rows of Q, K, V and
// the products' own buffers); every thread still gets two blocks or more.
constexpr int64_t kBlockBytes = 256 << 10;

int64_t rows_per_block(const AttentionDims& d) {
    const int64_t by_size = std::max<int64_t>(1, kBlockBytes / (d.heads * d.slice() * static_cast<int64_t>(sizeof(float))));
    const int64_t by_threads = std::max<int64_t>(1, d.batch / (2 * backend::num_threads()));
    return std::min(by_size, by_threads);
}

// One thread's buffers for its blocks, kept across calls so a step faults in no fresh pages.
struct BlockBuffers {
    std::vector<float> scores, weights, gradient;  // a block's slices each: S, then dS; A or A′; dA′, then dA
    std::vector<uint16_t> rounded;                 // bf16 operands: A′, then dS
    SliceScratch scratch;

    void size_for(int64_t values) {
        for (std::vector<float>* buffer : {&scores, &weights, &gradient}) SliceScratch::sized(*buffer, values);
        if (rounded.size() < static_cast<size_t>(values)) rounded.resize(static_cast<size_t>(values));
    }
};

BlockBuffers& thread_buffers() {
    thread_local BlockBuffers buffers;
    return buffers;
}

// The shapes of the core's products, per block of `rows` batch rows: q, k (B, T, H·K) and v (B, Tk, H·Kv)
// with their heads side by side, the scores and weights (rows·H, Lq, Lk) in the thread's buffers.
struct CoreProducts {
    AttentionDims d;
    int64_t width, value_width;  // K and Kv, per head

    backend::MatmulShape shape(int64_t rows, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, bool a_interleaved,
                               bool c_interleaved) const {
        backend::MatmulShape s{rows * d.heads, m, n, k, trans_a, trans_b, false};
        s.heads = d.heads;
        s.a_interleaved = a_interleaved;
        s.b_interleaved = true;
        s.c_interleaved = c_interleaved;
        return s;
    }
    int64_t query_rows(int64_t b) const { return b * d.queries * d.heads * width; }  // offset of batch row b in q
    int64_t key_rows(int64_t b) const { return b * d.keys * d.heads * width; }
    int64_t value_rows(int64_t b) const { return b * d.keys * d.heads * value_width; }
    int64_t output_rows(int64_t b) const { return b * d.queries * d.heads * value_width; }
};

// The block's weights times each entry's dropout factor, in place, and the entries kept (one byte each,
// for the backward) when `kept` is not null: slice s's entry e is element s·Lq·Lk + e of the composed
// dropout's tensor, so the factors are the same.
void drop_weights(const KeepFactors* factors, int64_t first_slice, int64_t slices, int64_t slice, float* values,
                  uint8_t* kept) {
    if (factors == nullptr) return;
    constexpr int64_t kChunk = 256;
    alignas(64) float factor[kChunk];
    const int64_t begin = first_slice * slice, n = slices * slice;
    for (int64_t first = 0; first < n; first += kChunk) {
        const int64_t count = std::min(kChunk, n - first);
        factors->fill(begin + first, count, factor);
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) values[first + j] *= factor[j];
        if (kept == nullptr) continue;
#pragma omp simd
        for (int64_t j = 0; j < count; ++j) kept[begin + first + j] = factor[j] != 0.0f;
    }
}

// The backward's: values (the weights again, or dA′) times the factors the forward kept.
void apply_kept(const uint8_t* kept, float keep_scale, int64_t first_slice, int64_t slices, int64_t slice, float* values) {
    if (kept == nullptr) return;
    const uint8_t* mask = kept + first_slice * slice;
#pragma omp simd
    for (int64_t e = 0; e < slices * slice; ++e) values[e] *= static_cast<float>(mask[e]) * keep_scale;
}

// A block's f32 values as a product's operand: under bf16 their rounding in the thread's buffer.
backend::MatmulOperand block_operand(const float* values, int64_t n, BlockBuffers& buffers) {
    if (backend::matmul_precision() != backend::MatmulPrecision::bf16) return values;
    kernels::round_row_to_bf16(values, buffers.rounded.data(), n);
    return {nullptr, buffers.rounded.data()};
}

// body(first_row, rows, buffers) for every block, the blocks shared among the threads.
template <class Body>
void for_each_block(const AttentionDims& d, Body&& body) {
    const int64_t rows = rows_per_block(d), blocks = (d.batch + rows - 1) / rows;
#pragma omp parallel for schedule(static) if (blocks > 1 && d.slices() * d.slice() >= kernels::kParallelGrain)
    for (int64_t block = 0; block < blocks; ++block) {
        const int64_t first = block * rows, count = std::min(rows, d.batch - first);
        BlockBuffers& buffers = thread_buffers();
        buffers.size_for(count * d.heads * d.slice());
        body(first, count, buffers);
    }
}

struct Gradient {
    float* values = nullptr;  // null: not wanted
    bool accumulate = false;
};

// The operands of one call's products: q, k and v forward, and the output's gradient backward.
struct CoreOperands {
    backend::MatmulOperand q, k, v;
};

// What the blocks of one call share, forward and backward.
struct BlockedCore {
    AttentionDims d;
    CoreProducts products;
    AttentionMask mask;
    float alpha;
    std::shared_ptr<SliceNormalization> norm;
    std::optional<KeepFactors> dropout;  // drawn when p > 0
    Tensor kept;                         // the dropout's kept entries, one byte each, when a backward follows

    SliceMask slice_mask(int64_t s) const { return SliceMask(mask, d, s / d.heads); }

    // A block's scores, normalization and dropped weights A′, and out = A′ V at the block's rows.
    void forward(int64_t first, int64_t rows, BlockBuffers& buffers, const CoreOperands& in, float* out_values,
                 uint16_t* out_rounded) {
        const int64_t n = d.slice(), slices = rows * d.heads, first_slice = first * d.heads;
        float *S = buffers.scores.data(), *A = buffers.weights.data();
        backend::matmul(in.q.plus(products.query_rows(first)), in.k.plus(products.key_rows(first)), S,
                        products.shape(rows, d.queries, d.keys, products.width, false, true, true, false), {alpha});
        for (int64_t i = 0; i < slices; ++i) norm->forward(first_slice + i, S + i * n, slice_mask(first_slice + i), A + i * n, buffers.scratch);
        drop_weights(dropout ? &*dropout : nullptr, first_slice, slices, n, A, kept.defined() ? kept.bytes() : nullptr);
        const int64_t at = products.output_rows(first);
        const backend::MatmulResult result =
            out_rounded ? backend::MatmulResult::bf16_only(out_rounded + at) : backend::MatmulResult(out_values + at);
        backend::matmul(block_operand(A, slices * n, buffers), in.v.plus(products.value_rows(first)), result,
                        products.shape(rows, d.queries, products.value_width, d.keys, false, false, false, true));
    }

    // A block's backward from dout (the rows of dy): dV, then dA′, dA, the normalization's dS, dQ and dK.
    void backward(int64_t first, int64_t rows, BlockBuffers& buffers, const CoreOperands& in, backend::MatmulOperand dy,
                  const Gradient& dq, const Gradient& dk, const Gradient& dv) {
        const int64_t n = d.slice(), slices = rows * d.heads, first_slice = first * d.heads;
        float *dS = buffers.scores.data(), *A = buffers.weights.data(), *G = buffers.gradient.data();
        const uint8_t* kept_entries = kept.defined() ? std::as_const(kept).bytes() : nullptr;
        const float keep_scale = dropout ? dropout->keep_scale : 1.0f;
        const backend::MatmulOperand block_dy = dy.plus(products.output_rows(first));
        // forward: out_h = A′_h V_h, so dA′_h = dout_h V_hᵀ and dV_h = A′_hᵀ dout_h
        backend::matmul(block_dy, in.v.plus(products.value_rows(first)), G,
                        products.shape(rows, d.queries, d.keys, products.value_width, false, true, true, false));
        if (dv.values) {
            for (int64_t i = 0; i < slices; ++i) {
                const float* weights = norm->weights(first_slice + i, slice_mask(first_slice + i), A + i * n, buffers.scratch);
                if (weights != A + i * n) std::copy_n(weights, n, A + i * n);
            }
            apply_kept(kept_entries, keep_scale, first_slice, slices, n, A);
            backend::matmul(block_operand(A, slices * n, buffers), block_dy, dv.values + products.value_rows(first),
                            products.shape(rows, d.keys, products.value_width, d.queries, true, false, false, true),
                            {1.0f, nullptr, dv.accumulate});
        }
        apply_kept(kept_entries, keep_scale, first_slice, slices, n, G);  // forward: A′ = A ⊙ factor
        const bool scores_wanted = dq.values || dk.values;
        for (int64_t i = 0; i < slices; ++i) {
            norm->backward(first_slice + i, G + i * n, slice_mask(first_slice + i), scores_wanted ? dS + i * n : nullptr,
                           buffers.scratch);
        }
        if (!scores_wanted) return;
        // forward: S_h = α Q_h K_hᵀ, so dQ_h = α dS_h K_h and dK_h = α dS_hᵀ Q_h
        const backend::MatmulOperand block_dS = block_operand(dS, slices * n, buffers);
        if (dq.values) {
            backend::matmul(block_dS, in.k.plus(products.key_rows(first)), dq.values + products.query_rows(first),
                            products.shape(rows, d.queries, products.width, d.keys, false, false, false, true),
                            {alpha, nullptr, dq.accumulate});
        }
        if (dk.values) {
            backend::matmul(block_dS, in.q.plus(products.query_rows(first)), dk.values + products.key_rows(first),
                            products.shape(rows, d.keys, products.width, d.queries, true, false, false, true),
                            {alpha, nullptr, dk.accumulate});
        }
    }
};

}  // namespace

Var blocked_attention(const Var& q, const Var& k, const Var& v, int64_t heads, float alpha, const AttentionMask& mask,
                      const SliceNormalizer& normalizer, float dropout, Rng& rng, ResultReaders readers) {
    HNAS_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && heads >= 1 && q.dim(2) % heads == 0 &&
                   k.dim(2) == q.dim(2) && v.dim(2) % heads == 0 && k.dim(0) == q.dim(0) && v.dim(0) == q.dim(0) &&
                   v.dim(1) == k.dim(1),
               "blocked_attention: queries ", shape_str(q.shape()), ", keys ", shape_str(k.shape()), " and values ",
               shape_str(v.shape()), " are not (B, Tq, H·K), (B, Tk, H·K) and (B, Tk, H·Kv) for ", heads, " heads");
    check_dropout_probability("blocked_attention", dropout);
    const AttentionDims d{q.dim(0), heads, q.dim(1), k.dim(1)};
    check_attention_mask(d, mask, "blocked_attention");
    const CoreProducts products{d, q.dim(2) / heads, v.dim(2) / heads};
    if (d.slices() * d.slice() == 0 || products.width == 0 || products.value_width == 0) {  // no product to run
        const Var weights = normalize_slices("blocked_attention", head_scores(q, k, heads, alpha), mask, normalizer);
        return head_context(ops::dropout(weights, dropout, rng, ResultReaders::products), v, readers);
    }
    const auto core = std::make_shared<BlockedCore>(BlockedCore{d, products, mask, alpha, normalizer.make(d, {}), std::nullopt, Tensor()});
    if (dropout > 0.0f) {
        core->dropout = KeepFactors::draw(dropout, rng);
        if (grad_enabled()) core->kept = Tensor::empty({d.slices(), d.slice()}, DType::u8);
    }
    const Shape out_shape{d.batch, d.queries, v.dim(2)};
    const bool bf16_only = readers == ResultReaders::products && backend::matmul_precision() == backend::MatmulPrecision::bf16;
    Tensor out = bf16_only ? Tensor::bf16_only(out_shape) : Tensor::empty(out_shape);
    float* out_values = bf16_only ? nullptr : out.data();
    uint16_t* out_rounded = bf16_only ? out.bf16_copy().first : nullptr;
    const CoreOperands in{backend::operand(q.value()), backend::operand(k.value()), backend::operand(v.value())};
    for_each_block(d, [&](int64_t first, int64_t rows, BlockBuffers& buffers) {
        core->forward(first, rows, buffers, in, out_values, out_rounded);
    });
    std::vector<Var> inputs{q, k, v};
    inputs.insert(inputs.end(), normalizer.parameters.begin(), normalizer.parameters.end());
    const Tensor qv = q.value(), kv = k.value(), vv = v.value();
    return make_result("blocked_attention", out, inputs, [=](const Tensor& dy, GradSink& sink) {
        // Asked for in the order each block writes them, so that when two inputs are one tensor the first
        // written overwrites and the second adds, block by block.
        Gradient dv, dq, dk;
        for (auto [input, gradient] : {std::pair{size_t{2}, &dv}, {size_t{0}, &dq}, {size_t{1}, &dk}}) {
            if (!sink.wants(input)) continue;
            const GradSink::Target target = sink.target(input);
            *gradient = {target.grad.data(), target.accumulate};
        }
        const CoreOperands in{backend::operand(qv), backend::operand(kv), backend::operand(vv)};
        const backend::MatmulOperand dyo = backend::operand(dy);
        for_each_block(core->d, [&](int64_t first, int64_t rows, BlockBuffers& buffers) {
            core->backward(first, rows, buffers, in, dyo, dq, dk, dv);
        });
        core->norm->write_parameter_gradients(sink, 3);
    });
}

}  // namespace hnas::ops
