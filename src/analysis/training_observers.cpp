#include "analysis/training_observers.h"

#include <algorithm>

#include "analysis/explain_away.h"
#include "tasks/task_support.h"

namespace hnas::analysis {

namespace {

// Each hnas attention's u per head, by attention path.
std::vector<std::pair<std::string, std::vector<float>>> hybrid_u_by_attention(const models::Model& model) {
    std::vector<std::pair<std::string, std::vector<float>>> hybrid_u;
    for (const auto& [name, attention] : model.attentions()) {
        for (const auto& values : attention->head_values()) {
            if (values.name == "u") hybrid_u.emplace_back(name, values.values);
        }
    }
    return hybrid_u;
}

// "hybrid_u" in every progress record: paper 000's Fig. 3 over training.
class HybridWeightsObserver : public train::TrainingObserver {
public:
    void at_progress(models::Model& model, int64_t /*step*/, Json& record) override {
        Json hybrid_u = Json::object();
        for (const auto& [name, u] : hybrid_u_by_attention(model)) hybrid_u[name] = u;
        record["hybrid_u"] = hybrid_u;
    }
};

// "diagnostics" in every validation record, per bidirectional attention and head on a fixed validation
// batch: the smallest per-key weight sum min_j Σ_i A_ij (paper 000 Fig. 1), its ratio to Lemma 1's
// bound 1/L, the share of keys below ε, the histogram of ln Σ_i A_ij down to e^-40 (paper 004 Fig. 1);
// per attention, the share of keys below ε in every head (lost to its output); and each hnas layer's mean u.
class ExplainAwayObserver : public train::TrainingObserver {
public:
    void start(const train::RunStart& run) override {
        std::vector<std::vector<int32_t>> rows;
        for (const std::string& text : run.task.diagnostic_texts()) rows.push_back(encoder_input(run.config, run.tokenizer, text));
        forward_ = rows.empty() ? run.task.diagnostic_forward()
                                : encoder_forward(run.task.model(), std::move(rows), ExplainAwayOptions{}.batch);
    }

    void at_validation(models::Model& model, int64_t /*step*/, Json& record) override {
        if (forward_) record["diagnostics"] = diagnostics(model);
    }

private:
    Json diagnostics(models::Model& model) const {
        const tasks::EvaluationMode evaluation(model);
        const ExplainAwayReport report = measure_key_weights(model, forward_, {});
        Json attentions = Json::object();
        for (const AttentionKeyWeights& attention : report.attentions) attentions[attention.name] = attention_entry(attention);
        Json hybrid_u_mean = Json::object();
        for (const auto& [name, u] : hybrid_u_by_attention(model)) {
            if (u.empty()) continue;
            double sum = 0.0;
            for (const double value : u) sum += value;
            hybrid_u_mean[name] = sum / static_cast<double>(u.size());
        }
        return {{"sequences", report.sequences},
                {"epsilon", report.options.epsilon},
                {"ln_low", report.options.ln_low},
                {"ln_high", report.options.ln_high},
                {"attentions", attentions},
                {"hybrid_u_mean", hybrid_u_mean}};
    }

    static Json attention_entry(const AttentionKeyWeights& attention) {
        Json entry = {{"kind", attention.kind}};
        for (const HeadKeyWeights& head : attention.heads) {
            entry["min_sum"].push_back(head.min_sum);
            entry["min_ratio"].push_back(head.min_ratio);
            entry["fraction_below_epsilon"].push_back(static_cast<double>(head.below_epsilon) /
                                                      static_cast<double>(std::max<int64_t>(head.keys, 1)));
            entry["ln_histogram"].push_back(head.histogram);
            entry["below_range"].push_back(head.below_range);
            entry["negative"].push_back(head.negative);
        }
        const int64_t keys = attention.heads.empty() ? 0 : attention.heads.front().keys;
        entry["fraction_below_epsilon_in_every_head"] =
            static_cast<double>(attention.below_epsilon_in_every_head) / static_cast<double>(std::max<int64_t>(keys, 1));
        return entry;
    }

    models::DiagnosticForward forward_;  // over the fixed batch; empty: the task has none
};

}  // namespace

std::vector<std::unique_ptr<train::TrainingObserver>> training_observers() {
    std::vector<std::unique_ptr<train::TrainingObserver>> observers;
    observers.push_back(std::make_unique<HybridWeightsObserver>());
    observers.push_back(std::make_unique<ExplainAwayObserver>());
    return observers;
}

std::vector<train::TrainingObserver*> observer_pointers(const std::vector<std::unique_ptr<train::TrainingObserver>>& observers) {
    std::vector<train::TrainingObserver*> pointers;
    for (const auto& observer : observers) pointers.push_back(observer.get());
    return pointers;
}

}  // namespace hnas::analysis
