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

Var linear(const Var& x, const Var& weight, const Var& bias, ResultReaders readers) {
    const Shape& xs = x.shape();
    const Shape& ws = weight.shape();
    HNAS_CHECK(ws.size() == 2 && !xs.empty() && xs.back() == ws[1], "linear: input ", shape_str(xs),
               " does not match weight ", shape_str(ws), " (out_features, in_features)");
    HNAS_CHECK(!bias.defined() || bias.shape() == Shape{ws[0]}, "linear: bias ", shape_str(bias.shape()),
               " does not match weight ", shape_str(ws));
    const int64_t in = ws[1], out_features = ws[0];
    const int64_t rows = x.numel() / in;
    Shape out_shape = xs;
    out_shape.back() = out_features;
    const auto [out, target] = product_result(out_shape, readers);
    const float* bias_data = bias.defined() ? bias.value().data() : nullptr;
    backend::matmul(backend::operand(x.value()), backend::operand(weight.value()), target,
                    {1, rows, out_features, in, false, true, false}, {1.0f, bias_data, false});

    Tensor xv = x.value(), wv = weight.value();
    std::vector<Var> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    return make_result("linear", out, inputs, [=](const Tensor& dy, GradSink& sink) {
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);  // dX = dY · W
            Tensor& dx = target.grad;
            const bool accumulate = target.accumulate;
            backend::matmul(backend::operand(dy), backend::operand(wv), dx.data(),
                            {1, rows, in, out_features, false, false, false}, {1.0f, nullptr, accumulate});
        }
        if (sink.wants(1)) {
            const GradSink::Target target = sink.target(1);  // dW = dYᵀ · X
            Tensor& dw = target.grad;
            const bool accumulate = target.accumulate;
            backend::matmul(backend::operand(dy), backend::operand(xv), dw.data(),
                            {1, out_features, in, rows, true, false, false}, {1.0f, nullptr, accumulate});
        }
        if (bias_data && sink.wants(2)) sink.add(2, dy.reshape({rows, out_features}));  // db = Σ_rows dY
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

}  // namespace

Var head_scores(const Var& q, const Var& k, int64_t heads, float alpha) {
    const int64_t width = head_width("head_scores", q, k, heads);
    HNAS_CHECK(k.rank() == 3 && k.dim(0) == q.dim(0) && k.dim(2) == q.dim(2), "head_scores: keys ", shape_str(k.shape()),
               " do not match queries ", shape_str(q.shape()));
    const int64_t rows = q.dim(0), queries = q.dim(1), keys = k.dim(1);
    Tensor out = Tensor::empty({rows, heads, queries, keys});
    if (out.numel() > 0 && width > 0) {
        head_gemm({backend::operand(q.value()), false, true}, {backend::operand(k.value()), true, true}, out.data(),
                  false, rows, heads, queries, keys, width, alpha, false);
    } else {
        out.fill(0.0f);
    }
    Tensor qv = q.value(), kv = k.value();
    return make_result("head_scores", out, {q, k}, [=](const Tensor& ds, GradSink& sink) {
        if (sink.wants(0)) {  // dQ_h = alpha · dS_h · K_h
            const GradSink::Target target = sink.target(0);
            head_gemm({backend::operand(ds), false, false}, {backend::operand(kv), false, true}, target.grad.data(), true,
                      rows, heads, queries, width, keys, alpha, target.accumulate);
        }
        if (sink.wants(1)) {  // dK_h = alpha · dS_hᵀ · Q_h
            const GradSink::Target target = sink.target(1);
            head_gemm({backend::operand(ds), true, false}, {backend::operand(qv), false, true}, target.grad.data(), true,
                      rows, heads, keys, width, queries, alpha, target.accumulate);
        }
    });
}

Var head_context(const Var& weights, const Var& v, ResultReaders readers) {
    HNAS_CHECK(weights.rank() == 4 && v.rank() == 3 && weights.dim(0) == v.dim(0) && weights.dim(3) == v.dim(1),
               "head_context: weights ", shape_str(weights.shape()), " are not (B, H, Tq, Tk) for values ",
               shape_str(v.shape()));
    const int64_t rows = weights.dim(0), heads = weights.dim(1), queries = weights.dim(2), keys = weights.dim(3);
    const int64_t width = head_width("head_context", v, weights, heads);
    const Shape out_shape{rows, queries, heads * width};
    Tensor out;
    if (shape_numel(out_shape) > 0 && keys > 0) {
        const ProductResult result = product_result(out_shape, readers);
        out = result.tensor;
        head_gemm({backend::operand(weights.value()), false, false}, {backend::operand(v.value()), false, true},
                  result.target, true, rows, heads, queries, width, keys, 1.0f, false);
    } else {
        out = Tensor::zeros(out_shape);
    }
    Tensor wv = weights.value(), vv = v.value();
    return make_result("head_context", out, {weights, v}, [=](const Tensor& dc, GradSink& sink) {
        if (sink.wants(0)) {  // dW_h = dC_h · V_hᵀ
            const GradSink::Target target = sink.target(0);
            head_gemm({backend::operand(dc), false, true}, {backend::operand(vv), true, true}, target.grad.data(), false,
                      rows, heads, queries, keys, width, 1.0f, target.accumulate);
        }
        if (sink.wants(1)) {  // dV_h = W_hᵀ · dC_h
            const GradSink::Target target = sink.target(1);
            head_gemm({backend::operand(wv), true, false}, {backend::operand(dc), false, true}, target.grad.data(), true,
                      rows, heads, keys, width, queries, 1.0f, target.accumulate);
        }
    });
}

}  // namespace hnas::ops
