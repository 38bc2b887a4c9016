// Shapes of row-major tensors and the small helpers every layer uses on them.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace hnas {

using Shape = std::vector<int64_t>;

// The most elements one tensor may hold: 2^36 (256 GiB of f32), beyond any machine hnas runs on and far
// enough below 2^63 that a checked count's byte size, and any offset within it, cannot overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 36;

// The element count of `shape`, checked without overflow: throws an Error naming `what` and the shape
// when a dimension is negative or the count exceeds kMaxTensorElements. Every tensor's size passes
// through here (Tensor::empty), so no caller can allocate from a wrapped count.
int64_t shape_numel(const Shape& shape, std::string_view what = "tensor");
std::string shape_str(const Shape& shape);              // "(2, 3, 4)"
int normalize_axis(int axis, int rank, const char* op);  // -1 -> rank-1; throws naming op when out of range
Shape shape_strides(const Shape& shape);                // row-major element strides

// The numpy broadcast of two shapes; throws naming `op` and both shapes when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// For `shape` broadcast to `target` (same rank after left-padding with 1s): per target axis, the
// element stride in `shape`, or 0 along broadcast axes.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target);

// View of a shape around one axis as (outer, axis length, inner): the layout reductions use.
struct AxisSplit {
    int64_t outer, length, inner;
};
AxisSplit split_at_axis(const Shape& shape, int axis);

}  // namespace hnas
