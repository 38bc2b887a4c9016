// Matrix products: matmul (plain and batched, with transposes folded into oneDNN's strides), linear, and
// the products of attention heads (head layouts folded into the strides too).
#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// A product's result tensor and where the product writes it: f32 values, or under bf16 precision for
// products-only readers, the bf16 copy alone.
struct ProductResult {
    Tensor tensor;
    backend::MatmulResult target;
};
ProductResult product_result(const Shape& shape, ResultReaders readers) {
    if (readers == ResultReaders::products && backend::matmul_precision() == backend::MatmulPrecision::bf16) {
        Tensor tensor = Tensor::bf16_only(shape);
        const backend::MatmulResult target = backend::MatmulResult::bf16_only(tensor.bf16_copy().first);
        return {tensor, target};
    }
    Tensor tensor = Tensor::empty(shape);
    return {tensor, tensor.data()};
}

// One operand of a batched product: `shared` means one matrix serves every batch entry.
struct Operand {
    backend::MatmulOperand data;
    bool shared;
};

// c = alpha · op(a) · op(b) per batch entry (c += … when accumulating). A shared c sums over the batch.
void gemm(Operand a, Operand b, float* c, bool c_shared, int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a,
          bool trans_b, float alpha, bool accumulate) {
    if (!a.shared && !c_shared) {
        backend::matmul(a.data, b.data, c, {batch, m, n, k, trans_a, trans_b, b.shared}, {alpha, nullptr, accumulate});
        return;
    }
    for (int64_t i = 0; i < batch; ++i) {
        const backend::MatmulOperand a_i = a.data.plus(a.shared ? 0 : i * m * k);
        const backend::MatmulOperand b_i = b.data.plus(b.shared ? 0 : i * k * n);
        float* c_i = c + (c_shared ? 0 : i * m * n);
        backend::matmul(a_i, b_i, c_i, {1, m, n, k, trans_a, trans_b, false},
                        {alpha, nullptr, accumulate || (c_shared && i > 0)});
    }
}

}  // namespace

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b, float alpha) {
    const Shape& as = a.shape();
    const Shape& bs = b.shape();
    HNAS_CHECK(as.size() >= 2 && bs.size() >= 2, "matmul: needs matrices, got ", shape_str(as), " and ", shape_str(bs));
    const bool b_shared = bs.size() == 2 && as.size() > 2;
    HNAS_CHECK(b_shared || as.size() == bs.size(), "matmul: ranks differ: ", shape_str(as), " and ", shape_str(bs));
    for (size_t i = 0; !b_shared && i + 2 < as.size(); ++i) {
        HNAS_CHECK(as[i] == bs[i], "matmul: batch axes differ: ", shape_str(as), " and ", shape_str(bs));
    }
    const int64_t m = trans_a ? as[as.size() - 1] : as[as.size() - 2];
    const int64_t ka = trans_a ? as[as.size() - 2] : as[as.size() - 1];
    const int64_t kb = trans_b ? bs[bs.size() - 1] : bs[bs.size() - 2];
    const int64_t n = trans_b ? bs[bs.size() - 2] : bs[bs.size() - 1];
    HNAS_CHECK(ka == kb, "matmul: inner dimensions differ: ", shape_str(as), (trans_a ? "ᵀ" : ""), " · ", shape_str(bs),
               (trans_b ? "ᵀ" : ""));
    const int64_t k = ka;
    int64_t batch = shape_numel(as) / (m * k);

    Shape out_shape(as.begin(), as.end() - 2);
    out_shape.push_back(m);
    out_shape.push_back(n);
    Tensor out = Tensor::empty(out_shape);
    // With a shared b and an untransposed a, the batch folds into the rows: one large product.
    const bool fold_batch = b_shared && !trans_a;
    const int64_t rows = fold_batch ? batch * m : m;
    if (fold_batch) batch = 1;
    if (out.numel() > 0 && k > 0) {
        gemm({backend::operand(a.value()), false}, {backend::operand(b.value()), b_shared}, out.data(), false, batch,
             rows, n, k, trans_a, trans_b, alpha, false);
    } else {
        out.fill(0.0f);
    }

    Tensor av = a.value(), bv = b.value();
    return make_result("matmul", out, {a, b}, [=](const Tensor& dc, GradSink& sink) {
        const Operand dc_op{backend::operand(dc), false};
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);
            Tensor& da = target.grad;
            const bool accumulate = target.accumulate;
            // dA = dC · op(B)ᵀ, written in the stored orientation of A.
            if (!trans_a) {
                gemm(dc_op, {backend::operand(bv), b_shared}, da.data(), false, batch, rows, k, n, false, !trans_b, alpha,
                     accumulate);
            } else {
                gemm({backend::operand(bv), b_shared}, dc_op, da.data(), false, batch, k, rows, n, trans_b, true, alpha,
                     accumulate);
            }
        }
        if (sink.wants(1)) {
            const GradSink::Target target = sink.target(1);
            Tensor& db = target.grad;
            const bool accumulate = target.accumulate;
            // dB = op(A)ᵀ · dC, written in the stored orientation of B; summed over the batch when shared.
            if (!trans_b) {
                gemm({backend::operand(av), false}, dc_op, db.data(), b_shared, batch, k, n, rows, !trans_a, false, alpha,
                     accumulate);
            } else {
                gemm(dc_op, {backend::operand(av), false}, db.data(), b_shared, batch, n, k, rows, true, trans_a, alpha,
                     accumulate);
            }
        }
    });
}

