#include "analysis/attention_interventions.h"

#include <vector>

#include "base/check.h"

namespace hnas::analysis {

namespace {

// One (batch, head) slice of weights, (Lq, Lk) row-major, with which of its queries and keys are real.
struct Slice {
    float* weights;
    const float* query_valid;  // null: every query is real
    const float* key_valid;    // null: every key is real
    int64_t queries, keys;
    bool query_real(int64_t i) const { return query_valid == nullptr || query_valid[i] != 0.0f; }
    bool key_real(int64_t j) const { return key_valid == nullptr || key_valid[j] != 0.0f; }
};

// s_j = Σ_i π_ij over the real queries, for every key.
std::vector<double> key_sums(const Slice& s) {
    std::vector<double> sums(static_cast<size_t>(s.keys), 0.0);
    for (int64_t i = 0; i < s.queries; ++i) {
        if (!s.query_real(i)) continue;
        for (int64_t j = 0; j < s.keys; ++j) sums[static_cast<size_t>(j)] += s.weights[i * s.keys + j];
    }
    return sums;
}

// Each real query's row divided by its sum; a row whose sum is 0 keeps its weights.
void renormalize_rows(const Slice& s, const std::vector<double>& row_sums) {
    for (int64_t i = 0; i < s.queries; ++i) {
        if (!s.query_real(i) || row_sums[static_cast<size_t>(i)] <= 0.0) continue;
        const double inverse = 1.0 / row_sums[static_cast<size_t>(i)];
        for (int64_t j = 0; j < s.keys; ++j) s.weights[i * s.keys + j] = static_cast<float>(s.weights[i * s.keys + j] * inverse);
    }
}

void drop_explained_away(const Slice& s, double epsilon) {
    const std::vector<double> sums = key_sums(s);
    std::vector<double> row_sums(static_cast<size_t>(s.queries), 0.0);
    for (int64_t i = 0; i < s.queries; ++i) {
        if (!s.query_real(i)) continue;
        double kept = 0.0;
        for (int64_t j = 0; j < s.keys; ++j) kept += sums[static_cast<size_t>(j)] < epsilon ? 0.0 : s.weights[i * s.keys + j];
        if (kept <= 0.0) continue;  // every key this query weighs is explained away: it keeps its weights
        for (int64_t j = 0; j < s.keys; ++j) {
            if (sums[static_cast<size_t>(j)] < epsilon) s.weights[i * s.keys + j] = 0.0f;
        }
        row_sums[static_cast<size_t>(i)] = kept;
    }
    renormalize_rows(s, row_sums);
}

void floor_key_sums(const Slice& s) {
    int64_t real_queries = 0, real_keys = 0;
    for (int64_t i = 0; i < s.queries; ++i) real_queries += s.query_real(i) ? 1 : 0;
    for (int64_t j = 0; j < s.keys; ++j) real_keys += s.key_real(j) ? 1 : 0;
    if (real_queries == 0 || real_keys == 0) return;
    const std::vector<double> sums = key_sums(s);
    const double floor = 1.0 / static_cast<double>(real_keys);
    std::vector<double> row_sums(static_cast<size_t>(s.queries), 0.0);
    for (int64_t i = 0; i < s.queries; ++i) {
        if (!s.query_real(i)) continue;
        double total = 0.0;
        for (int64_t j = 0; j < s.keys; ++j) {
            float& w = s.weights[i * s.keys + j];
            const double sum = sums[static_cast<size_t>(j)];
            if (s.key_real(j) && sum < floor) w = static_cast<float>(w + (floor - sum) / static_cast<double>(real_queries));
            total += w;
        }
        row_sums[static_cast<size_t>(i)] = total;
    }
    renormalize_rows(s, row_sums);
}

}  // namespace

nn::AttentionIntervention::Change intervention_change(Intervention intervention, double epsilon) {
    HNAS_CHECK(epsilon > 0.0, "intervention: ε ", epsilon, " must be positive");
    return [intervention, epsilon](const Tensor& weights, const Tensor& scores, const ops::AttentionMask& mask) {
        HNAS_CHECK(weights.rank() == 4 && scores.shape() == weights.shape(), "intervention: weights ",
                   shape_str(weights.shape()), " and scores ", shape_str(scores.shape()), " must be the same (B, H, Lq, Lk)");
        if (intervention == Intervention::dnas_weights) {
            return ops::normalize_attention(Var(scores), mask, {ops::NormalizeAxis::queries, ops::NormalizeAxis::keys}).value();
        }
        const int64_t batch = weights.dim(0), heads = weights.dim(1), queries = weights.dim(2), keys = weights.dim(3);
        HNAS_CHECK(!mask.query_valid.defined() || mask.query_valid.shape() == (Shape{batch, queries}),
                   "intervention: query mask ", shape_str(mask.query_valid.shape()), " for weights ", shape_str(weights.shape()));
        HNAS_CHECK(!mask.key_valid.defined() || mask.key_valid.shape() == (Shape{batch, keys}), "intervention: key mask ",
                   shape_str(mask.key_valid.shape()), " for weights ", shape_str(weights.shape()));
        Tensor changed = weights.clone();
        float* data = changed.data();
        for (int64_t b = 0; b < batch; ++b) {
            for (int64_t h = 0; h < heads; ++h) {
                const Slice slice{data + (b * heads + h) * queries * keys,
                                  mask.query_valid.defined() ? mask.query_valid.data() + b * queries : nullptr,
                                  mask.key_valid.defined() ? mask.key_valid.data() + b * keys : nullptr, queries, keys};
                if (intervention == Intervention::drop_explained_away) {
                    drop_explained_away(slice, epsilon);
                } else {
                    floor_key_sums(slice);
                }
            }
        }
        return changed;
    };
}

}  // namespace hnas::analysis
