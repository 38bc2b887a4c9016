// Mode collapse under repeated self-attention (paper 000 Sec. 5.2 and Appendix C; paper 004 Appendix E).
//
// The toy has no projections: the points are the queries, keys and values, and one step replaces every
// point by its attention output over all points. Scores are score_scale * <x_i, x_j>; LNAS normalizes
// exp(scores) over keys (paper 000 Eq. 3 with the priors alpha_j ~ exp(|k_j|^2 / 2), i.e. Eq. 1/4), DNAS
// first over queries for each key (Eq. 7) and then over keys for each query (Eq. 8), HNAS mixes the two
// (u * DNAS + (1 - u) * LNAS, paper 000 Sec. 6).
//
// Two analyses:
//   * run_mode_collapse: the 2-D experiment of paper 004 Fig. 6 (000 Figs. 5-6): Gaussian clusters of
//     n0 points around (1.8, 0.7) and n1 points around (-1, -1), followed for a few steps, with the number
//     of clusters and the distance between the two clusters' centres after every step.
//   * centre_distance_analysis: the 1-D analysis of paper 000 Eq. 11-12 (the same as Eq. 13-14 of its
//     Appendix C): the centre distance after one step as a function of r = N0/N1, next to a simulation of
//     that setting with the same attention step.
//
// Plain std::vector<double>: the largest case is ~1000 points, and double keeps the simulation exact
// enough to check the closed forms to 1e-12.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/enum_names.h"

namespace hnas::analysis {

// The normalizations the toy computes, in double precision so the closed forms check to 1e-12: the
// papers' three (the registry's float kernels, src/nn/attention_kinds/ and its nn::AttentionKind
// entries, serve the models).
enum class ToyKind { lnas, dnas, hnas };
inline constexpr EnumName<ToyKind> kToyKindNames[]{
    {ToyKind::lnas, "lnas"}, {ToyKind::dnas, "dnas"}, {ToyKind::hnas, "hnas"}};
constexpr const auto& enum_names(ToyKind) { return kToyKindNames; }

// n points of `dim` coordinates, row-major.
struct Points {
    size_t dim = 0;
    std::vector<double> coordinates;

    size_t size() const { return dim == 0 ? 0 : coordinates.size() / dim; }
    const double* point(size_t i) const { return coordinates.data() + i * dim; }
};

// How one step normalizes: the kind, and for hnas the weight u of DNAS.
struct Normalization {
    ToyKind kind = ToyKind::lnas;
    double hybrid_u = 0.5;
};

// The n x n attention weights of one self-attention step over `points` (row i: query i, column j: key j);
// every row sums to 1.
std::vector<double> attention_weights(const Points& points, double score_scale, const Normalization& normalization);

// The same weights from any n x n score matrix (row i: query i). Its dnas is the registered dnas kind's
// definition (src/nn/attention_kinds/dnas.cpp, composed in src/ops/) in double precision, and
// likewise lnas and hnas: tests/analysis/test_mode_collapse.cpp holds them equal on random scores.
std::vector<double> normalize_scores(std::vector<double> scores, size_t n, const Normalization& normalization);

// One step: every point replaced by sum_j W_ij x_j (with `residual`, by x_i + sum_j W_ij x_j).
Points attention_step(const Points& points, double score_scale, const Normalization& normalization, bool residual = false);

// Clusters are the connected components of the graph that links two points closer than merge_distance
// (single linkage). A component with fewer than min_cluster_points points is not a mode but stray points
// (an outlier of a Gaussian, or points still travelling between clusters): it is counted in stray_points.
struct Clustering {
    std::vector<size_t> cluster_sizes;  // largest first
    size_t stray_points = 0;

