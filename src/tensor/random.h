// Tensors of random values drawn from an Rng, element by element in order.
#pragma once

#include "base/rng.h"
#include "tensor/tensor.h"

namespace hnas {

Tensor uniform_tensor(Rng& rng, const Shape& shape, float low, float high);
Tensor normal_tensor(Rng& rng, const Shape& shape, float mean = 0.0f, float stddev = 1.0f);

}  // namespace hnas
