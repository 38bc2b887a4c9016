// sinkhorn: k Sinkhorn iterations in log space, each a normalization over the queries of every key and
// then over the keys of every query; it starts on the query axis and ends on the key axis, so rows sum
// to 1 and k = 1 is dnas. As k grows, the column sums approach L_q / L_k (doubly stochastic up to scale).
#include "nn/attention_norm.h"

namespace hnas::nn {

namespace {

struct SinkhornSettings : KindSettings {
    int iterations = 3;  // alternations of query- and key-axis normalization
};

KindSettingsPtr read_settings(config::ConfigNode& stack) {
    auto settings = std::make_shared<SinkhornSettings>();
    settings->iterations = static_cast<int>(stack.integer("sinkhorn_iterations", settings->iterations,
                                                          "`sinkhorn`: k, the alternations; 1 is `dnas`", 1, 1000));
    return settings;
}

class Sinkhorn : public AttentionNorm {
public:
    explicit Sinkhorn(int iterations) {
        HNAS_CHECK(iterations >= 1, "sinkhorn: iterations must be at least 1, got ", iterations);
        for (int k = 0; k < iterations; ++k) {
            steps_.push_back(ops::NormalizeAxis::queries);
            steps_.push_back(ops::NormalizeAxis::keys);
        }
    }
    std::optional<ops::SliceNormalizer> slice_normalizer() const override { return ops::step_normalizer(steps_); }
    Var normalize(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        return ops::normalize_attention(in.scores, mask, steps_);
    }
    Var reference(const AttentionScores& in, const ops::AttentionMask& mask) const override {
        Var L = in.scores;
        for (ops::NormalizeAxis axis : steps_) L = ops::log_normalize(L, mask, axis);
        return ops::masked_exp(L, mask);
    }

private:
    std::vector<ops::NormalizeAxis> steps_;
};
}  // namespace

const AttentionKind& sinkhorn_kind() {
    static const AttentionKind kind{
        .name = "sinkhorn",
        .description = "k alternations of query- and key-axis normalization (k = 1 is dnas)",
        .future_leak = kLeaksOverQueries,
        .rows_sum_to_one = true,
        .compares_templates = false,
        .softmax_of_scores = false,
        .read_settings = read_settings,
        .make = [](const KindSettings& settings, int64_t) -> std::unique_ptr<AttentionNorm> {
            return std::make_unique<Sinkhorn>(settings_as<SinkhornSettings>(settings, "sinkhorn").iterations);
        },
    };
    return kind;
}

}  // namespace hnas::nn
