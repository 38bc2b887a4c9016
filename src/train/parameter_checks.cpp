#include "train/parameter_checks.h"

#include <bit>
#include <cmath>

#include "base/hash.h"

namespace hnas::train {

std::string first_non_finite_gradient(const std::vector<nn::NamedParameter>& parameters) {
    for (const auto& named : parameters) {
        const Tensor grad = named.parameter.grad();
        if (!grad.defined()) continue;
        for (int64_t i = 0; i < grad.numel(); ++i) {
            if (!std::isfinite(grad.data()[i])) return named.name + " (element " + std::to_string(i) + ")";
        }
    }
    return "";
}

std::string parameter_fingerprint(const std::vector<nn::NamedParameter>& parameters) {
    uint64_t hash = 0;
    for (const auto& named : parameters) {
        const Tensor& value = named.parameter.value();
        for (int64_t i = 0; i < value.numel(); ++i) hash = hash_combine(hash, std::bit_cast<uint32_t>(value.data()[i]));
    }
    return std::to_string(hash);
}

}  // namespace hnas::train
