// Bucketed gradient sums over all ranks, overlapped with the backward pass (see gradient_reducer.h).
#include "distributed/gradient_reducer.h"

#include <algorithm>
#include <span>

#include "backend/kernels.h"
#include "base/check.h"

namespace hnas::distributed {

GradientReducer::GradientReducer(std::vector<nn::NamedParameter> parameters, int64_t bucket_floats, bool bf16_sums)
    : parameters_(std::move(parameters)),
      bf16_sums_(bf16_sums),
      bucket_of_(parameters_.size()),
      slot_of_(parameters_.size()),
      ready_(parameters_.size()),
      has_gradient_(parameters_.size()) {
    int64_t filled = 0;
    for (size_t i = parameters_.size(); i-- > 0;) {
        const int64_t size = parameters_[i].parameter.numel();
        if (buckets_.empty() || (filled > 0 && filled + size > bucket_floats)) {
            buckets_.emplace_back();
            filled = 0;
        }
        Bucket& bucket = buckets_.back();
        bucket_of_[i] = buckets_.size() - 1;
        slot_of_[i] = bucket.parameters.size();
        bucket.parameters.push_back(i);
        bucket.offsets.push_back(filled);
        filled += size;
        // A parameter listed twice would never be reported by the second entry and stall every bucket after it.
        const auto [first, added] = index_of_.emplace(parameters_[i].parameter.node(), i);
        HNAS_CHECK(added, "gradient sums: parameter '", parameters_[i].name, "' is the same tensor as '",
                   parameters_[first->second].name, "'");
    }
    for (Bucket& bucket : buckets_) {
        bucket.floats = bucket.offsets.back() + parameters_[bucket.parameters.back()].parameter.numel();
        floats_ += bucket.floats;
        if (bf16_sums_) {
            bucket.bf16.resize(static_cast<size_t>(bucket.floats));
        } else {
            bucket.f32.resize(static_cast<size_t>(bucket.floats));
        }
    }
}

void GradientReducer::begin(Communicator& communicator, const std::string& what) {
    HNAS_CHECK(communicator_ == nullptr, "gradient sums '", what, "' begun before the previous ones finished");
    communicator_ = &communicator;
    communicator.open_sums(what);
    std::fill(ready_.begin(), ready_.end(), 0);
    for (Bucket& bucket : buckets_) bucket.pending = bucket.parameters.size();
    next_bucket_ = 0;
}

BackwardHooks GradientReducer::hooks() {
    BackwardHooks hooks;
    hooks.leaf_ready = [this](Node& leaf) {
        const auto found = index_of_.find(&leaf);
        if (found == index_of_.end()) return;  // a leaf that is not a parameter (an input)
        parameter_ready(found->second);
        start_ready_buckets();
    };
    hooks.node_done = [this](const Node&) { communicator_->progress(); };
    return hooks;
}

// Copies the parameter's final gradient (zeros when it has none) into its bucket, rounded to bf16 with
// bf16 sums.
void GradientReducer::parameter_ready(size_t index) {
    HNAS_CHECK(communicator_ != nullptr, "gradient sums: a gradient became final outside begin()/finish()");
    if (ready_[index]) return;
    ready_[index] = 1;
    Bucket& bucket = buckets_[bucket_of_[index]];
    const Tensor grad = parameters_[index].parameter.grad();
    const int64_t size = parameters_[index].parameter.numel();
    const int64_t offset = bucket.offsets[slot_of_[index]];
    has_gradient_[index] = grad.defined() ? 1.0f : 0.0f;
    if (bf16_sums_) {
        uint16_t* out = bucket.bf16.data() + offset;
        if (grad.defined()) {
            kernels::convert_to_bf16(grad.data(), out, size);
        } else {
            std::fill(out, out + size, kernels::round_to_bf16(0.0f));
        }
    } else {
        float* out = bucket.f32.data() + offset;
        if (grad.defined()) {
            std::copy(grad.data(), grad.data() + size, out);
        } else {
            std::fill(out, out + size, 0.0f);
        }
    }
    --bucket.pending;
}

void GradientReducer::start_ready_buckets() {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
        Bucket& bucket = buckets_[next_bucket_++];
        if (bf16_sums_) {
            communicator_->start_sum(std::span<uint16_t>(bucket.bf16));
        } else {
            communicator_->start_sum(std::span<float>(bucket.f32));
        }
    }
}

void GradientReducer::finish() {
    HNAS_CHECK(communicator_ != nullptr, "gradient sums: finish() without begin()");
    for (size_t i = 0; i < parameters_.size(); ++i) parameter_ready(i);  // those the last pass did not reach
    start_ready_buckets();
    communicator_->start_sum(has_gradient_);
    communicator_->wait_sums();
    communicator_ = nullptr;

    for (const Bucket& bucket : buckets_) {
        for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
            const size_t i = bucket.parameters[slot];
            if (has_gradient_[i] == 0.0f) continue;
            Node* node = parameters_[i].parameter.node();
            if (!node->grad_initialized) {
                node->grad = Tensor::empty(node->value.shape());
                node->grad_initialized = true;
            }
            const int64_t offset = bucket.offsets[slot], size = parameters_[i].parameter.numel();
            if (bf16_sums_) {
                const uint16_t* in = bucket.bf16.data() + offset;
                std::transform(in, in + size, node->grad.data(), kernels::bf16_to_float);
            } else {
                const float* in = bucket.f32.data() + offset;
                std::copy(in, in + size, node->grad.data());
            }
        }
    }
}

}  // namespace hnas::distributed
