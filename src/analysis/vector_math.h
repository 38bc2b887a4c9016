// The analyses' one inner product of double vectors (the dual solver, its span reduction, the
// mode-collapse toy's scores), summed in order.
#pragma once

#include <cstdint>
#include <vector>

namespace hnas::analysis {

// Σ a_i b_i over the first n entries.
inline double dot(const double* a, const double* b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}
// The same over two vectors of a's length.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    return dot(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

}  // namespace hnas::analysis
