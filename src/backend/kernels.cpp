#include "backend/kernels.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>  // convert_to_bf16's VCVTNEPS2BF16
#endif

namespace hnas::kernels {

int64_t BroadcastPlan::rows() const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) n *= dims[i];
    return n;
}

void BroadcastPlan::row_offsets(int64_t row, int64_t* offsets) const {
    for (size_t op = 0; op < strides.size(); ++op) offsets[op] = 0;
    for (size_t axis = dims.size() - 1; axis-- > 0;) {
        const int64_t index = row % dims[axis];
        row /= dims[axis];
        for (size_t op = 0; op < strides.size(); ++op) offsets[op] += index * strides[op][axis];
    }
}

BroadcastPlan plan_broadcast(const Shape& out_shape, const std::vector<Shape>& operand_shapes) {
    std::vector<std::vector<int64_t>> full_strides;
    for (const Shape& shape : operand_shapes) full_strides.push_back(broadcast_strides(shape, out_shape));

    BroadcastPlan plan;
    plan.strides.resize(operand_shapes.size());
    // Walk axes from the innermost, merging an axis into the one inside it when every operand is
    // contiguous across the pair (including stride 0 against stride 0). Size-1 axes vanish.
    for (size_t axis = out_shape.size(); axis-- > 0;) {
        const int64_t extent = out_shape[axis];
        if (extent == 1) continue;
        bool mergeable = !plan.dims.empty();
        for (size_t op = 0; mergeable && op < full_strides.size(); ++op) {
            mergeable = full_strides[op][axis] == plan.strides[op].back() * plan.dims.back();
        }
        if (mergeable) {
            plan.dims.back() *= extent;
        } else {
            plan.dims.push_back(extent);
            for (size_t op = 0; op < full_strides.size(); ++op) plan.strides[op].push_back(full_strides[op][axis]);
        }
    }
    if (plan.dims.empty()) {
        plan.dims.push_back(1);
        for (auto& strides : plan.strides) strides.push_back(0);
    }
    std::reverse(plan.dims.begin(), plan.dims.end());
    for (auto& strides : plan.strides) std::reverse(strides.begin(), strides.end());
    return plan;
}

#if defined(__AVX512F__) && defined(__AVX512BF16__)
// The CPU's own conversion (VCVTNEPS2BF16: nearest even, NaNs made quiet, as round_to_bf16), 16 values
// at a time, about twice the rate of the integer rounding on large arrays. It flushes subnormal inputs
// to zero, so a group holding one is rounded by round_to_bf16 instead.
void convert_to_bf16(const float* x, uint16_t* out, int64_t n) {
    const int64_t groups = n / 16;
    const __m512i exponent = _mm512_set1_epi32(0x7F800000), mantissa = _mm512_set1_epi32(0x007FFFFF);
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t g = 0; g < groups; ++g) {
        const __m512 values = _mm512_loadu_ps(x + 16 * g);
        const __m512i bits = _mm512_castps_si512(values);
        const __mmask16 subnormal = _mm512_testn_epi32_mask(bits, exponent) & _mm512_test_epi32_mask(bits, mantissa);
        if (subnormal == 0) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * g), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(values)));
        } else {
            for (int64_t i = 16 * g; i < 16 * g + 16; ++i) out[i] = round_to_bf16(x[i]);
        }
    }
    for (int64_t i = 16 * groups; i < n; ++i) out[i] = round_to_bf16(x[i]);
}
#else
void convert_to_bf16(const float* x, uint16_t* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) out[i] = round_to_bf16(x[i]);
}
#endif

RowBlockSums::RowBlockSums(int64_t rows, int64_t columns, int64_t sums_per_row)
    : rows_(rows), columns_(columns), blocks_((rows + kRows - 1) / kRows), sums_per_row_(sums_per_row),
      sums_(Tensor::empty({sums_per_row, blocks_, columns})), values_(sums_.data()) {}

void RowBlockSums::start_block(int64_t block) {
    for (int64_t which = 0; which < sums_per_row_; ++which) std::fill_n(this->block(block, which), columns_, 0.0f);
}

void RowBlockSums::total(std::span<const Total> totals) const {
    HNAS_CHECK(static_cast<int64_t>(totals.size()) <= sums_per_row_, "RowBlockSums: ", totals.size(), " totals of ",
               sums_per_row_, " sums a row");
    constexpr int64_t kColumns = 64;  // a stretch of columns at a time, its totals in vector lanes
    const int64_t stretches = (columns_ + kColumns - 1) / kColumns;
    const int64_t items = static_cast<int64_t>(totals.size()) * stretches;
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
        const int64_t which = item / stretches, first = item % stretches * kColumns;
        const Total& to = totals[static_cast<size_t>(which)];
        if (to.out == nullptr) continue;
        const int64_t count = std::min(kColumns, columns_ - first);
        const float* sums = values_ + which * blocks_ * columns_ + first;
        alignas(64) float total[kColumns] = {};
        for (int64_t block = 0; block < blocks_; ++block) {
#pragma omp simd
            for (int64_t j = 0; j < count; ++j) total[j] += sums[block * columns_ + j];
        }
        for (int64_t j = 0; j < count; ++j) to.out[first + j] = to.accumulate ? to.out[first + j] + total[j] : total[j];
    }
}