namespace {

// A linear layer's problem: x (..., in) · weightᵀ (in, out) as `rows` rows, and its result's shape.
struct LinearShape {
    int64_t rows, in, out;
    Shape result;
};

LinearShape check_linear(const char* op, const Var& x, const Var& weight, const Var& bias) {
    const Shape& xs = x.shape();
    const Shape& ws = weight.shape();
    HNAS_CHECK(ws.size() == 2 && !xs.empty() && xs.back() == ws[1], op, ": input ", shape_str(xs),
               " does not match weight ", shape_str(ws), " (out_features, in_features)");
    HNAS_CHECK(!bias.defined() || bias.shape() == Shape{ws[0]}, op, ": bias ", shape_str(bias.shape()),
               " does not match weight ", shape_str(ws));
    Shape result = xs;
    result.back() = ws[0];
    return {x.numel() / ws[1], ws[1], ws[0], result};
}

// The product's own gradients, dX = dY · W and dW = dYᵀ · X; the bias's is the caller's.
void linear_product_gradients(const Tensor& dy, const Tensor& x, const Tensor& weight, const LinearShape& s,
                              GradSink& sink) {
    if (sink.wants(0)) {
        const GradSink::Target target = sink.target(0);
        backend::matmul(backend::operand(dy), backend::operand(weight), target.grad.data(),
                        {1, s.rows, s.in, s.out, false, false, false}, {1.0f, nullptr, target.accumulate});
    }
    if (sink.wants(1)) {
        const GradSink::Target target = sink.target(1);
        backend::matmul(backend::operand(dy), backend::operand(x), target.grad.data(),
                        {1, s.out, s.in, s.rows, true, false, false}, {1.0f, nullptr, target.accumulate});
    }
}

// One pass over a (rows, cols) gradient made row by row: `make_row(row, buffer)` returns the row's f32
// values, computed into `buffer` (cols floats) or found in place. With `bias_grad`, the column sums
// Σ_rows (written, or added when accumulating); with `rounded`, the bf16 copy of every row. Threads take
// blocks of contiguous rows (kernels::RowBlockSums; columns kept whole: a column-blocked walk crossed a
// page per row, beyond the prefetchers).
template <typename MakeRow>
void gradient_rows_with_column_sums(int64_t rows, int64_t cols, MakeRow make_row, uint16_t* rounded, float* bias_grad,
                                    bool accumulate) {
    kernels::RowBlockSums sums(rows, cols, bias_grad ? 1 : 0);
#pragma omp parallel if (rows * cols >= kernels::kParallelGrain)
    {
        std::vector<float> buffer(static_cast<size_t>(cols));
#pragma omp for schedule(static)
        for (int64_t block = 0; block < sums.blocks(); ++block) {
            sums.start_block(block);
            float* block_sum = bias_grad ? sums.block(block) : nullptr;
            for (int64_t row = sums.first_row(block); row < sums.end_row(block); ++row) {
                const float* values = make_row(row, buffer.data());
                if (block_sum) {
#pragma omp simd
                    for (int64_t j = 0; j < cols; ++j) block_sum[j] += values[j];
                }
                if (rounded) kernels::round_row_to_bf16(values, rounded + row * cols, cols);
            }
        }
        if (bias_grad) {
            const kernels::RowBlockSums::Total total{bias_grad, accumulate};
            sums.total({&total, 1});
        }
    }
}

// db = Σ_rows dY into the sink's input 2. Under bf16, when dY has no bf16 copy yet (its producer, a
// product or the loss, wrote f32 alone), the copy dX and dW read is written in the same pass.
void linear_bias_gradient(const Tensor& dy, const LinearShape& s, GradSink& sink) {
    const GradSink::Target target = sink.target(2);
    uint16_t* rounded = nullptr;
    if (backend::matmul_precision() == backend::MatmulPrecision::bf16 && (sink.wants(0) || sink.wants(1))) {
        const auto [copy, current] = dy.bf16_copy();
        if (!current) rounded = copy;
    }
    const float* values = dy.data();
    gradient_rows_with_column_sums(
        s.rows, s.out, [&](int64_t row, float*) { return values + row * s.out; }, rounded, target.grad.data(),
        target.accumulate);
}

// A layer's weight as the forward product's B: while training it changes every step, so its values
// (converted once a step under bf16); else (decoding, evaluation, a frozen weight) packed once in the
// kernel's layout, kept with the tensor (backend::packed_operand).
backend::MatmulOperand forward_weight(const Var& weight) {
    if (grad_enabled() && weight.requires_grad()) return backend::operand(weight.value());
    return backend::packed_operand(weight.value());
}

std::vector<Var> linear_inputs(const Var& x, const Var& weight, const Var& bias) {
    if (bias.defined()) return {x, weight, bias};
    return {x, weight};
}

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias, ResultReaders readers) {
    const LinearShape s = check_linear("linear", x, weight, bias);
    const auto [out, target] = product_result(s.result, readers);
    const float* bias_data = bias.defined() ? bias.value().data() : nullptr;
    backend::matmul(backend::operand(x.value()), forward_weight(weight), target, {1, s.rows, s.out, s.in, false, true, false},
                    {1.0f, bias_data, false});
    Tensor xv = x.value(), wv = weight.value();
    return make_result("linear", out, linear_inputs(x, weight, bias), [=](const Tensor& dy, GradSink& sink) {
        if (bias_data && sink.wants(2)) linear_bias_gradient(dy, s, sink);
        linear_product_gradients(dy, xv, wv, s, sink);
    });
}

