#include "analysis/mode_collapse.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "analysis/vector_math.h"
#include "base/check.h"
#include "base/rng.h"

namespace hnas::analysis {

namespace {

// Simulations build an n x n matrix; this keeps one below ~130 MB.
constexpr size_t kMaxSimulatedPoints = 4000;

// S_ij = score_scale * <x_i, x_j>: the points are both the queries (rows) and the keys (columns).
std::vector<double> dot_product_scores(const Points& points, double score_scale) {
    const size_t n = points.size();
    std::vector<double> scores(n * n);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j)
            scores[i * n + j] = score_scale * dot(points.point(i), points.point(j), static_cast<int64_t>(points.dim));
    }
    return scores;
}

// Replaces every row of the n x n matrix of logits by its softmax (max subtracted, so no overflow).
void softmax_rows(std::vector<double>& logits, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        double* row = logits.data() + i * n;
        const double row_max = *std::max_element(row, row + n);
        double sum = 0.0;
        for (size_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - row_max));
        for (size_t j = 0; j < n; ++j) row[j] /= sum;
    }
}

// LNAS (paper 000 Eq. 1/3-4): pi_ij = exp(S_ij) / sum_j' exp(S_ij').
std::vector<double> lnas_weights(std::vector<double> scores, size_t n) {
    softmax_rows(scores, n);
    return scores;
}

// DNAS (paper 000 Eq. 7-8) in the log domain, so that no weight underflows before the second
// normalization: log xi_ji = S_ij - log sum_i' exp(S_i'j) (Eq. 7, over the queries i for each key j),
// then W_ij = xi_ji / sum_j' xi_j'i (Eq. 8, over the keys for each query) is a softmax of log xi along i's row.
std::vector<double> dnas_weights(std::vector<double> scores, size_t n) {
    for (size_t j = 0; j < n; ++j) {
        double column_max = scores[j];
        for (size_t i = 1; i < n; ++i) column_max = std::max(column_max, scores[i * n + j]);
        double sum = 0.0;
        for (size_t i = 0; i < n; ++i) sum += std::exp(scores[i * n + j] - column_max);
        const double log_column_sum = column_max + std::log(sum);
        for (size_t i = 0; i < n; ++i) scores[i * n + j] -= log_column_sum;
    }
    softmax_rows(scores, n);
    return scores;
}

double distance(const double* x, const double* y, size_t dim) {
    double squared = 0.0;
    for (size_t d = 0; d < dim; ++d) squared += (x[d] - y[d]) * (x[d] - y[d]);
    return std::sqrt(squared);
}

// Mean of points [begin, end).
std::vector<double> mean_point(const Points& points, size_t begin, size_t end) {
    std::vector<double> mean(points.dim, 0.0);
    for (size_t i = begin; i < end; ++i) {
        for (size_t d = 0; d < points.dim; ++d) mean[d] += points.point(i)[d];
    }
    for (auto& value : mean) value /= static_cast<double>(end - begin);
    return mean;
}

class DisjointSets {
public:
    explicit DisjointSets(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), size_t{0}); }

    size_t root(size_t i) {
        while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
        return i;
    }
    void join(size_t i, size_t j) { parent_[root(i)] = root(j); }

private:
    std::vector<size_t> parent_;
};

void validate(const ModeCollapseOptions& options) {
    HNAS_CHECK(options.n0 >= 1, "mode collapse: n0 must be at least 1 (got ", options.n0, ")");
    HNAS_CHECK(options.n1 >= 1, "mode collapse: n1 must be at least 1 (got ", options.n1, ")");
    HNAS_CHECK(static_cast<size_t>(options.n0) + static_cast<size_t>(options.n1) <= kMaxSimulatedPoints,
               "mode collapse: n0 + n1 must be at most ", kMaxSimulatedPoints, " (got ", options.n0 + options.n1, ")");
    HNAS_CHECK(options.steps >= 0, "mode collapse: steps must be non-negative (got ", options.steps, ")");
    HNAS_CHECK(std::isfinite(options.spread) && options.spread >= 0,
               "mode collapse: spread must be a non-negative number (got ", options.spread, ")");
    HNAS_CHECK(std::isfinite(options.score_scale) && options.score_scale > 0,
               "mode collapse: score scale must be positive (got ", options.score_scale, ")");
    HNAS_CHECK(!options.kinds.empty(), "mode collapse: no attention kind given");
    HNAS_CHECK(options.hybrid_u >= 0 && options.hybrid_u <= 1,
               "mode collapse: hybrid u must be in [0, 1] (got ", options.hybrid_u, ")");
    HNAS_CHECK(std::isfinite(options.merge_fraction) && options.merge_fraction > 0,
               "mode collapse: merge fraction must be positive (got ", options.merge_fraction, ")");
    HNAS_CHECK(options.min_cluster_fraction >= 0 && options.min_cluster_fraction <= 1,
               "mode collapse: min cluster fraction must be in [0, 1] (got ", options.min_cluster_fraction, ")");
}

