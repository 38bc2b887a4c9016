#include "analysis/explain_away.h"

#include <algorithm>
#include <cmath>
#include <limits>


namespace hnas::analysis {

namespace {

// Token ids of one text as the model's encoder sees it: a headline model's source, or a masked-LM
// sequence [CLS] text [SEP].
std::vector<int32_t> encoder_input(const decode::TrainedModel& trained, const std::string& text) {
    const auto& model = trained.config.model;
    std::vector<int32_t> ids = trained.tokenizer.encode(text);
    if (model.architecture == models::Architecture::seq2seq) {
        const int64_t longest = std::min(trained.config.data.max_source, model.max_source_positions);
        if (static_cast<int64_t>(ids.size()) > longest) ids.resize(static_cast<size_t>(longest));
        return ids;
    }
    const auto longest = static_cast<size_t>(model.max_source_positions - 2);
    if (ids.size() > longest) ids.resize(longest);
    ids.insert(ids.begin(), data::kClsId);
    ids.push_back(data::kSepId);
    return ids;
}

}  // namespace

ExplainAwayReport explain_away(const decode::TrainedModel& trained, const std::vector<std::string>& texts,
                               const ExplainAwayOptions& options) {
    HNAS_CHECK(options.epsilon > 0, "explain-away: epsilon must be > 0, got ", options.epsilon);
    HNAS_CHECK(options.batch >= 1 && options.histogram_bins >= 1 && options.histogram_high > options.histogram_low,
               "explain-away: batch and histogram bins must be >= 1 and the histogram range non-empty");
    NoGradScope no_grad;
    const models::Model& model = *trained.model;
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> encoder;
    for (const auto& [name, attention] : model.attentions()) {
        if (name.rfind("encoder.", 0) == 0) encoder.emplace_back(name, attention);
    }
    ExplainAwayReport report{options, 0, {}};
    std::vector<std::vector<std::vector<std::pair<double, double>>>> sums(encoder.size());  // (sum, 1/L) per head
    for (size_t a = 0; a < encoder.size(); ++a) {
        encoder[a].second->record_statistics(true);
        report.attentions.push_back({encoder[a].first, encoder[a].second->kind(), {}});
    }
    const size_t count = options.max_sequences > 0 ? std::min(texts.size(), static_cast<size_t>(options.max_sequences))
                                                   : texts.size();
    for (size_t start = 0; start < count; start += static_cast<size_t>(options.batch)) {
        const size_t end = std::min(count, start + static_cast<size_t>(options.batch));
        std::vector<std::vector<int32_t>> rows;
        size_t longest = 1;
        for (size_t i = start; i < end; ++i) {
            rows.push_back(encoder_input(trained, texts[i]));
            longest = std::max(longest, rows.back().size());
        }
        const auto batch = static_cast<int64_t>(rows.size()), width = static_cast<int64_t>(longest);
        std::vector<int32_t> ids(static_cast<size_t>(batch * width), data::kPadId);
        std::vector<float> valid(ids.size(), 0.0f);
        for (size_t b = 0; b < rows.size(); ++b) {
            std::copy(rows[b].begin(), rows[b].end(), ids.begin() + static_cast<std::ptrdiff_t>(b * longest));
            std::fill_n(valid.begin() + static_cast<std::ptrdiff_t>(b * longest), rows[b].size(), 1.0f);
        }
        const Tensor id_tensor = Tensor::from_ints({batch, width}, ids), valid_tensor = Tensor::from_floats({batch, width}, valid);
        model.encode_tokens(id_tensor, valid_tensor);
        for (size_t a = 0; a < encoder.size(); ++a) {
            const Tensor& key_sums = encoder[a].second->key_weight_sums();  // (B, H, L)
            const int64_t heads = key_sums.dim(1);
            sums[a].resize(static_cast<size_t>(heads));
            for (int64_t b = 0; b < batch; ++b) {
                const double bound = 1.0 / static_cast<double>(rows[static_cast<size_t>(b)].size());
                for (int64_t h = 0; h < heads; ++h)
                    for (size_t j = 0; j < rows[static_cast<size_t>(b)].size(); ++j) {
                        const double sum = key_sums.data()[(b * heads + h) * width + static_cast<int64_t>(j)];
                        sums[a][static_cast<size_t>(h)].emplace_back(sum, bound);
                    }
            }
        }
        report.sequences += batch;
    }
    for (const auto& [name, attention] : encoder) attention->record_statistics(false);

    const double bin_width = (options.histogram_high - options.histogram_low) / options.histogram_bins;
    for (size_t a = 0; a < encoder.size(); ++a) {
        for (auto& keys : sums[a]) {
            HeadKeyWeights head;
            head.keys = static_cast<int64_t>(keys.size());
            head.histogram.assign(static_cast<size_t>(options.histogram_bins), 0);
            head.min_sum = head.min_ratio = std::numeric_limits<double>::infinity();
            std::vector<double> values;
            for (const auto& [sum, bound] : keys) {
                values.push_back(sum);
                if (sum < options.epsilon) ++head.below_epsilon;
                if (sum < head.min_sum) {
                    head.min_sum = sum;
                    head.min_bound = bound;
                }
                head.min_ratio = std::min(head.min_ratio, sum / bound);
                const double log_sum = std::log10(std::max(sum, std::numeric_limits<double>::min()));
                const auto bin = static_cast<int64_t>(std::floor((log_sum - options.histogram_low) / bin_width));
                ++head.histogram[static_cast<size_t>(std::clamp<int64_t>(bin, 0, options.histogram_bins - 1))];
            }
            if (!values.empty()) {
                std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
                head.median_sum = values[values.size() / 2];
            }
            report.attentions[a].heads.push_back(std::move(head));
        }
    }
    return report;
}

nlohmann::ordered_json to_json(const ExplainAwayReport& report, const decode::TrainedModel& trained) {
    const auto& o = report.options;
    std::vector<double> edges;
    for (int i = 0; i <= o.histogram_bins; ++i) edges.push_back(o.histogram_low + (o.histogram_high - o.histogram_low) * i / o.histogram_bins);
    nlohmann::ordered_json attentions = nlohmann::ordered_json::array();
    for (const auto& attention : report.attentions) {
        nlohmann::ordered_json heads = nlohmann::ordered_json::array();
        for (size_t h = 0; h < attention.heads.size(); ++h) {
            const auto& head = attention.heads[h];
            heads.push_back({{"head", h},
                             {"keys", head.keys},
                             {"fraction_below_epsilon", head.keys ? static_cast<double>(head.below_epsilon) / static_cast<double>(head.keys) : 0.0},
                             {"min_sum", head.min_sum},
                             {"min_bound", head.min_bound},
                             {"min_ratio", head.min_ratio},
                             {"median_sum", head.median_sum},
                             {"log10_histogram", {{"edges", edges}, {"counts", head.histogram}}}});
        }
        attentions.push_back({{"name", attention.name}, {"kind", attention.kind}, {"heads", heads}});
    }
    return {{"checkpoint", trained.path},
            {"step", trained.step},
            {"epsilon", o.epsilon},
            {"sequences", report.sequences},
            {"attentions", attentions}};
}

}  // namespace hnas::analysis