namespace {

// y = gelu(h) written as linear_gelu's readers ask (product_result; the next product reads y), and h
// overwritten by gelu'(h) in the same pass: one erf an element serves both directions.
template <typename ValueAndDerivative>
Tensor gelu_keeping_derivative(Tensor& h, ResultReaders readers, ValueAndDerivative both) {
    float* v = h.data();
    const int64_t n = h.numel();
    auto [y, target] = product_result(h.shape(), readers);
    if (target.f32 == nullptr) {  // the bf16 copy alone
        uint16_t* rounded = target.bf16;
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            const kernels::GeluWithDerivative g = both(v[i]);
            rounded[i] = kernels::round_to_bf16(g.value);
            v[i] = g.derivative;
        }
        return y;
    }
    float* out = target.f32;
    uint16_t* rounded = backend::operand_copy_to_fill(y);
    if (rounded == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            const kernels::GeluWithDerivative g = both(v[i]);
            out[i] = g.value;
            v[i] = g.derivative;
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
        for (int64_t i = 0; i < n; ++i) {
            const kernels::GeluWithDerivative g = both(v[i]);
            out[i] = g.value;
            rounded[i] = kernels::round_to_bf16(g.value);
            v[i] = g.derivative;
        }
    }
    return y;
}

// dh = dy ⊙ gelu'(h) over (rows, cols), gelu'(h) kept by the forward, and with `bias_grad` its column
// sums from the same pass. Only the products dX and dW read dh: under bf16 it is written as its bf16
// copy alone (each row's f32 values stay in a thread's buffer for the sums): 10 bytes an element moved
// instead of 14.
Tensor gelu_backward_with_bias_sum(const float* dy, const float* derivative, const Shape& shape, int64_t rows, int64_t cols,
                                   float* bias_grad, bool accumulate) {
    const bool bf16_only = backend::matmul_precision() == backend::MatmulPrecision::bf16;
    Tensor dh = bf16_only ? Tensor::bf16_only(shape) : Tensor::empty(shape);
    float* d = bf16_only ? nullptr : dh.data();
    uint16_t* rounded = bf16_only ? dh.bf16_copy().first : nullptr;
    gradient_rows_with_column_sums(
        rows, cols,
        [&](int64_t row, float* buffer) {
            const int64_t at = row * cols;
            const float *g = dy + at, *slope = derivative + at;
            float* out = bf16_only ? buffer : d + at;
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) out[j] = g[j] * slope[j];
            return static_cast<const float*>(out);
        },
        rounded, bias_grad, accumulate);
    return dh;
}

}  // namespace

