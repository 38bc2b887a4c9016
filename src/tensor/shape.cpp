#include "tensor/shape.h"

#include <sstream>

#include "base/check.h"

namespace hnas {

int64_t shape_numel(const Shape& shape, std::string_view what) {
    int64_t n = 1;
    for (int64_t d : shape) HNAS_CHECK(d >= 0, what, ": negative dimension in shape ", shape_str(shape));
    for (int64_t d : shape) {
        // d <= limit / n keeps n * d within the limit; a zero dimension makes every count valid.
        if (d == 0) return 0;
        HNAS_CHECK(d <= kMaxTensorElements / n, what, ": shape ", shape_str(shape), " has more than ", kMaxTensorElements,
                   " elements (2^36), the most one tensor may hold");
        n *= d;
    }
    return n;
}

std::string shape_str(const Shape& shape) {
    std::ostringstream out;
    out << "(";
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << ")";
    return out.str();
}

int normalize_axis(int axis, int rank, const char* op) {
    const int normalized = axis < 0 ? axis + rank : axis;
    HNAS_CHECK(normalized >= 0 && normalized < rank, op, ": axis ", axis, " out of range for rank ", rank);
    return normalized;
}

Shape shape_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= shape[i];
    }
    return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const size_t rank = std::max(a.size(), b.size());
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i) {
        const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
        const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
        HNAS_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                   " do not broadcast");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target) {
    HNAS_CHECK(shape.size() <= target.size(), "broadcast: ", shape_str(shape), " has more axes than ",
               shape_str(target));
    const size_t pad = target.size() - shape.size();
    const Shape own = shape_strides(shape);
    std::vector<int64_t> strides(target.size(), 0);
    for (size_t i = 0; i < shape.size(); ++i) {
        HNAS_CHECK(shape[i] == target[pad + i] || shape[i] == 1, "broadcast: ", shape_str(shape),
                   " does not broadcast to ", shape_str(target));
        strides[pad + i] = shape[i] == 1 ? 0 : own[i];
    }
    return strides;
}

AxisSplit split_at_axis(const Shape& shape, int axis) {
    AxisSplit split{1, shape[static_cast<size_t>(axis)], 1};
    for (int i = 0; i < axis; ++i) split.outer *= shape[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) split.inner *= shape[i];
    return split;
}

}  // namespace hnas
