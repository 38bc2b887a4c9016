// Bucketed gradient sums over all ranks (see gradient_reducer.h).
#include "distributed/gradient_reducer.h"

#include <algorithm>
#include <span>

#include "autograd/variable.h"

namespace hnas::distributed {

GradientReducer::GradientReducer(std::vector<nn::NamedParameter> parameters, int64_t bucket_floats)
    : parameters_(std::move(parameters)), has_gradient_(parameters_.size()) {
    int64_t filled = 0;
    for (size_t i = 0; i < parameters_.size(); ++i) {
        const int64_t size = parameters_[i].parameter.numel();
        if (buckets_.empty() || (filled > 0 && filled + size > bucket_floats)) {
            buckets_.emplace_back();
            filled = 0;
        }
        buckets_.back().push_back(i);
        filled += size;
    }
    for (const auto& bucket : buckets_) {
        int64_t size = 0;
        for (size_t i : bucket) size += parameters_[i].parameter.numel();
        buffers_.emplace_back(static_cast<size_t>(size));
    }
}

void GradientReducer::sum(Communicator& communicator, const std::string& what) {
    std::vector<std::span<float>> spans;
    for (size_t b = 0; b < buckets_.size(); ++b) {
        float* out = buffers_[b].data();
        for (size_t i : buckets_[b]) {
            const Tensor grad = parameters_[i].parameter.grad();
            const auto size = static_cast<size_t>(parameters_[i].parameter.numel());
            has_gradient_[i] = grad.defined() ? 1.0f : 0.0f;
            if (grad.defined()) {
                std::copy(grad.data(), grad.data() + size, out);
            } else {
                std::fill(out, out + size, 0.0f);
            }
            out += size;
        }
        spans.emplace_back(buffers_[b]);
    }
    spans.emplace_back(has_gradient_);
    communicator.sum(spans, what);

    for (size_t b = 0; b < buckets_.size(); ++b) {
        const float* in = buffers_[b].data();
        for (size_t i : buckets_[b]) {
            const auto size = static_cast<size_t>(parameters_[i].parameter.numel());
            if (has_gradient_[i] > 0.0f) {
                Node* node = parameters_[i].parameter.node();
                if (!node->grad_initialized) {
                    node->grad = Tensor::empty(node->value.shape());
                    node->grad_initialized = true;
                }
                std::copy(in, in + size, node->grad.data());
            }
            in += size;
        }
    }
}

}  // namespace hnas::distributed