Var linear_gelu(const Var& x, const Var& weight, const Var& bias, GeluForm form, ResultReaders readers) {
    const LinearShape s = check_linear("linear_gelu", x, weight, bias);
    const float* bias_data = bias.defined() ? bias.value().data() : nullptr;
    bool recording = false;
    for (const Var& input : linear_inputs(x, weight, bias)) recording |= grad_enabled() && input.requires_grad();
    if (!recording) {  // no backward needs the pre-activation: GELU in the product's epilogue, in cache
        const auto [out, target] = product_result(s.result, readers);
        const auto epilogue = form == GeluForm::erf ? backend::MatmulEpilogue::gelu_erf : backend::MatmulEpilogue::gelu_tanh;
        backend::matmul(backend::operand(x.value()), forward_weight(weight), target,
                        {1, s.rows, s.out, s.in, false, true, false}, {1.0f, bias_data, false, epilogue});
        return Var(out);
    }
    // The product writes h = x·Wᵀ + b; one pass makes gelu(h) and leaves gelu'(h) in h for the backward.
    Tensor slope = Tensor::empty(s.result);
    backend::matmul(backend::operand(x.value()), backend::operand(weight.value()), slope.data(),
                    {1, s.rows, s.out, s.in, false, true, false}, {1.0f, bias_data, false});
    const Tensor activation =
        form == GeluForm::erf
            ? gelu_keeping_derivative(slope, readers, [](float v) { return kernels::gelu_erf_with_derivative(v); })
            : gelu_keeping_derivative(slope, readers, [](float v) { return kernels::gelu_tanh_with_derivative(v); });
    Tensor xv = x.value(), wv = weight.value();
    return make_result("linear_gelu", activation, linear_inputs(x, weight, bias), [=](const Tensor& dy, GradSink& sink) {
        float* bias_grad = nullptr;
        bool accumulate = false;
        if (bias_data && sink.wants(2)) {
            const GradSink::Target target = sink.target(2);
            bias_grad = target.grad.data();
            accumulate = target.accumulate;
        }
        const Tensor dh = gelu_backward_with_bias_sum(dy.data(), slope.data(), slope.shape(), s.rows, s.out, bias_grad, accumulate);
        linear_product_gradients(dh, xv, wv, s, sink);
    });
}

namespace {

// One operand of a product of heads: its data, stored transposed or not, heads interleaved or split.
struct HeadOperand {
    backend::MatmulOperand data;
    bool transposed, interleaved;
};

// c_h = alpha · op(a_h) · op(b_h) for every (row, head) pair; c interleaved or split as asked.
void head_gemm(HeadOperand a, HeadOperand b, backend::MatmulResult c, bool c_interleaved, int64_t rows,
               int64_t heads, int64_t m, int64_t n, int64_t k, float alpha, bool accumulate) {
    backend::MatmulShape shape{rows * heads, m, n, k, a.transposed, b.transposed, false};
    shape.heads = heads;
    shape.a_interleaved = a.interleaved;
    shape.b_interleaved = b.interleaved;
    shape.c_interleaved = c_interleaved;
    backend::matmul(a.data, b.data, c, shape, {alpha, nullptr, accumulate});
}

// The (B, T, H·K) operand of a head product: its head width K.
int64_t head_width(const char* op, const Var& x, const Var& other, int64_t heads) {
    HNAS_CHECK(x.rank() == 3 && heads >= 1 && x.dim(2) % heads == 0, op, ": ", shape_str(x.shape()),
               " is not (B, T, H·K) for ", heads, " heads (with ", shape_str(other.shape()), ")");
    return x.dim(2) / heads;
}

// G, the rows of queries (or weights) a row of keys serves: 1, or with one query position any whole
// number (grouped queries, ops.h), for which the (row, head) products take G queries each.
int64_t query_group(const char* op, const Var& queries, int64_t query_positions, const Var& keys) {
    const int64_t query_rows = queries.dim(0), key_rows = keys.dim(0);
    if (query_rows == key_rows) return 1;
    HNAS_CHECK(key_rows > 0 && query_rows % key_rows == 0 && query_positions == 1, op, ": ", shape_str(queries.shape()),
               " and ", shape_str(keys.shape()), " need the same rows, or one query position and a whole number of query ",
               "rows a row of keys");
    return query_rows / key_rows;
}

}  // namespace

