// How close real attention is to the exact solution of paper 003's problem (4): §8 and Fig. 4. With
// §8's re-parameterization, a softmax attention head (Eq. 21, and with priors Eq. 22) is Eq. 18 with
//   t_i = x̃_i · scale,   z = K̃ᵀ Q̃ x̃_k,   u_i ∝ exp(the priors' log u_ik),   α the stack's α,
// where x̃ = [x; 1] carries the projections' biases (K̃ = [W_k b_k], Q̃ = [W_q b_q], per head) and scale
// = 1/√(head width), so α⟨t_i, z⟩ is exactly the head's score. For every real query the dual (Eq. 9) is
// solved for λ* (dual_solution.h) and the relative deviation ‖λ* − αz‖ / ‖λ*‖ of attention's
// approximation αz (Eq. 16) is collected, per layer and head. Fig. 3's toy (a 2-D discrete u) is
// dual_example.
#pragma once

#include <string>
#include <vector>

#include "analysis/dual_solution.h"
#include "nn/attention_probe.h"
#include "base/json.h"
#include "tasks/trained_model.h"

namespace hnas::analysis {

struct DualDeviationOptions {
    int64_t max_sequences = 32;  // texts read from the input (0: all)
    int64_t batch = 16;
    int bins = 50;                // histogram of the deviation over [0, histogram_top); above it, counted apart
    double histogram_top = 0.5;
};

struct HeadDeviation {
    int64_t queries = 0;
    double mean = 0, median = 0, p90 = 0, max = 0;
    double mean_iterations = 0;  // Newton steps per query
    int64_t unconverged = 0;     // queries whose solve stopped at the step limit
};

// One attention whose weights have Eq. 18's form (kind lnas, with or without priors).
struct AttentionDeviation {
    std::string name;
    double alpha = 1.0;
    std::vector<HeadDeviation> heads;
    // Fig. 4: per query, the deviation averaged over the heads; its histogram and mean.
    std::vector<int64_t> histogram;
    int64_t above_range = 0;
    double mean = 0;
};

// Eq. 18's problem for one query of one head, rebuilt from `record`, what an nn::AttentionProbe received
// of the attention's forward pass: the real keys' templates (n × dim), their log u, z and α.
struct QueryProblem {
    Vector templates;
    int64_t dim = 0;
    Vector log_weights, z;
    double alpha = 1.0;
};
QueryProblem query_problem(const nn::MultiHeadAttention& attention, const nn::AttentionRecord& record, int64_t row, int64_t head,
                           int64_t query);

struct DualDeviationReport {
    DualDeviationOptions options;
    int64_t sequences = 0;
    std::vector<AttentionDeviation> attentions;
    std::vector<std::string> skipped;  // "name (kind)": attentions whose kind is not Eq. 18's
};

// Over the encoder's self-attentions of the model (dropout off), the first options.max_sequences texts.
DualDeviationReport dual_deviation(const tasks::TrainedModel& trained, const std::vector<std::string>& texts,
                                   const DualDeviationOptions& options);

// {"sequences", "bins", "histogram_top", "attentions": [{"name", "alpha", "mean", "histogram", "above_range",
//  "heads": [{"head", "queries", "mean", "median", "p90", "max", "mean_iterations", "unconverged"}]}], "skipped"}
Json to_json(const DualDeviationReport& report);

// Fig. 3: a 2-D discrete u and an evidence z; for each α, ĥ from the exact λ* (Eq. 12) and from αz
// (Eq. 18), and their distance.
struct DualExampleCase {
    double alpha = 0;
    Vector lambda, exact, approximate;  // λ*, ĥ(λ*), ĥ(αz)
    double distance = 0;                // ‖ĥ(λ*) − ĥ(αz)‖
};
struct DualExample {
    Vector templates;      // n × 2
    Vector weights;        // u
    Vector mean, evidence;  // μ, z
    std::vector<DualExampleCase> cases;
};
DualExample dual_example(const std::vector<double>& alphas);
Json to_json(const DualExample& example);

}  // namespace hnas::analysis