    size_t clusters() const { return cluster_sizes.size(); }
};

Clustering find_clusters(const Points& points, double merge_distance, size_t min_cluster_points);

// ---- The 2-D experiment ----

struct ModeCollapseOptions {
    int n0 = 500;  // points of the Gaussian around centre0 (the paper's red cluster)
    int n1 = 50;   // points of the Gaussian around centre1 (blue)
    int steps = 4;
    uint64_t seed = 1;
    // Standard deviation of each coordinate (isotropic covariance spread^2 * I). The paper's value was lost
    // from the text; 0.2 gives compact clusters (spread << the 3.28 between the centres, as Eq. 11-12
    // assume) that still show their extent in the plots. The paper's outcome (LNAS one cluster after 4
    // steps at 500 vs 50, DNAS two; both two when balanced) held for each of 20 seeds with spreads 0.1 to
    // 0.25 and score scales 0.8 to 1, so it is not an artefact of these choices.
    double spread = 0.2;
    // Multiplies the dot products. 1 is the papers' Eq. 1, 3 and 7 (exp(q.k) with no temperature). Larger
    // scales sharpen the weights so that LNAS needs more than 4 steps (at 1.1, for 8 of 20 seeds); smaller
    // ones flatten them towards the mean, so that with enough steps both normalizations collapse.
    double score_scale = 1.0;
    std::vector<ToyKind> kinds{ToyKind::lnas, ToyKind::dnas};
    double hybrid_u = 0.5;  // u of hnas, when hnas is among the kinds
    // Each step adds its input back (x + attention(x)): the residual that paper 004 App. E says keeps
    // Transformers from collapsing modes.
    bool residual = false;
    // Single-linkage distance as a fraction of the distance between the two generating centres (3.28):
    // 0.1 (0.33) is well below the gap between the initial clusters yet above the spacing of points inside
    // a cluster of spread 0.2. A larger distance (0.25) also works for the final counts but chains the
    // LNAS cluster that is streaming towards the other one to it a step early, through its leading points.
    double merge_fraction = 0.1;
    // A cluster must hold at least this fraction of the smaller initial cluster (at least one point), so
    // that a Gaussian's outliers and a few points ahead of a moving cluster are stray points, not modes.
    double min_cluster_fraction = 0.1;

    static constexpr std::array<double, 2> centre0{1.8, 0.7};
    static constexpr std::array<double, 2> centre1{-1.0, -1.0};
};

struct ModeCollapseStep {
    int step = 0;  // 0: the sampled points
    Clustering clustering;
    // Distance between the mean of the points sampled from Gaussian 0 and the mean of those from
    // Gaussian 1 (the 2-D analogue of Eq. 11-12's c0 - c1); each point keeps its origin across steps.
    double centre_distance = 0.0;
    Points points;  // points [0, n0) come from Gaussian 0, [n0, n0 + n1) from Gaussian 1
};

struct ModeCollapseRun {
    Normalization normalization;
    std::vector<ModeCollapseStep> steps;  // steps + 1 entries
};

struct ModeCollapseResult {
    ModeCollapseOptions options;
    double merge_distance = 0.0;
    size_t min_cluster_points = 0;
    std::vector<ModeCollapseRun> runs;  // one per kind, all from the same sampled points
};

ModeCollapseResult run_mode_collapse(const ModeCollapseOptions& options);

void to_json(nlohmann::json& json, const ModeCollapseResult& result);

// ---- The 1-D analysis of paper 000 Eq. 11-12 ----

// s = exp(-2 a^2): the weight between the clusters at +a and -a relative to the weight within a
// cluster (t = 1). With dot-product scores exp(x_i x_j) it is exp(-a^2) / exp(a^2) (000 footnote †).
double inter_cluster_weight(double a);

// Centre distance after one step for N0 points at +a and N1 at -a, r = N0/N1 (Eq. 11 and Eq. 12).
double lnas_centre_distance(double a, double r);
double dnas_centre_distance(double a, double r);

// The same setting simulated: n0 points exactly at +a, n1 at -a, one attention_step (score scale 1),
// returns the mean of the first n0 outputs minus the mean of the other n1.
double simulate_centre_distance(double a, int n0, int n1, const Normalization& normalization);

struct CentreDistanceOptions {
    std::vector<double> a_values{0.5, 1.0, 1.5};
    double r_min = 0.01;
    double r_max = 100.0;
    int curve_points = 161;       // r values of the analytic curves, evenly spaced in log r
    int simulated_points = 17;    // r values simulated, evenly spaced in log r, then made N0/N1 exactly
    int simulation_base = 10;     // the smaller cluster's size in the simulations
};

struct SimulatedCentreDistance {
    int n0 = 0;
    int n1 = 0;
    double r = 0.0;  // n0 / n1
    double lnas = 0.0, dnas = 0.0;                    // simulated
    double lnas_analytic = 0.0, dnas_analytic = 0.0;  // Eq. 11, Eq. 12 at the same r
};

struct CentreDistanceCurve {
    double a = 0.0;
    double s = 0.0;  // inter_cluster_weight(a)
    std::vector<double> r, lnas, dnas;
    std::vector<SimulatedCentreDistance> simulated;
};

struct CentreDistanceResult {
    CentreDistanceOptions options;
    std::vector<CentreDistanceCurve> curves;
    double max_abs_error = 0.0;  // largest |simulated - analytic| over all simulated points
};

CentreDistanceResult centre_distance_analysis(const CentreDistanceOptions& options);

void to_json(nlohmann::json& json, const CentreDistanceResult& result);

}  // namespace hnas::analysis
