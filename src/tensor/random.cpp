#include "tensor/random.h"

namespace hnas {

Tensor uniform_tensor(Rng& rng, const Shape& shape, float low, float high) {
    Tensor t = Tensor::empty(shape);
    float* values = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) values[i] = rng.uniform(low, high);
    return t;
}

Tensor normal_tensor(Rng& rng, const Shape& shape, float mean, float stddev) {
    Tensor t = Tensor::empty(shape);
    float* values = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) values[i] = mean + stddev * rng.normal();
    return t;
}

}  // namespace hnas
