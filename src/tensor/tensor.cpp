#include "tensor/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hnas {

namespace {
constexpr size_t kAlignment = 64;  // one cache line, and the widest AVX-512 load
}

struct Tensor::Storage {
    explicit Storage(size_t bytes) {
        const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
        data = std::aligned_alloc(kAlignment, rounded);
        HNAS_CHECK(data != nullptr, "tensor: cannot allocate ", bytes, " bytes");
    }
    ~Storage() { std::free(data); }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    void* data;
};

const char* dtype_name(DType dtype) { return dtype == DType::f32 ? "f32" : "i32"; }

Tensor Tensor::empty(const Shape& shape, DType dtype) {
    for (int64_t d : shape) HNAS_CHECK(d >= 0, "tensor: negative dimension in shape ", shape_str(shape));
    Tensor t;
    t.shape_ = shape;
    t.numel_ = shape_numel(shape);
    t.dtype_ = dtype;
    t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_) * 4);
    return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    std::memset(t.storage_->data, 0, static_cast<size_t>(t.numel_) * 4);
    return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
    Tensor t = empty(shape);
    t.fill(value);
    return t;
}

Tensor Tensor::from_floats(const Shape& shape, const std::vector<float>& values) {
    HNAS_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "tensor: ", values.size(),
               " values for shape ", shape_str(shape));
    Tensor t = empty(shape);
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

Tensor Tensor::from_ints(const Shape& shape, const std::vector<int32_t>& values) {
    HNAS_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "tensor: ", values.size(),
               " values for shape ", shape_str(shape));
    Tensor t = empty(shape, DType::i32);
    std::copy(values.begin(), values.end(), t.ints());
    return t;
}

int64_t Tensor::dim(int axis) const {
    return shape_[static_cast<size_t>(normalize_axis(axis, rank(), "tensor.dim"))];
}

float* Tensor::data() {
    HNAS_CHECK(defined() && dtype_ == DType::f32, "tensor: f32 data of an ", defined() ? "i32" : "undefined",
               " tensor");
    return static_cast<float*>(storage_->data);
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

int32_t* Tensor::ints() {
    HNAS_CHECK(defined() && dtype_ == DType::i32, "tensor: i32 data of an ", defined() ? "f32" : "undefined",
               " tensor");
    return static_cast<int32_t*>(storage_->data);
}

const int32_t* Tensor::ints() const { return const_cast<Tensor*>(this)->ints(); }

float Tensor::item() const {
    HNAS_CHECK(numel_ == 1, "tensor.item: tensor of shape ", shape_str(shape_), " is not a single value");
    return data()[0];
}

Tensor Tensor::reshape(const Shape& shape) const {
    Shape resolved = shape;
    int64_t known = 1;
    int inferred = -1;
    for (size_t i = 0; i < resolved.size(); ++i) {
        if (resolved[i] == -1) {
            HNAS_CHECK(inferred < 0, "reshape: more than one -1 in ", shape_str(shape));
            inferred = static_cast<int>(i);
        } else {
            known *= resolved[i];
        }
    }
    if (inferred >= 0) {
        HNAS_CHECK(known > 0 && numel_ % known == 0, "reshape: cannot view ", shape_str(shape_), " as ",
                   shape_str(shape));
        resolved[static_cast<size_t>(inferred)] = numel_ / known;
    }
    HNAS_CHECK(shape_numel(resolved) == numel_, "reshape: cannot view ", shape_str(shape_), " as ",
               shape_str(shape));
    Tensor view = *this;
    view.shape_ = resolved;
    return view;
}

Tensor Tensor::clone() const {
    Tensor copy = empty(shape_, dtype_);
    std::memcpy(copy.storage_->data, storage_->data, static_cast<size_t>(numel_) * 4);
    return copy;
}

std::vector<float> Tensor::to_floats() const {
    const float* values = data();
    return std::vector<float>(values, values + numel_);
}

void Tensor::fill(float value) {
    float* values = data();
    std::fill(values, values + numel_, value);
}

}  // namespace hnas
