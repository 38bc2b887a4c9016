// Bit-exact tensor comparison, shared by the GoogleTest suites (test_support.h) and the libFuzzer
// targets (tests/fuzz/), which build without GoogleTest.
#pragma once

#include <cstring>

#include "tensor/tensor.h"

namespace hnas::testing {

// Same definedness, dtype, shape and bits (so -0 differs from 0, and a NaN equals its own copy).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
    const void* x = a.dtype() == DType::f32 ? static_cast<const void*>(a.data()) : static_cast<const void*>(a.ints());
    const void* y = b.dtype() == DType::f32 ? static_cast<const void*>(b.data()) : static_cast<const void*>(b.ints());
    return std::memcmp(x, y, static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

}  // namespace hnas::testing
