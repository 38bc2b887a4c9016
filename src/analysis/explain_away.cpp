#include "analysis/explain_away.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "nn/attention_probe.h"
#include "tasks/task.h"

namespace hnas::analysis {

std::vector<int32_t> encoder_input(const config::ExperimentConfig& config, const data::Tokenizer& tokenizer,
                                   const std::string& text) {
    const auto encoder_ids = tasks::task_definition(*config.task).encoder_ids;
    HNAS_CHECK(encoder_ids, "attention analysis: a ", config.task->name, " model reads no text; its task measures it on its own inputs during training");
    return encoder_ids(config, tokenizer, text);
}

models::DiagnosticForward encoder_forward(const models::Model& model, std::vector<std::vector<int32_t>> rows, int64_t batch) {
    const models::TokenModel* token_model = model.token_model();
    HNAS_CHECK(token_model, "explain-away: this model reads no token ids (", name_of(model.config().architecture),
               "); its task measures it on its own inputs during training");
    HNAS_CHECK(batch >= 1, "explain-away: the batch must be >= 1, got ", batch);
    return [token_model, rows = std::move(rows), batch](size_t index) -> int64_t {
        const size_t start = index * static_cast<size_t>(batch);
        if (start >= rows.size()) return 0;
        const size_t end = std::min(rows.size(), start + static_cast<size_t>(batch));
        size_t longest = 1;
        for (size_t r = start; r < end; ++r) longest = std::max(longest, rows[r].size());
        const auto count = static_cast<int64_t>(end - start), width = static_cast<int64_t>(longest);
        std::vector<int32_t> ids(static_cast<size_t>(count * width), data::kPadId);
        std::vector<float> valid(ids.size(), 0.0f);
        for (size_t r = start; r < end; ++r) {
            const auto offset = static_cast<std::ptrdiff_t>((r - start) * longest);
            std::copy(rows[r].begin(), rows[r].end(), ids.begin() + offset);
            std::fill_n(valid.begin() + offset, rows[r].size(), 1.0f);
        }
        token_model->encode_tokens(Tensor::from_ints({count, width}, ids), Tensor::from_floats({count, width}, valid));
        return count;
    };
}

namespace {

struct KeySum {
    double sum, bound;  // Σ_i A_ij and 1/L of its sequence
    KeyPlace place;
};

// One head's key weight sums as the report gives them: the count below epsilon and where, the
// smallest sum beside its 1/L bound, the median, and the histogram of ln Σ_i A_ij.
HeadKeyWeights summarize_head(const std::vector<KeySum>& keys, const ExplainAwayOptions& options) {
    const auto bins = static_cast<size_t>(options.ln_high - options.ln_low);
    HeadKeyWeights head;
    head.keys = static_cast<int64_t>(keys.size());
    head.histogram.assign(bins, 0);
    head.min_sum = head.min_ratio = std::numeric_limits<double>::infinity();
    std::vector<double> values;
    for (const auto& [sum, bound, place] : keys) {
        values.push_back(sum);
        if (sum < options.epsilon) {
            ++head.below_epsilon;
            head.explained_away.push_back(place);
        }
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
    return head;
}

}  // namespace

ExplainAwayReport measure_key_weights(const models::Model& model, const models::DiagnosticForward& forward,
                                      const ExplainAwayOptions& options) {
    HNAS_CHECK(options.epsilon > 0, "explain-away: epsilon must be > 0, got ", options.epsilon);
    HNAS_CHECK(options.ln_high > options.ln_low, "explain-away: the histogram range must be non-empty");
    NoGradScope no_grad;
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> measured;
    for (const auto& [name, attention] : model.attentions()) {
        if (attention->role() == nn::AttentionRole::bidirectional) measured.emplace_back(name, attention);
    }
    ExplainAwayReport report{options, 0, {}};
    std::vector<std::vector<std::vector<KeySum>>> sums(measured.size());  // per attention and head
    std::vector<const nn::MultiHeadAttention*> watched;
    for (const auto& [name, attention] : measured) {
        watched.push_back(attention);
        report.attentions.push_back({name, attention->kind(), {}});
    }
    const nn::AttentionProbe probe(watched);
    for (size_t index = 0;; ++index) {
        const int64_t batch = forward(index);
        if (batch == 0) break;
        for (size_t a = 0; a < measured.size(); ++a) {
            const nn::AttentionRecord& record = probe.record(*measured[a].second);
            const Tensor& key_sums = record.key_weight_sums;  // (B, H, Lk)
            const Tensor& key_valid = record.key_valid;       // (B, Lk) or undefined
            const int64_t heads = key_sums.dim(1), keys = key_sums.dim(2);
            sums[a].resize(static_cast<size_t>(heads));
            for (int64_t b = 0; b < batch; ++b) {
                std::vector<int64_t> real;
                for (int64_t j = 0; j < keys; ++j) {
                    if (!key_valid.defined() || key_valid.data()[b * keys + j] > 0.5f) real.push_back(j);
                }
                const double bound = 1.0 / static_cast<double>(std::max<size_t>(real.size(), 1));
                for (int64_t h = 0; h < heads; ++h) {
                    const float* head_sums = key_sums.data() + (b * heads + h) * keys;
                    for (const int64_t j : real) {
                        sums[a][static_cast<size_t>(h)].push_back({head_sums[j], bound, {report.sequences + b, j}});
                    }
                }
                for (const int64_t j : real) {
                    bool dropped = true;
                    for (int64_t h = 0; h < heads && dropped; ++h) dropped = key_sums.data()[(b * heads + h) * keys + j] < options.epsilon;
                    report.attentions[a].below_epsilon_in_every_head += dropped;
                }
            }
        }
        report.sequences += batch;
    }

    for (size_t a = 0; a < measured.size(); ++a) {
        for (const auto& keys : sums[a]) report.attentions[a].heads.push_back(summarize_head(keys, options));
    }
    return report;
}

namespace {

// The explained-away keys grouped by a label (a piece id, a position): the most frequent `limit`
// groups first (ties: the group that is rarer among all keys first), each with how often its label
// occurs among all keys.
std::vector<KeyGroup> group_keys(const std::vector<KeyPlace>& places, const std::function<int64_t(const KeyPlace&)>& label_of,
                                 const std::map<int64_t, int64_t>& occurrences,
                                 const std::function<std::string(int64_t)>& name_of, int64_t limit) {
    std::map<int64_t, int64_t> below;
    for (const KeyPlace& place : places) ++below[label_of(place)];
    std::vector<std::pair<int64_t, int64_t>> ranked(below.begin(), below.end());
    std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& x, const auto& y) {
        if (x.second != y.second) return x.second > y.second;
        return occurrences.at(x.first) < occurrences.at(y.first);
    });
    if (static_cast<int64_t>(ranked.size()) > limit) ranked.resize(static_cast<size_t>(limit));
    std::vector<KeyGroup> groups;
    for (const auto& [label, count] : ranked) groups.push_back({name_of(label), count, occurrences.at(label)});
    return groups;
}

}  // namespace

