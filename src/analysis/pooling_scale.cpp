#include "analysis/pooling_scale.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/check.h"
#include "nn/attention_norm.h"
#include "tensor/random.h"

namespace hnas::analysis {

namespace {

// The standard deviation over every value of `out` (B, N, D) and the mean norm of its B·N vectors.
PoolingScaleRow measure(std::string aggregator, int64_t length, const Tensor& out) {
    const int64_t width = out.dim(-1), count = out.numel() / width;
    double sum = 0.0, squares = 0.0, norms = 0.0;
    for (int64_t v = 0; v < count; ++v) {
        double norm = 0.0;
        for (int64_t d = 0; d < width; ++d) {
            const double x = out.data()[v * width + d];
            sum += x;
            squares += x * x;
            norm += x * x;
        }
        norms += std::sqrt(norm);
    }
    const double n = static_cast<double>(out.numel()), mean = sum / n;
    return {std::move(aggregator), length, std::sqrt(std::max(0.0, squares / n - mean * mean)), norms / static_cast<double>(count)};
}

// Mean, sum, max (per coordinate) and the sum scaled to unit standard deviation per vector (the paper's
// "normalized"), each pooled over a sequence's N values and given to every one of its N positions.
std::vector<PoolingScaleRow> poolings(const Tensor& values, int64_t length) {
    const int64_t sequences = values.dim(0), width = values.dim(2);
    Tensor mean = Tensor::zeros(values.shape()), sum = Tensor::zeros(values.shape()), max = Tensor::zeros(values.shape()),
           normalized = Tensor::zeros(values.shape());
    std::vector<double> s(static_cast<size_t>(width)), m(static_cast<size_t>(width));
    for (int64_t b = 0; b < sequences; ++b) {
        const float* v = values.data() + b * length * width;
        std::fill(s.begin(), s.end(), 0.0);
        std::fill(m.begin(), m.end(), -INFINITY);
        for (int64_t j = 0; j < length; ++j) {
            for (int64_t d = 0; d < width; ++d) {
                s[static_cast<size_t>(d)] += v[j * width + d];
                m[static_cast<size_t>(d)] = std::max(m[static_cast<size_t>(d)], static_cast<double>(v[j * width + d]));
            }
        }
        double centre = 0.0, spread = 0.0;
        for (const double x : s) centre += x / static_cast<double>(width);
        for (const double x : s) spread += (x - centre) * (x - centre) / static_cast<double>(width);
        const double scale = spread > 0.0 ? 1.0 / std::sqrt(spread) : 0.0;
        for (int64_t i = 0; i < length; ++i) {
            const int64_t at = (b * length + i) * width;
            for (int64_t d = 0; d < width; ++d) {
                const double x = s[static_cast<size_t>(d)];
                sum.data()[at + d] = static_cast<float>(x);
                mean.data()[at + d] = static_cast<float>(x / static_cast<double>(length));
                max.data()[at + d] = static_cast<float>(m[static_cast<size_t>(d)]);
                normalized.data()[at + d] = static_cast<float>((x - centre) * scale);
            }
        }
    }
    return {measure("mean", length, mean), measure("sum", length, sum), measure("max", length, max),
            measure("normalized_sum", length, normalized)};
}

}  // namespace

std::vector<PoolingScaleRow> run_pooling_scale(const PoolingScaleOptions& options) {
    HNAS_CHECK(options.width > 0 && options.vectors > 0, "pooling scale: width ", options.width, " and vectors ",
               options.vectors, " must be positive");
    std::vector<PoolingScaleRow> rows;
    NoGradScope no_grad;
    for (const int64_t length : options.lengths) {
        HNAS_CHECK(length > 0 && options.vectors % length == 0, "pooling scale: length ", length, " must be positive and divide ",
                   options.vectors, " vectors");
        Rng rng(options.seed, static_cast<uint64_t>(length));
        const Shape shape{options.vectors / length, length, options.width};
        const Tensor queries = normal_tensor(rng, shape), keys = normal_tensor(rng, shape), values = normal_tensor(rng, shape);
        for (PoolingScaleRow& row : poolings(values, length)) rows.push_back(std::move(row));
        const Var scores = ops::head_scores(Var(queries), Var(keys), 1, 1.0f / std::sqrt(static_cast<float>(options.width)));
        for (const nn::AttentionKind* kind : nn::attention_kinds()) {
            if (kind->compares_templates) continue;
            const auto normalization = kind->make(*nn::kind_settings(kind->name), 1);
            const Var weights = normalization->normalize(scores, {});
            rows.push_back(measure(kind->name, length, ops::head_context(weights, Var(values)).value()));
        }
    }
    return rows;
}

Json pooling_scale_slopes(const std::vector<PoolingScaleRow>& rows, int64_t from) {
    std::map<std::string, std::vector<std::pair<double, double>>> points;  // aggregator → (ln N, ln std)
    std::vector<std::string> order;
    for (const PoolingScaleRow& row : rows) {
        if (!points.contains(row.aggregator)) order.push_back(row.aggregator);
        auto& list = points[row.aggregator];
        if (row.length >= from && row.output_std > 0.0) {
            list.emplace_back(std::log(static_cast<double>(row.length)), std::log(row.output_std));
        }
    }
    Json slopes = Json::object();
    for (const std::string& aggregator : order) {
        const auto& list = points.at(aggregator);
        if (list.size() < 2) continue;
        double mx = 0.0, my = 0.0;
        for (const auto& [x, y] : list) mx += x / static_cast<double>(list.size()), my += y / static_cast<double>(list.size());
        double sxy = 0.0, sxx = 0.0;
        for (const auto& [x, y] : list) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
        slopes[aggregator] = sxy / sxx;
    }
    return slopes;
}

}  // namespace hnas::analysis