Points sample_two_gaussians(const ModeCollapseOptions& options) {
    Rng rng(options.seed);
    Points points{2, {}};
    points.coordinates.reserve(2 * static_cast<size_t>(options.n0 + options.n1));
    for (const auto& [centre, count] : {std::pair{ModeCollapseOptions::centre0, options.n0},
                                        std::pair{ModeCollapseOptions::centre1, options.n1}}) {
        for (int i = 0; i < count; ++i) {
            for (const double coordinate : centre) {
                points.coordinates.push_back(coordinate + options.spread * static_cast<double>(rng.normal()));
            }
        }
    }
    return points;
}

ModeCollapseStep describe_step(int step, Points points, size_t n0, double merge_distance, size_t min_cluster_points) {
    ModeCollapseStep result;
    result.step = step;
    result.clustering = find_clusters(points, merge_distance, min_cluster_points);
    const auto centre0 = mean_point(points, 0, n0);
    const auto centre1 = mean_point(points, n0, points.size());
    result.centre_distance = distance(centre0.data(), centre1.data(), points.dim);
    result.points = std::move(points);
    return result;
}

void validate(const CentreDistanceOptions& options) {
    HNAS_CHECK(!options.a_values.empty(), "centre distance: no value of a given");
    for (const double a : options.a_values) {
        HNAS_CHECK(std::isfinite(a) && a > 0, "centre distance: a must be positive (got ", a, ")");
    }
    HNAS_CHECK(std::isfinite(options.r_min) && options.r_min > 0, "centre distance: r-min must be positive (got ",
               options.r_min, ")");
    HNAS_CHECK(std::isfinite(options.r_max) && options.r_max >= options.r_min,
               "centre distance: r-max must be at least r-min (got ", options.r_max, " < ", options.r_min, ")");
    HNAS_CHECK(options.curve_points >= 2, "centre distance: curve points must be at least 2 (got ",
               options.curve_points, ")");
    HNAS_CHECK(options.simulated_points >= 1, "centre distance: simulated points must be at least 1 (got ",
               options.simulated_points, ")");
    HNAS_CHECK(options.simulation_base >= 1, "centre distance: simulation base must be at least 1 (got ",
               options.simulation_base, ")");
}

// count values from low to high, evenly spaced in log.
std::vector<double> log_spaced(double low, double high, int count) {
    std::vector<double> values(static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) {
        const double fraction = count == 1 ? 0.0 : static_cast<double>(k) / (count - 1);
        values[static_cast<size_t>(k)] = low * std::pow(high / low, fraction);
    }
    return values;
}

// The cluster sizes realizing r: the smaller cluster has `base` points, the larger round(base * max(r, 1/r)).
std::pair<int, int> cluster_sizes_for_ratio(double r, int base) {
    const auto larger = [&](double ratio) {
        const double size = std::round(ratio * base);
        HNAS_CHECK(size + base <= static_cast<double>(kMaxSimulatedPoints), "centre distance: simulating r = ", r,
                   " with simulation base ", base, " needs more than ", kMaxSimulatedPoints,
                   " points; narrow the range of r or lower the simulation base");
        return static_cast<int>(size);
    };
    return r >= 1 ? std::pair{larger(r), base} : std::pair{base, larger(1 / r)};
}

}  // namespace

