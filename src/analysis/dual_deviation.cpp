#include "analysis/dual_deviation.h"

#include <algorithm>
#include <cmath>

#include "analysis/explain_away.h"
#include "analysis/vector_math.h"
#include "base/check.h"

namespace hnas::analysis {

namespace {

double distance(const Vector& a, const Vector& b) {
    double sum = 0.0;
    for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(sum);
}

// The templates and z in an orthonormal basis of span{z, t_1 … t_n}. λ* − αz lies in the templates'
// span (Eq. 9 is stationary at λ* = α(z + μ − E_p[t])), so the dual restricted to this subspace has the
// same solution with the same norms, in at most n + 1 dimensions instead of d.
struct Reduced {
    Vector templates, z;
    int64_t dim = 0;
};
Reduced reduce_to_span(const Vector& templates, int64_t count, int64_t dim, const Vector& z) {
    std::vector<Vector> basis;
    double largest = std::sqrt(dot(z.data(), z.data(), dim));
    for (int64_t i = 0; i < count; ++i) largest = std::max(largest, std::sqrt(dot(&templates[static_cast<size_t>(i * dim)], &templates[static_cast<size_t>(i * dim)], dim)));
    const auto add = [&](const double* v) {
        Vector r(v, v + dim);
        for (int pass = 0; pass < 2; ++pass) {  // Gram–Schmidt twice: orthogonal to rounding
            for (const Vector& e : basis) {
                const double c = dot(r.data(), e.data(), dim);
                for (int64_t k = 0; k < dim; ++k) r[static_cast<size_t>(k)] -= c * e[static_cast<size_t>(k)];
            }
        }
        const double n = std::sqrt(dot(r.data(), r.data(), dim));
        if (n <= 1e-9 * largest) return;
        for (double& x : r) x /= n;
        basis.push_back(std::move(r));
    };
    add(z.data());
    for (int64_t i = 0; i < count && static_cast<int64_t>(basis.size()) < dim; ++i) add(&templates[static_cast<size_t>(i * dim)]);
    Reduced out;
    out.dim = static_cast<int64_t>(basis.size());
    for (const Vector& e : basis) out.z.push_back(dot(z.data(), e.data(), dim));
    for (int64_t i = 0; i < count; ++i)
        for (const Vector& e : basis) out.templates.push_back(dot(&templates[static_cast<size_t>(i * dim)], e.data(), dim));
    return out;
}

struct Solved {
    double deviation;
    int iterations;
    bool converged;
};

Solved solve_query(const QueryProblem& problem) {
    const auto count = static_cast<int64_t>(problem.log_weights.size());
    const Reduced reduced = reduce_to_span(problem.templates, count, problem.dim, problem.z);
    const DiscretePreference u(reduced.templates, reduced.dim, problem.log_weights);
    const DualSolution solution = solve_dual(u, reduced.z, problem.alpha);
    Vector approximation = reduced.z;
    for (double& v : approximation) v *= problem.alpha;
    const double lambda_norm = distance(solution.lambda, Vector(solution.lambda.size(), 0.0));
    return {lambda_norm > 0.0 ? distance(solution.lambda, approximation) / lambda_norm : 0.0, solution.iterations,
            solution.iterations < 100};
}

double quantile(std::vector<double> values, double q) {
    if (values.empty()) return 0.0;
    const auto at = static_cast<size_t>(q * static_cast<double>(values.size() - 1));
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
    return values[at];
}

}  // namespace

QueryProblem query_problem(const nn::MultiHeadAttention& attention, const nn::AttentionRecord& record, int64_t row, int64_t head,
                           int64_t query) {
    const Tensor& x = record.query;
    const Tensor& memory = record.memory;
    HNAS_CHECK(x.defined() && memory.defined(), "dual analysis: the attention recorded no forward pass");
    const int64_t width = memory.dim(2), keys = memory.dim(1), heads = attention.heads(), head_width = width / heads;
    HNAS_CHECK(row < x.dim(0) && head < heads && query < x.dim(1), "dual analysis: row ", row, ", head ", head, ", query ", query,
               " outside the recorded ", shape_str(x.shape()));
    const Tensor& key_valid = record.key_valid;
    const Tensor& log_preference = record.log_preference;
    const Tensor wq = attention.query_projection().weight().value(), wk = attention.key_projection().weight().value();  // (D, D)
    const Tensor bq = attention.query_projection().bias().value(), bk = attention.key_projection().bias().value();
    QueryProblem problem;
    problem.dim = width + 1;
    problem.alpha = attention.alpha();
    // q = W_q,h x_k + b_q,h, then z = K̃_hᵀ q = [W_k,hᵀ q; b_k,h · q]
    const float* xk = x.data() + (row * x.dim(1) + query) * width;
    Vector q(static_cast<size_t>(head_width));
    for (int64_t r = 0; r < head_width; ++r) {
        const int64_t out = head * head_width + r;
        double value = bq.data()[out];
        for (int64_t c = 0; c < width; ++c) value += static_cast<double>(wq.data()[out * width + c]) * xk[c];
        q[static_cast<size_t>(r)] = value;
    }
    problem.z.assign(static_cast<size_t>(width + 1), 0.0);
    for (int64_t r = 0; r < head_width; ++r) {
        const int64_t out = head * head_width + r;
        for (int64_t c = 0; c < width; ++c) problem.z[static_cast<size_t>(c)] += static_cast<double>(wk.data()[out * width + c]) * q[static_cast<size_t>(r)];
        problem.z[static_cast<size_t>(width)] += static_cast<double>(bk.data()[out]) * q[static_cast<size_t>(r)];
    }
    const double scale = attention.score_scale();
    for (int64_t i = 0; i < keys; ++i) {
        if (key_valid.defined() && key_valid.data()[row * keys + i] < 0.5f) continue;
        const float* xi = memory.data() + (row * keys + i) * width;
        for (int64_t c = 0; c < width; ++c) problem.templates.push_back(scale * xi[c]);
        problem.templates.push_back(scale);
        problem.log_weights.push_back(
            log_preference.defined() ? log_preference.data()[((row * heads + head) * x.dim(1) + query) * keys + i] : 0.0);
    }
    return problem;
}

namespace {

// One attention's deviations as dual_deviation gathered them over the texts' queries.
struct Gathered {
    std::vector<std::vector<double>> per_head;
    std::vector<double> head_mean;  // per query, Fig. 4's value
    std::vector<int64_t> iterations, unconverged;
};

AttentionDeviation summarize_attention(const std::string& name, double alpha, const Gathered& g, const DualDeviationOptions& options) {
    AttentionDeviation out{name, alpha, {}, std::vector<int64_t>(static_cast<size_t>(options.bins), 0), 0, 0.0};
    for (size_t h = 0; h < g.per_head.size(); ++h) {
        const std::vector<double>& values = g.per_head[h];
        HeadDeviation head;
        head.queries = static_cast<int64_t>(values.size());
        if (!values.empty()) {
            double total = 0.0;
            for (double v : values) total += v;
            head.mean = total / static_cast<double>(values.size());
            head.median = quantile(values, 0.5);
            head.p90 = quantile(values, 0.9);
            head.max = *std::max_element(values.begin(), values.end());
            head.mean_iterations = static_cast<double>(g.iterations[h]) / static_cast<double>(values.size());
        }
        head.unconverged = g.unconverged[h];
        out.heads.push_back(head);
    }
    for (double v : g.head_mean) {
        out.mean += v / static_cast<double>(g.head_mean.size());
        const auto bin = static_cast<int64_t>(v / options.histogram_top * options.bins);
        if (bin >= options.bins) {
            ++out.above_range;
        } else {
            ++out.histogram[static_cast<size_t>(bin)];
        }
    }
    return out;
}

}  // namespace

DualDeviationReport dual_deviation(const tasks::TrainedModel& trained, const std::vector<std::string>& texts,
                                   const DualDeviationOptions& options) {
    HNAS_CHECK(options.bins > 0 && options.histogram_top > 0, "dual analysis: the histogram needs bins over a positive range");
    NoGradScope no_grad;
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> measured;
    DualDeviationReport report{options, 0, {}, {}};
    for (const auto& [name, attention] : trained.model->attentions()) {
        if (attention->role() != nn::AttentionRole::bidirectional) continue;
        if (!nn::find_attention_kind(attention->kind()).softmax_of_scores) {
            report.skipped.push_back(name + " (" + attention->kind() + ")");
            continue;
        }
        measured.emplace_back(name, attention);
    }
    std::vector<const nn::MultiHeadAttention*> watched;
    for (const auto& [name, attention] : measured) watched.push_back(attention);
    const nn::AttentionProbe probe(watched);
    const size_t count = options.max_sequences > 0 ? std::min(texts.size(), static_cast<size_t>(options.max_sequences)) : texts.size();
    std::vector<std::vector<int32_t>> rows;
    for (size_t i = 0; i < count; ++i) rows.push_back(encoder_input(trained.config, trained.tokenizer, texts[i]));
    const models::DiagnosticForward forward = encoder_forward(*trained.model, std::move(rows), options.batch);

    std::vector<Gathered> gathered(measured.size());
    for (size_t index = 0;; ++index) {
        const int64_t batch = forward(index);
        if (batch == 0) break;
        for (size_t a = 0; a < measured.size(); ++a) {
            const nn::MultiHeadAttention& attention = *measured[a].second;
            const nn::AttentionRecord& record = probe.record(attention);
            const int64_t heads = attention.heads(), queries = record.query.dim(1);
            const Tensor& valid = record.key_valid;
            Gathered& g = gathered[a];
            g.per_head.resize(static_cast<size_t>(heads));
            g.iterations.resize(static_cast<size_t>(heads));
            g.unconverged.resize(static_cast<size_t>(heads));
            for (int64_t b = 0; b < batch; ++b)
                for (int64_t k = 0; k < queries; ++k) {
                    if (valid.defined() && valid.data()[b * queries + k] < 0.5f) continue;  // self-attention: queries are keys
                    double sum = 0.0;
                    for (int64_t h = 0; h < heads; ++h) {
                        const Solved solved = solve_query(query_problem(attention, record, b, h, k));
                        g.per_head[static_cast<size_t>(h)].push_back(solved.deviation);
                        g.iterations[static_cast<size_t>(h)] += solved.iterations;
                        g.unconverged[static_cast<size_t>(h)] += solved.converged ? 0 : 1;
                        sum += solved.deviation;
                    }
                    g.head_mean.push_back(sum / static_cast<double>(heads));
                }
        }
        report.sequences += batch;
    }

    for (size_t a = 0; a < measured.size(); ++a) {
        report.attentions.push_back(summarize_attention(measured[a].first, measured[a].second->alpha(), gathered[a], options));
    }
    return report;
}

Json to_json(const DualDeviationReport& report) {
    Json attentions = Json::array();
    for (const AttentionDeviation& a : report.attentions) {
        Json heads = Json::array();
        for (size_t h = 0; h < a.heads.size(); ++h) {
            const HeadDeviation& d = a.heads[h];
            heads.push_back({{"head", h}, {"queries", d.queries}, {"mean", d.mean}, {"median", d.median}, {"p90", d.p90},
                             {"max", d.max}, {"mean_iterations", d.mean_iterations}, {"unconverged", d.unconverged}});
        }
        attentions.push_back({{"name", a.name}, {"alpha", a.alpha}, {"mean", a.mean}, {"histogram", a.histogram},
                              {"above_range", a.above_range}, {"heads", heads}});
    }
    return {{"sequences", report.sequences},
            {"bins", report.options.bins},
            {"histogram_top", report.options.histogram_top},
            {"attentions", attentions},
            {"skipped", report.skipped}};
}

DualExample dual_example(const std::vector<double>& alphas) {
    DualExample example;
    // Four templates in the plane with unequal preferences, and an evidence pointing away from μ.
    example.templates = {0.0, 0.0, 2.0, 0.5, 1.0, 2.0, -1.0, 1.5};
    example.weights = {0.4, 0.3, 0.2, 0.1};
    example.evidence = {1.5, 1.0};
    Vector log_weights;
    for (double w : example.weights) log_weights.push_back(std::log(w));
    const DiscretePreference u(example.templates, 2, log_weights);
    example.mean = estimate(u, {0.0, 0.0});
    for (double alpha : alphas) {
        DualExampleCase c;
        c.alpha = alpha;
        c.lambda = solve_dual(u, example.evidence, alpha).lambda;
        c.exact = estimate(u, c.lambda);
        c.approximate = estimate(u, {alpha * example.evidence[0], alpha * example.evidence[1]});
        c.distance = distance(c.exact, c.approximate);
        example.cases.push_back(c);
    }
    return example;
}

Json to_json(const DualExample& example) {
    Json cases = Json::array();
    for (const DualExampleCase& c : example.cases) {
        cases.push_back({{"alpha", c.alpha}, {"lambda", c.lambda}, {"h_exact", c.exact}, {"h_approximate", c.approximate},
                         {"distance", c.distance}});
    }
    return {{"templates", example.templates}, {"weights", example.weights}, {"mean", example.mean},
            {"evidence", example.evidence}, {"cases", cases}};
}

}  // namespace hnas::analysis
