// Tensor: a row-major, contiguous block of f32 values (or int32 token ids, or bytes) with a shape.
// Storage is shared and 64-byte aligned; reshape() is a view, everything else copies. There are no
// strided views: ops that permute data (transpose, slice) materialize, which keeps every kernel a
// plain loop over contiguous memory and every oneDNN call a dense descriptor.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/enum_names.h"
#include "tensor/shape.h"

namespace hnas {

enum class DType { f32, i32, u8 };
inline constexpr EnumName<DType> kDTypeNames[]{{DType::f32, "f32"}, {DType::i32, "i32"}, {DType::u8, "u8"}};
constexpr const auto& enum_names(DType) { return kDTypeNames; }

class Tensor {
public:
    Tensor() = default;

    static Tensor empty(const Shape& shape, DType dtype = DType::f32);  // uninitialized
    static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
    static Tensor full(const Shape& shape, float value);
    static Tensor from_floats(const Shape& shape, const std::vector<float>& values);
    static Tensor from_ints(const Shape& shape, const std::vector<int32_t>& values);
    static Tensor scalar(float value) { return full({}, value); }
    // An uninitialized f32 tensor whose values are held only as their bf16 copy: a bf16 product's
    // result that only products read (ops::ResultReaders). Its producer fills bf16_copy(); the f32
    // values are made from that copy, exactly, the first time anything reads them.
    static Tensor bf16_only(const Shape& shape);

    bool defined() const { return storage_ != nullptr; }
    const Shape& shape() const { return shape_; }
    int rank() const { return static_cast<int>(shape_.size()); }
    int64_t dim(int axis) const;  // negative axes count from the end
    int64_t numel() const { return numel_; }
    DType dtype() const { return dtype_; }

    float* data();  // marks the bf16 copy below stale: take the pointer before writing, not before reading
    const float* data() const;
    int32_t* ints();
    const int32_t* ints() const;
    uint8_t* bytes();  // a u8 tensor's values: dropout's keep masks
    const uint8_t* bytes() const;
    float item() const;  // the value of a one-element f32 tensor

    Tensor reshape(const Shape& shape) const;  // a view sharing storage; one axis may be -1
    Tensor clone() const;
    // The rows (indices along axis 0) in the given order, repeats allowed: beam search's reordering.
    Tensor take_rows(const std::vector<int64_t>& rows) const;
    std::vector<float> to_floats() const;
    void fill(float value);
    bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }
    bool storage_shared() const { return storage_.use_count() > 1; }  // another Tensor holds the same storage

    // The values rounded to bf16, kept with the storage for the matmul backend's bf16 products, so a
    // tensor read by several products (a weight all step long, an input in forward and backward, an
    // output gradient for dX and dW) is converted once. Returns the block of numel() bf16 values
    // (allocated on first use) and whether it already holds the current values; when it does not, the
    // caller fills it at once. A non-const data() call marks it stale again. One thread at a time per
    // tensor (the thread that runs the products).
    std::pair<uint16_t*, bool> bf16_copy() const;

    // The values in a product's own layout (oneDNN's blocked weights: backend::packed_operand), kept with
    // the storage like the bf16 copy for a matrix read by many products while it stays unchanged (a
    // weight while decoding). Returns the block of `bytes` kept for `layout` (one layout at a time: another
    // replaces it) and whether it already holds the current values; when it does not, the caller fills it
    // at once. A non-const data() call marks it stale. One thread at a time per tensor.
    std::pair<void*, bool> layout_copy(uint64_t layout, size_t bytes) const;

private:
    struct Storage;
    std::shared_ptr<Storage> storage_;
    Shape shape_;
    int64_t numel_ = 0;
    DType dtype_ = DType::f32;
};

// The tensor blocks' accounting (tensor.cpp): bytes held by live tensors, now and at most since the
// last reset_tensor_memory_peak(); and bytes of the segments the pool has mapped for large blocks,
// live or free for reuse (what is not live of them is the pool's cache).
struct TensorMemory {
    int64_t live = 0, peak_live = 0, reserved = 0;
};
TensorMemory tensor_memory();
void reset_tensor_memory_peak();

// Thrown when a tensor's block cannot be allocated: the size asked for and what tensors held at that
// moment.
class AllocationError : public Error {
public:
    AllocationError(int64_t bytes, const TensorMemory& held);
    int64_t bytes;
    TensorMemory held;
};

}  // namespace hnas
