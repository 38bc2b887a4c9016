// Shape ops: reshape (a view), transpose and permute (copies), concat, split and slice along an axis.
#include <numeric>

#include "backend/kernels.h"
#include "ops/ops.h"

namespace hnas::ops {

Var reshape(const Var& x, const Shape& shape) {
    Tensor view = x.value().reshape(shape);
    const Shape in_shape = x.shape();
    return make_result("reshape", view, {x}, [in_shape](const Tensor& dy, GradSink& sink) {
        sink.add(0, dy.reshape(in_shape));
    });
}

Var permute(const Var& x, const std::vector<int>& dims) {
    const int rank = x.rank();
    HNAS_CHECK(static_cast<int>(dims.size()) == rank, "permute: ", dims.size(), " axes given for shape ",
               shape_str(x.shape()));
    std::vector<int> normalized(dims.size()), inverse(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
        normalized[i] = normalize_axis(dims[i], rank, "permute");
        HNAS_CHECK(!seen[static_cast<size_t>(normalized[i])], "permute: axis ", dims[i], " repeated");
        seen[static_cast<size_t>(normalized[i])] = true;
        inverse[static_cast<size_t>(normalized[i])] = static_cast<int>(i);
    }
    Shape out_shape(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) out_shape[i] = x.shape()[static_cast<size_t>(normalized[i])];
    Tensor out = Tensor::empty(out_shape);
    kernels::permute_copy(x.value().data(), x.shape(), normalized, out.data());
    return make_result("permute", out, {x}, [out_shape, inverse](const Tensor& dy, GradSink& sink) {
        Shape in_shape(inverse.size());
        for (size_t i = 0; i < inverse.size(); ++i) in_shape[i] = out_shape[static_cast<size_t>(inverse[i])];
        Tensor dx = Tensor::empty(in_shape);
        kernels::permute_copy(dy.data(), out_shape, inverse, dx.data());
        sink.add(0, dx);
    });
}

Var transpose(const Var& x, int axis0, int axis1) {
    std::vector<int> dims(static_cast<size_t>(x.rank()));
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[static_cast<size_t>(normalize_axis(axis0, x.rank(), "transpose"))],
              dims[static_cast<size_t>(normalize_axis(axis1, x.rank(), "transpose"))]);
    return permute(x, dims);
}

Var concat(const std::vector<Var>& xs, int axis) {
    HNAS_CHECK(!xs.empty(), "concat: no inputs");
    const int normalized = normalize_axis(axis, xs[0].rank(), "concat");
    Shape out_shape = xs[0].shape();
    out_shape[static_cast<size_t>(normalized)] = 0;
    for (const Var& x : xs) {
        bool matches = x.rank() == xs[0].rank();
        for (int d = 0; matches && d < x.rank(); ++d) matches = d == normalized || x.dim(d) == xs[0].dim(d);
        HNAS_CHECK(matches, "concat: shape ", shape_str(x.shape()), " does not match ", shape_str(xs[0].shape()),
                   " outside axis ", axis);
        out_shape[static_cast<size_t>(normalized)] += x.dim(normalized);
    }
    const AxisSplit split = split_at_axis(out_shape, normalized);
    Tensor out = Tensor::empty(out_shape);
    std::vector<int64_t> starts;
    int64_t start = 0;
    for (const Var& x : xs) {
        starts.push_back(start);
        const int64_t length = x.dim(normalized);
        kernels::copy_axis_range(x.value().data(), length, 0, out.data(), split.length, start, length, split.outer,
                                 split.inner, false);
        start += length;
    }
    std::vector<Shape> shapes;
    for (const Var& x : xs) shapes.push_back(x.shape());
    return make_result("concat", out, xs, [split, starts, shapes, normalized](const Tensor& dy, GradSink& sink) {
        for (size_t i = 0; i < shapes.size(); ++i) {
            if (!sink.wants(i)) continue;
            const GradSink::Target target = sink.target(i);
            Tensor& dx = target.grad;
            const bool accumulate = target.accumulate;
            const int64_t length = shapes[i][static_cast<size_t>(normalized)];
            kernels::copy_axis_range(dy.data(), split.length, starts[i], dx.data(), length, 0, length, split.outer,
                                     split.inner, accumulate);
        }
    });
}

Var slice(const Var& x, int axis, int64_t start, int64_t end) {
    const int normalized = normalize_axis(axis, x.rank(), "slice");
    const int64_t length = x.dim(normalized);
    HNAS_CHECK(0 <= start && start <= end && end <= length, "slice: range [", start, ", ", end, ") outside axis ",
               axis, " of ", shape_str(x.shape()));
    const AxisSplit split = split_at_axis(x.shape(), normalized);
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(normalized)] = end - start;
    Tensor out = Tensor::empty(out_shape);
    kernels::copy_axis_range(x.value().data(), length, start, out.data(), end - start, 0, end - start, split.outer,
                             split.inner, false);
    return make_result("slice", out, {x}, [split, start, end](const Tensor& dy, GradSink& sink) {
        const GradSink::Target target = sink.target(0);
        Tensor& dx = target.grad;
        const bool accumulate = target.accumulate;
        if (!accumulate) dx.fill(0.0f);
        kernels::copy_axis_range(dy.data(), end - start, 0, dx.data(), split.length, start, end - start, split.outer,
                                 split.inner, true);
    });
}

std::vector<Var> split(const Var& x, const std::vector<int64_t>& sizes, int axis) {
    const int normalized = normalize_axis(axis, x.rank(), "split");
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    HNAS_CHECK(total == x.dim(normalized), "split: sizes add up to ", total, " but axis ", axis, " of ",
               shape_str(x.shape()), " has ", x.dim(normalized));
    std::vector<Var> parts;
    int64_t start = 0;
    for (int64_t size : sizes) {
        parts.push_back(slice(x, normalized, start, start + size));
        start += size;
    }
    return parts;
}

}  // namespace hnas::ops
