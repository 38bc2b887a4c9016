// Checks on a model's parameters during training: which gradient went non-finite first, and a hash of
// every parameter's bits that data-parallel ranks compare with rank 0's.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace hnas::train {

// The name and element of the first non-finite gradient, or "" when all are finite.
std::string first_non_finite_gradient(const std::vector<nn::NamedParameter>& parameters);

// A hash of every parameter's bits.
std::string parameter_fingerprint(const std::vector<nn::NamedParameter>& parameters);

}  // namespace hnas::train