Var head_scores(const Var& q, const Var& k, int64_t heads, float alpha) {
    const int64_t width = head_width("head_scores", q, k, heads);
    HNAS_CHECK(k.rank() == 3 && k.dim(2) == q.dim(2), "head_scores: keys ", shape_str(k.shape()),
               " do not match queries ", shape_str(q.shape()));
    // Grouped, the scores (B·G, H, 1, Tk) are (B, G, H, Tk): the G queries' scores interleaved by head.
    const int64_t group = query_group("head_scores", q, q.dim(1), k);
    const bool grouped = group > 1;
    const int64_t rows = k.dim(0), queries = grouped ? group : q.dim(1), keys = k.dim(1);
    Tensor out = Tensor::empty({q.dim(0), heads, q.dim(1), keys});
    if (out.numel() > 0 && width > 0) {
        head_gemm({backend::operand(q.value()), false, true}, {backend::operand(k.value()), true, true}, out.data(),
                  grouped, rows, heads, queries, keys, width, alpha, false);
    } else {
        out.fill(0.0f);
    }
    Tensor qv = q.value(), kv = k.value();
    return make_result("head_scores", out, {q, k}, [=](const Tensor& ds, GradSink& sink) {
        if (sink.wants(0)) {  // dQ_h = alpha · dS_h · K_h
            const GradSink::Target target = sink.target(0);
            head_gemm({backend::operand(ds), false, grouped}, {backend::operand(kv), false, true}, target.grad.data(), true,
                      rows, heads, queries, width, keys, alpha, target.accumulate);
        }
        if (sink.wants(1)) {  // dK_h = alpha · dS_hᵀ · Q_h, summed over a group's queries
            const GradSink::Target target = sink.target(1);
            head_gemm({backend::operand(ds), true, grouped}, {backend::operand(qv), false, true}, target.grad.data(), true,
                      rows, heads, keys, width, queries, alpha, target.accumulate);
        }
    });
}

Var head_context(const Var& weights, const Var& v, ResultReaders readers) {
    HNAS_CHECK(weights.rank() == 4 && v.rank() == 3 && weights.dim(3) == v.dim(1), "head_context: weights ",
               shape_str(weights.shape()), " are not (B, H, Tq, Tk) for values ", shape_str(v.shape()));
    const int64_t heads = weights.dim(1), keys = weights.dim(3);
    const int64_t width = head_width("head_context", v, weights, heads);
    // Grouped, the weights (B·G, H, 1, Tk) are (B, G, H, Tk), the G queries' weights interleaved by head.
    const int64_t group = query_group("head_context", weights, weights.dim(2), v);
    const bool grouped = group > 1;
    const int64_t rows = v.dim(0), queries = grouped ? group : weights.dim(2);
    const Shape out_shape{weights.dim(0), weights.dim(2), heads * width};
    Tensor out;
    if (shape_numel(out_shape) > 0 && keys > 0) {
        const ProductResult result = product_result(out_shape, readers);
        out = result.tensor;
        head_gemm({backend::operand(weights.value()), false, grouped}, {backend::operand(v.value()), false, true},
                  result.target, true, rows, heads, queries, width, keys, 1.0f, false);
    } else {
        out = Tensor::zeros(out_shape);
    }
    Tensor wv = weights.value(), vv = v.value();
    return make_result("head_context", out, {weights, v}, [=](const Tensor& dc, GradSink& sink) {
        if (sink.wants(0)) {  // dW_h = dC_h · V_hᵀ
            const GradSink::Target target = sink.target(0);
            head_gemm({backend::operand(dc), false, true}, {backend::operand(vv), true, true}, target.grad.data(), grouped,
                      rows, heads, queries, keys, width, 1.0f, target.accumulate);
        }
        if (sink.wants(1)) {  // dV_h = W_hᵀ · dC_h, summed over a group's queries
            const GradSink::Target target = sink.target(1);
            head_gemm({backend::operand(wv), true, grouped}, {backend::operand(dc), false, true}, target.grad.data(), true,
                      rows, heads, keys, width, queries, 1.0f, target.accumulate);
        }
    });
}

}  // namespace hnas::ops
