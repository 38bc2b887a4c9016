// Elementwise ops: broadcasting binary arithmetic, scaling, and the unary functions with their
// derivatives written next to them.
#include <cmath>

#include "backend/kernels.h"
#include "backend/matmul.h"
#include "ops/ops.h"

namespace hnas::ops {

namespace {

// What a unary op's derivative reads; its backward keeps only that tensor alive.
enum class DerivativeReads { nothing, input, output };

// y = f(x); dx = dy · dfdx(v), v being the input or the output (whichever `reads` names; unused when
// the derivative is a constant). Under bf16 precision, y whose `readers` are only products is written
// as its bf16 copy alone (then the derivative must not read it).
template <DerivativeReads reads, FeedsProducts feeds = FeedsProducts::no, typename Forward, typename Derivative>
Var unary_op(const char* name, const Var& x, Forward forward, Derivative dfdx,
             ResultReaders readers = ResultReaders::any) {
    Tensor y;
    if (readers == ResultReaders::products && backend::matmul_precision() == backend::MatmulPrecision::bf16) {
        HNAS_CHECK(reads != DerivativeReads::output, name, ": a derivative that reads the output needs its f32 values");
        y = Tensor::bf16_only(x.shape());
        kernels::map_unary_to_bf16(x.value().data(), y.bf16_copy().first, y.numel(), forward);
    } else {
        y = Tensor::empty(x.shape());
        float* out = y.data();
        uint16_t* out_rounded = feeds == FeedsProducts::yes ? backend::operand_copy_to_fill(y) : nullptr;
        kernels::map_unary(x.value().data(), out, y.numel(), forward, out_rounded);
    }
    const Tensor kept = reads == DerivativeReads::input ? x.value() : reads == DerivativeReads::output ? y : Tensor();
    return make_result(name, y, {x}, [kept, dfdx](const Tensor& dy, GradSink& sink) {
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        const float* read = reads == DerivativeReads::nothing ? nullptr : kept.data();
        const float* g = dy.data();
        float* d = dx.data();
        uint16_t* rounded = feeds == FeedsProducts::yes ? backend::operand_copy_to_fill(dx) : nullptr;
        const int64_t n = dx.numel();
        // Two loops spelled out: with the gradient in a shared lambda GCC left both scalar (GELU's
        // backward took 21 % of a bf16 step).
        if (rounded == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
            for (int64_t i = 0; i < n; ++i) {
                write_gradient(d[i], g[i] * dfdx(reads == DerivativeReads::nothing ? 0.0f : read[i]), accumulate);
            }
        } else {
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
            for (int64_t i = 0; i < n; ++i) {
                write_gradient(d[i], g[i] * dfdx(reads == DerivativeReads::nothing ? 0.0f : read[i]), accumulate);
                rounded[i] = kernels::round_to_bf16(d[i]);
            }
        }
    });
}

template <typename F>
Tensor broadcast_apply(const Tensor& a, const Tensor& b, const Shape& out_shape, F f) {
    Tensor out = Tensor::empty(out_shape);
    kernels::broadcast_binary(a.data(), a.shape(), b.data(), b.shape(), out.data(), out_shape, f);
    return out;
}

// A broadcasting binary op whose gradients are dy·∂f/∂a and dy·∂f/∂b, each summed to its input's shape.
template <typename Forward, typename GradA, typename GradB>
Var binary_op(const char* name, const Var& a, const Var& b, Forward forward, GradA grad_a, GradB grad_b) {
    const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), name);
    Tensor out = broadcast_apply(a.value(), b.value(), out_shape, forward);
    Tensor av = a.value(), bv = b.value();
    return make_result(name, out, {a, b}, [=](const Tensor& dy, GradSink& sink) {
        // The local derivative at every output element, times dy, summed back to the input's shape.
        auto add_partial = [&](size_t input, auto derivative) {
            if (!sink.wants(input)) return;
            Tensor partial = broadcast_apply(av, bv, out_shape, derivative);
            float* p = partial.data();
            const float* g = dy.data();
            const int64_t n = partial.numel();
#pragma omp parallel for simd schedule(static) if (n >= kernels::kParallelGrain)
            for (int64_t i = 0; i < n; ++i) p[i] *= g[i];
            sink.add(input, partial);
        };
        add_partial(0, grad_a);
        add_partial(1, grad_b);
    });
}

}  // namespace