void accumulate_reduced(const Tensor& src, Tensor& dst, bool accumulate) {
    const float* in = src.data();
    float* out = dst.data();
    if (src.numel() == dst.numel()) {
        HNAS_CHECK(src.numel() == 0 || shape_numel(src.shape()) == shape_numel(dst.shape()), "gradient: shape ",
                   shape_str(src.shape()), " does not reduce to ", shape_str(dst.shape()));
        const int64_t n = src.numel();
        if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
            for (int64_t i = 0; i < n; ++i) out[i] += in[i];
        } else {
            std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
        }
        return;
    }
    if (!accumulate) dst.fill(0.0f);
    const BroadcastPlan plan = plan_broadcast(src.shape(), {dst.shape()});
    const int64_t rows = plan.rows(), length = plan.row_length();
    const int64_t inner_stride = plan.strides[0].back();
    if (inner_stride == 1) {
        // Typical bias gradient (rows, n) -> (n): threads own disjoint column ranges of dst, and
        // every row lands on offset 0 when the plan has a single broadcast axis.
        const bool one_target_row = plan.dims.size() == 2 && plan.strides[0][0] == 0;
#pragma omp parallel for schedule(static) if (rows * length >= kParallelGrain)
        for (int64_t column = 0; column < length; column += 64) {
            const int64_t end = std::min(length, column + 64);
            for (int64_t row = 0; row < rows; ++row) {
                int64_t offset = 0;
                if (!one_target_row) plan.row_offsets(row, &offset);
                const float* row_in = in + row * length;
                float* row_out = out + offset;
#pragma omp simd
                for (int64_t i = column; i < end; ++i) row_out[i] += row_in[i];
            }
        }
        return;
    }
    // Inner axis reduced (stride 0): a row's sum lands in one element; rows may share it.
    for (int64_t row = 0; row < rows; ++row) {
        int64_t offset;
        plan.row_offsets(row, &offset);
        const float* row_in = in + row * length;
        double sum = 0.0;
        for (int64_t i = 0; i < length; ++i) sum += row_in[i];
        out[offset] += static_cast<float>(sum);
    }
}

}  // namespace hnas::kernels

namespace hnas::kernels {

void permute_copy(const float* in, const Shape& in_shape, const std::vector<int>& dims, float* out) {
    const Shape in_strides = shape_strides(in_shape);
    Shape out_shape(dims.size());
    std::vector<int64_t> strides(dims.size());  // input stride of each output axis
    for (size_t i = 0; i < dims.size(); ++i) {
        out_shape[i] = in_shape[static_cast<size_t>(dims[i])];
        strides[i] = in_strides[static_cast<size_t>(dims[i])];
    }
    const int64_t length = out_shape.empty() ? 1 : out_shape.back();
    const int64_t inner_stride = strides.empty() ? 1 : strides.back();
    const int64_t rows = length == 0 ? 0 : shape_numel(out_shape) / length;
#pragma omp parallel for schedule(static) if (rows * length >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
        int64_t rest = row, offset = 0;
        for (size_t axis = out_shape.size() - 1; axis-- > 0;) {
            offset += (rest % out_shape[axis]) * strides[axis];
            rest /= out_shape[axis];
        }
        float* dst = out + row * length;
        for (int64_t i = 0; i < length; ++i) dst[i] = in[offset + i * inner_stride];
    }
}

void copy_axis_range(const float* src, int64_t src_length, int64_t src_start, float* dst, int64_t dst_length,
                     int64_t dst_start, int64_t count, int64_t outer, int64_t inner, bool add) {
    const int64_t block = count * inner;
#pragma omp parallel for schedule(static) if (outer * block >= kParallelGrain)
    for (int64_t o = 0; o < outer; ++o) {
        const float* from = src + (o * src_length + src_start) * inner;
        float* to = dst + (o * dst_length + dst_start) * inner;
        if (add) {
            for (int64_t i = 0; i < block; ++i) to[i] += from[i];
        } else {
            std::memcpy(to, from, static_cast<size_t>(block) * sizeof(float));
        }
    }
}

}  // namespace hnas::kernels