std::vector<double> attention_weights(const Points& points, double score_scale, const Normalization& normalization) {
    const size_t n = points.size();
    HNAS_CHECK(n > 0 && points.coordinates.size() == n * points.dim, "attention_weights: ", points.coordinates.size(),
               " coordinates do not form points of dimension ", points.dim);
    return normalize_scores(dot_product_scores(points, score_scale), n, normalization);
}

std::vector<double> normalize_scores(std::vector<double> scores, size_t n, const Normalization& normalization) {
    HNAS_CHECK(n > 0 && scores.size() == n * n, "normalize_scores: ", scores.size(), " scores do not form a ", n, " x ", n,
               " matrix");
    switch (normalization.kind) {
        case ToyKind::lnas: return lnas_weights(std::move(scores), n);
        case ToyKind::dnas: return dnas_weights(std::move(scores), n);
        case ToyKind::hnas: {
            // Paper 000 Sec. 6: pi^H = u pi^D + (1 - u) pi^L.
            const double u = normalization.hybrid_u;
            auto weights = dnas_weights(scores, n);
            const auto lower = lnas_weights(std::move(scores), n);
            for (size_t k = 0; k < weights.size(); ++k) weights[k] = u * weights[k] + (1 - u) * lower[k];
            return weights;
        }
    }
    throw Error("normalize_scores: unknown toy kind");
}

Points attention_step(const Points& points, double score_scale, const Normalization& normalization, bool residual) {
    const auto weights = attention_weights(points, score_scale, normalization);
    const size_t n = points.size();
    Points next{points.dim, residual ? points.coordinates : std::vector<double>(points.coordinates.size(), 0.0)};
    for (size_t i = 0; i < n; ++i) {
        double* output = next.coordinates.data() + i * points.dim;
        for (size_t j = 0; j < n; ++j) {
            for (size_t d = 0; d < points.dim; ++d) output[d] += weights[i * n + j] * points.point(j)[d];
        }
    }
    return next;
}

Clustering find_clusters(const Points& points, double merge_distance, size_t min_cluster_points) {
    const size_t n = points.size();
    DisjointSets components(n);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
            if (distance(points.point(i), points.point(j), points.dim) < merge_distance) components.join(i, j);
        }
    }
    std::vector<size_t> component_sizes(n, 0);
    for (size_t i = 0; i < n; ++i) ++component_sizes[components.root(i)];
    Clustering clustering;
    for (const size_t size : component_sizes) {
        if (size == 0) continue;
        if (size >= min_cluster_points) {
            clustering.cluster_sizes.push_back(size);
        } else {
            clustering.stray_points += size;
        }
    }
    std::sort(clustering.cluster_sizes.rbegin(), clustering.cluster_sizes.rend());
    return clustering;
}

ModeCollapseResult run_mode_collapse(const ModeCollapseOptions& options) {
    validate(options);
    ModeCollapseResult result;
    result.options = options;
    const auto& c0 = ModeCollapseOptions::centre0;
    const auto& c1 = ModeCollapseOptions::centre1;
    result.merge_distance = options.merge_fraction * distance(c0.data(), c1.data(), 2);
    result.min_cluster_points = std::max<size_t>(
        1, static_cast<size_t>(std::ceil(options.min_cluster_fraction * std::min(options.n0, options.n1))));
    const auto n0 = static_cast<size_t>(options.n0);
    const Points sampled = sample_two_gaussians(options);
    for (const ToyKind kind : options.kinds) {
        ModeCollapseRun run;
        run.normalization = {kind, options.hybrid_u};
        Points points = sampled;
        for (int step = 0; step <= options.steps; ++step) {
            Points next = step < options.steps ? attention_step(points, options.score_scale, run.normalization, options.residual)
                                               : Points{};
            run.steps.push_back(describe_step(step, std::move(points), n0, result.merge_distance, result.min_cluster_points));
            points = std::move(next);
        }
        result.runs.push_back(std::move(run));
    }
    return result;
}