Var add(const Var& a, const Var& b) {
    const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), "add");
    Tensor out = broadcast_apply(a.value(), b.value(), out_shape, [](float x, float y) { return x + y; });
    return make_result("add", out, {a, b}, [](const Tensor& dy, GradSink& sink) {
        sink.add(0, dy);
        sink.add(1, dy);
    });
}

Var sub(const Var& a, const Var& b) {
    const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), "sub");
    Tensor out = broadcast_apply(a.value(), b.value(), out_shape, [](float x, float y) { return x - y; });
    return make_result("sub", out, {a, b}, [](const Tensor& dy, GradSink& sink) {
        sink.add(0, dy);
        if (sink.wants(1)) {
            Tensor negated = Tensor::empty(dy.shape());
            kernels::map_unary(dy.data(), negated.data(), dy.numel(), [](float g) { return -g; });
            sink.add(1, negated);
        }
    });
}

Var mul(const Var& a, const Var& b) {
    return binary_op(
        "mul", a, b, [](float x, float y) { return x * y; }, [](float, float y) { return y; },
        [](float x, float) { return x; });
}

Var div(const Var& a, const Var& b) {
    return binary_op(
        "div", a, b, [](float x, float y) { return x / y; }, [](float, float y) { return 1.0f / y; },
        [](float x, float y) { return -x / (y * y); });
}

Var scale(const Var& x, float factor) {
    return unary_op<DerivativeReads::nothing>(
        "scale", x, [factor](float v) { return factor * v; }, [factor](float) { return factor; });
}

Var add_scalar(const Var& x, float value) {
    return unary_op<DerivativeReads::nothing>(
        "add_scalar", x, [value](float v) { return v + value; }, [](float) { return 1.0f; });
}

Var exp(const Var& x) {
    return unary_op<DerivativeReads::output>(
        "exp", x, [](float v) { return std::exp(v); }, [](float y) { return y; });
}

Var log(const Var& x) {
    return unary_op<DerivativeReads::input>(
        "log", x, [](float v) { return std::log(v); }, [](float v) { return 1.0f / v; });
}

Var sqrt(const Var& x) {
    return unary_op<DerivativeReads::output>(
        "sqrt", x, [](float v) { return std::sqrt(v); }, [](float y) { return 0.5f / y; });
}

Var rsqrt(const Var& x) {
    // d/dx x^(-1/2) = -1/2 · x^(-3/2) = -1/2 · y³
    return unary_op<DerivativeReads::output>(
        "rsqrt", x, [](float v) { return 1.0f / std::sqrt(v); }, [](float y) { return -0.5f * y * y * y; });
}

Var relu(const Var& x) {
    return unary_op<DerivativeReads::output, FeedsProducts::yes>(
        "relu", x, [](float v) { return v > 0.0f ? v : 0.0f; }, [](float y) { return y > 0.0f ? 1.0f : 0.0f; });
}

Var gelu(const Var& x, GeluForm form, ResultReaders readers) {
    if (form == GeluForm::erf) {
        return unary_op<DerivativeReads::input, FeedsProducts::yes>(
            "gelu", x, [](float v) { return kernels::gelu_erf(v); }, [](float v) { return kernels::gelu_erf_derivative(v); },
            readers);
    }
    return unary_op<DerivativeReads::input, FeedsProducts::yes>(
        "gelu_tanh", x, [](float v) { return kernels::gelu_tanh(v); },
        [](float v) { return kernels::gelu_tanh_derivative(v); }, readers);
}

Var tanh(const Var& x) {
    return unary_op<DerivativeReads::output>(
        "tanh", x, [](float v) { return std::tanh(v); }, [](float y) { return 1.0f - y * y; });
}

Var sigmoid(const Var& x) {
    return unary_op<DerivativeReads::output>(
        "sigmoid", x, [](float v) { return 1.0f / (1.0f + std::exp(-v)); },
        [](float y) { return y * (1.0f - y); });
}

}  // namespace hnas::ops
