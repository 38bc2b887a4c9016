// Matrix products: matmul (plain and batched, with transposes folded into oneDNN's strides) and linear.
#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// One operand of a batched product: `shared` means one matrix serves every batch entry.
struct Operand {
    const float* data;
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
        const float* a_i = a.data + (a.shared ? 0 : i * m * k);
        const float* b_i = b.data + (b.shared ? 0 : i * k * n);
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
        gemm({a.value().data(), false}, {b.value().data(), b_shared}, out.data(), false, batch, rows, n, k, trans_a,
             trans_b, alpha, false);
    } else {
        out.fill(0.0f);
    }

    Tensor av = a.value(), bv = b.value();
    return make_result("matmul", out, {a, b}, [=](const Tensor& dc, GradSink& sink) {
        const Operand dc_op{dc.data(), false};
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);
            Tensor& da = target.grad;
            const bool accumulate = target.accumulate;
            // dA = dC · op(B)ᵀ, written in the stored orientation of A.
            if (!trans_a) {
                gemm(dc_op, {bv.data(), b_shared}, da.data(), false, batch, rows, k, n, false, !trans_b, alpha, accumulate);
            } else {
                gemm({bv.data(), b_shared}, dc_op, da.data(), false, batch, k, rows, n, trans_b, true, alpha, accumulate);
            }
        }
        if (sink.wants(1)) {
            const GradSink::Target target = sink.target(1);
            Tensor& db = target.grad;
            const bool accumulate = target.accumulate;
            // dB = op(A)ᵀ · dC, written in the stored orientation of B; summed over the batch when shared.
            if (!trans_b) {
                gemm({av.data(), false}, dc_op, db.data(), b_shared, batch, k, n, rows, !trans_a, false, alpha, accumulate);
            } else {
                gemm(dc_op, {av.data(), false}, db.data(), b_shared, batch, n, k, rows, true, trans_a, alpha, accumulate);
            }
        }
    });
}

Var linear(const Var& x, const Var& weight, const Var& bias) {
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
    Tensor out = Tensor::empty(out_shape);
    const float* bias_data = bias.defined() ? bias.value().data() : nullptr;
    backend::matmul(x.value().data(), weight.value().data(), out.data(), {1, rows, out_features, in, false, true, false},
                    {1.0f, bias_data, false});

    Tensor xv = x.value(), wv = weight.value();
    std::vector<Var> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    return make_result("linear", out, inputs, [=](const Tensor& dy, GradSink& sink) {
        if (sink.wants(0)) {
            const GradSink::Target target = sink.target(0);  // dX = dY · W
            Tensor& dx = target.grad;
            const bool accumulate = target.accumulate;
            backend::matmul(dy.data(), wv.data(), dx.data(), {1, rows, in, out_features, false, false, false},
                            {1.0f, nullptr, accumulate});
        }
        if (sink.wants(1)) {
            const GradSink::Target target = sink.target(1);  // dW = dYᵀ · X
            Tensor& dw = target.grad;
            const bool accumulate = target.accumulate;
            backend::matmul(dy.data(), xv.data(), dw.data(), {1, out_features, in, rows, true, false, false},
                            {1.0f, nullptr, accumulate});
        }
        if (bias_data && sink.wants(2)) sink.add(2, dy.reshape({rows, out_features}));  // db = Σ_rows dY
    });
}

}  // namespace hnas::ops