void to_json(nlohmann::json& json, const ModeCollapseResult& result) {
    const auto& options = result.options;
    nlohmann::json kinds = nlohmann::json::array();
    for (const auto kind : options.kinds) kinds.push_back(name_of(kind));
    json = {{"analysis", "mode_collapse"},
            {"options",
             {{"n0", options.n0},
              {"n1", options.n1},
              {"steps", options.steps},
              {"seed", options.seed},
              {"spread", options.spread},
              {"score_scale", options.score_scale},
              {"kinds", kinds},
              {"hybrid_u", options.hybrid_u},
              {"merge_fraction", options.merge_fraction},
              {"min_cluster_fraction", options.min_cluster_fraction},
              {"residual", options.residual},
              {"centre0", ModeCollapseOptions::centre0},
              {"centre1", ModeCollapseOptions::centre1}}},
            {"merge_distance", result.merge_distance},
            {"min_cluster_points", result.min_cluster_points},
            {"runs", nlohmann::json::array()}};
    for (const auto& run : result.runs) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& step : run.steps) {
            nlohmann::json points = nlohmann::json::array();
            for (size_t i = 0; i < step.points.size(); ++i) {
                points.push_back(std::vector<double>(step.points.point(i), step.points.point(i) + step.points.dim));
            }
            steps.push_back({{"step", step.step},
                             {"clusters", step.clustering.clusters()},
                             {"cluster_sizes", step.clustering.cluster_sizes},
                             {"stray_points", step.clustering.stray_points},
                             {"centre_distance", step.centre_distance},
                             {"points", std::move(points)}});
        }
        nlohmann::json entry = {{"kind", name_of(run.normalization.kind)}, {"steps", std::move(steps)}};
        if (run.normalization.kind == ToyKind::hnas) entry["hybrid_u"] = run.normalization.hybrid_u;
        json["runs"].push_back(std::move(entry));
    }
}

// Paper 000 Sec. 5.2 / Appendix C: N0 points at +a and N1 at -a. Within a cluster the dot-product score is
// a^2, across -a^2; every weight in a row can be divided by exp(a^2) (LNAS's row normalization and DNAS's
// column normalization both cancel it), leaving t = 1 within and s = exp(-2 a^2) across, as for the
// Gaussian kernel exp(-(x - y)^2 / 2) of the paper's main text.
double inter_cluster_weight(double a) { return std::exp(-2 * a * a); }

// Eq. 11 (= Eq. 13). A query at +a weighs the N0 keys at +a by 1 and the N1 keys at -a by s, so
// c0 = (N0 - N1 s) / (N0 + N1 s) a = (r - s) / (r + s) a; a query at -a weighs them s and 1, so
// c1 = (N0 s - N1) / (N0 s + N1) a = (rs - 1) / (rs + 1) a. Subtracting:
// c0 - c1 = [(r - s)(rs + 1) - (rs - 1)(r + s)] a / ((r + s)(rs + 1)) = 2r(1 - s^2) a / ((1 + rs)(r + s)).
double lnas_centre_distance(double a, double r) {
    const double s = inter_cluster_weight(a);
    return 2 * r * (1 - s * s) * a / ((1 + r * s) * (r + s));
}

// Eq. 12 (= Eq. 14). Eq. 7 normalizes each key's column over the queries: a key at +a has column sum
// N0 + N1 s, a key at -a has N0 s + N1. A query at +a thus gives the keys at +a the total mass
// A = N0 / (N0 + N1 s) = r / (r + s) and those at -a B = N1 s / (N0 s + N1) = s / (rs + 1); Eq. 8 divides
// by A + B, so c0 = (A - B) / (A + B) a = (r - sq) / (r + sq) a after multiplying by (r + s), with
// q = (r + s) / (rs + 1). A query at -a gives masses rs / (r + s) and 1 / (rs + 1): c1 = (rs - q) / (rs + q) a.
// Subtracting, the numerator (r - sq)(rs + q) - (rs - q)(r + sq) = 2qr(1 - s^2), so
// c0 - c1 = 2qr(1 - s^2) a / ((q + rs)(r + sq)): DNAS acts as LNAS with the mass ratio r replaced by r / q.
double dnas_centre_distance(double a, double r) {
    const double s = inter_cluster_weight(a);
    const double q = (r + s) / (r * s + 1);
    return 2 * q * r * (1 - s * s) * a / ((q + r * s) * (r + s * q));
}