ExplainAwayReport explain_away(const tasks::TrainedModel& trained, const std::vector<std::string>& texts,
                               const ExplainAwayOptions& options) {
    HNAS_CHECK(options.groups >= 0, "explain-away: the pieces and positions listed per head must be >= 0, got ", options.groups);
    const size_t count = options.max_sequences > 0 ? std::min(texts.size(), static_cast<size_t>(options.max_sequences))
                                                   : texts.size();
    std::vector<std::vector<int32_t>> rows;
    for (size_t i = 0; i < count; ++i) rows.push_back(encoder_input(trained.config, trained.tokenizer, texts[i]));
    // load_trained_model's model is in evaluation mode
    ExplainAwayReport report = measure_key_weights(*trained.model, encoder_forward(*trained.model, rows, options.batch), options);
    std::map<int64_t, int64_t> piece_occurrences, position_occurrences;  // every position of a row is a real key
    for (const auto& row : rows) {
        for (size_t position = 0; position < row.size(); ++position) {
            ++piece_occurrences[row[position]];
            ++position_occurrences[static_cast<int64_t>(position)];
        }
    }
    const auto piece_at = [&](const KeyPlace& place) -> int64_t {
        return rows.at(static_cast<size_t>(place.sequence)).at(static_cast<size_t>(place.position));
    };
    const auto piece_name = [&](int64_t id) { return std::string(trained.tokenizer.piece(static_cast<int32_t>(id))); };
    const auto position_at = [](const KeyPlace& place) { return place.position; };
    const auto position_name = [](int64_t position) { return std::to_string(position); };
    for (auto& attention : report.attentions) {
        for (auto& head : attention.heads) {
            head.pieces_below_epsilon = group_keys(head.explained_away, piece_at, piece_occurrences, piece_name, options.groups);
            head.positions_below_epsilon =
                group_keys(head.explained_away, position_at, position_occurrences, position_name, options.groups);
        }
    }
    return report;
}

namespace {

Json groups_json(const std::vector<KeyGroup>& groups, const char* label) {
    Json list = Json::array();
    for (const KeyGroup& group : groups) {
        list.push_back({{label, group.label}, {"below_epsilon", group.below_epsilon}, {"occurrences", group.occurrences}});
    }
    return list;
}

}  // namespace

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
                               {"above_range", head.above_range}, {"negative", head.negative}}},
                             {"pieces_below_epsilon", groups_json(head.pieces_below_epsilon, "piece")},
                             {"positions_below_epsilon", groups_json(head.positions_below_epsilon, "position")}});
        }
        attentions.push_back({{"name", attention.name},
                              {"kind", attention.kind},
                              {"below_epsilon_in_every_head", attention.below_epsilon_in_every_head},
                              {"heads", heads}});
    }
    return {{"epsilon", o.epsilon}, {"sequences", report.sequences}, {"attentions", attentions}};
}

}  // namespace hnas::analysis
