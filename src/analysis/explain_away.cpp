#include "analysis/explain_away.h"

#include <algorithm>
#include <cmath>
#include <limits>


namespace hnas::analysis {

std::vector<int32_t> encoder_input(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                   const std::string& text) {
    const auto& model = config.model;
    std::vector<int32_t> ids = tokenizer.encode(text);
    if (model.architecture == models::Architecture::symbols) return ids;  // symbols, no specials
    if (model.architecture == models::Architecture::seq2seq) {
        const int64_t longest = std::min(config.data.max_source, model.max_source_positions);
        if (static_cast<int64_t>(ids.size()) > longest) ids.resize(static_cast<size_t>(longest));
        return ids;
    }
    const auto longest = static_cast<size_t>(model.max_source_positions - 2);
    if (ids.size() > longest) ids.resize(longest);
    ids.insert(ids.begin(), data::kClsId);
    ids.push_back(data::kSepId);
    return ids;
}

ExplainAwayReport measure_key_weights(const models::Model& model, const std::vector<std::vector<int32_t>>& all_rows,
                                      const ExplainAwayOptions& options) {
    HNAS_CHECK(options.epsilon > 0, "explain-away: epsilon must be > 0, got ", options.epsilon);
    HNAS_CHECK(options.batch >= 1 && options.ln_high > options.ln_low,
               "explain-away: the batch must be >= 1 and the histogram range non-empty");
    NoGradScope no_grad;
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
    for (size_t start = 0; start < all_rows.size(); start += static_cast<size_t>(options.batch)) {
        const size_t end = std::min(all_rows.size(), start + static_cast<size_t>(options.batch));
        const std::vector<std::vector<int32_t>> rows(all_rows.begin() + static_cast<std::ptrdiff_t>(start),
                                                     all_rows.begin() + static_cast<std::ptrdiff_t>(end));
        size_t longest = 1;
        for (const auto& row : rows) longest = std::max(longest, row.size());
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

    const auto bins = static_cast<size_t>(options.ln_high - options.ln_low);
    for (size_t a = 0; a < encoder.size(); ++a) {
        for (auto& keys : sums[a]) {
            HeadKeyWeights head;
            head.keys = static_cast<int64_t>(keys.size());
            head.histogram.assign(bins, 0);
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
                const double bin = std::floor(std::log(sum) - options.ln_low);  // log(0) = -inf: below the range
                if (!(sum >= 0.0)) {  // and NaN, which no bin holds
                    ++head.negative;
                } else if (bin < 0) {
                    ++head.below_range;
                } else if (bin >= static_cast<double>(bins)) {
                    ++head.above_range;
                } else {
                    ++head.histogram[static_cast<size_t>(bin)];
                }
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

ExplainAwayReport explain_away(const decode::TrainedModel& trained, const std::vector<std::string>& texts,
                               const ExplainAwayOptions& options) {
    const size_t count = options.max_sequences > 0 ? std::min(texts.size(), static_cast<size_t>(options.max_sequences))
                                                   : texts.size();
    std::vector<std::vector<int32_t>> rows;
    for (size_t i = 0; i < count; ++i) rows.push_back(encoder_input(trained.config, trained.tokenizer, texts[i]));
    return measure_key_weights(*trained.model, rows, options);  // load_trained_model's model is in evaluation mode
}

Json to_json(const ExplainAwayReport& report) {
    const auto& o = report.options;
    std::vector<int> edges;
    for (int edge = o.ln_low; edge <= o.ln_high; ++edge) edges.push_back(edge);
    Json attentions = Json::array();
    for (const auto& attention : report.attentions) {
        Json heads = Json::array();
        for (size_t h = 0; h < attention.heads.size(); ++h) {
            const auto& head = attention.heads[h];
            heads.push_back({{"head", h},
                             {"keys", head.keys},
                             {"fraction_below_epsilon", head.keys ? static_cast<double>(head.below_epsilon) / static_cast<double>(head.keys) : 0.0},
                             {"min_sum", head.min_sum},
                             {"min_bound", head.min_bound},
                             {"min_ratio", head.min_ratio},
                             {"median_sum", head.median_sum},
                             {"ln_histogram",
                              {{"edges", edges}, {"counts", head.histogram}, {"below_range", head.below_range},
                               {"above_range", head.above_range}, {"negative", head.negative}}}});
        }
        attentions.push_back({{"name", attention.name}, {"kind", attention.kind}, {"heads", heads}});
    }
    return {{"epsilon", o.epsilon}, {"sequences", report.sequences}, {"attentions", attentions}};
}

}  // namespace hnas::analysis