double simulate_centre_distance(double a, int n0, int n1, const Normalization& normalization) {
    HNAS_CHECK(n0 >= 1 && n1 >= 1, "centre distance simulation: cluster sizes must be at least 1 (got ", n0, " and ", n1, ")");
    HNAS_CHECK(static_cast<size_t>(n0) + static_cast<size_t>(n1) <= kMaxSimulatedPoints,
               "centre distance simulation: at most ", kMaxSimulatedPoints, " points (got ", n0 + n1, ")");
    Points points{1, std::vector<double>(static_cast<size_t>(n0), a)};
    points.coordinates.insert(points.coordinates.end(), static_cast<size_t>(n1), -a);
    const Points next = attention_step(points, 1.0, normalization);
    const auto centre0 = mean_point(next, 0, static_cast<size_t>(n0));
    const auto centre1 = mean_point(next, static_cast<size_t>(n0), next.size());
    return centre0[0] - centre1[0];
}

CentreDistanceResult centre_distance_analysis(const CentreDistanceOptions& options) {
    validate(options);
    CentreDistanceResult result;
    result.options = options;
    std::vector<std::pair<int, int>> simulated_sizes;
    for (const double r : log_spaced(options.r_min, options.r_max, options.simulated_points)) {
        const auto sizes = cluster_sizes_for_ratio(r, options.simulation_base);
        if (simulated_sizes.empty() || simulated_sizes.back() != sizes) simulated_sizes.push_back(sizes);
    }
    for (const double a : options.a_values) {
        CentreDistanceCurve curve;
        curve.a = a;
        curve.s = inter_cluster_weight(a);
        curve.r = log_spaced(options.r_min, options.r_max, options.curve_points);
        for (const double r : curve.r) {
            curve.lnas.push_back(lnas_centre_distance(a, r));
            curve.dnas.push_back(dnas_centre_distance(a, r));
        }
        for (const auto& [n0, n1] : simulated_sizes) {
            SimulatedCentreDistance point;
            point.n0 = n0;
            point.n1 = n1;
            point.r = static_cast<double>(n0) / n1;
            point.lnas = simulate_centre_distance(a, n0, n1, {ToyKind::lnas});
            point.dnas = simulate_centre_distance(a, n0, n1, {ToyKind::dnas});
            point.lnas_analytic = lnas_centre_distance(a, point.r);
            point.dnas_analytic = dnas_centre_distance(a, point.r);
            result.max_abs_error = std::max({result.max_abs_error, std::abs(point.lnas - point.lnas_analytic),
                                             std::abs(point.dnas - point.dnas_analytic)});
            curve.simulated.push_back(point);
        }
        result.curves.push_back(std::move(curve));
    }
    return result;
}

void to_json(nlohmann::json& json, const CentreDistanceResult& result) {
    const auto& options = result.options;
    json = {{"analysis", "centre_distance"},
            {"options",
             {{"a", options.a_values},
              {"r_min", options.r_min},
              {"r_max", options.r_max},
              {"curve_points", options.curve_points},
              {"simulated_points", options.simulated_points},
              {"simulation_base", options.simulation_base}}},
            {"max_abs_error", result.max_abs_error},
            {"curves", nlohmann::json::array()}};
    for (const auto& curve : result.curves) {
        nlohmann::json simulated = nlohmann::json::array();
        for (const auto& point : curve.simulated) {
            simulated.push_back({{"n0", point.n0},
                                 {"n1", point.n1},
                                 {"r", point.r},
                                 {"lnas", point.lnas},
                                 {"dnas", point.dnas},
                                 {"lnas_analytic", point.lnas_analytic},
                                 {"dnas_analytic", point.dnas_analytic}});
        }
        json["curves"].push_back({{"a", curve.a},
                                  {"s", curve.s},
                                  {"r", curve.r},
                                  {"lnas", curve.lnas},
                                  {"dnas", curve.dnas},
                                  {"simulated", std::move(simulated)}});
    }
}

}  // namespace hnas::analysis
