// Bucketed gradient sums over all ranks, overlapped with the backward pass (see gradient_reducer.h).
#include "distributed/gradient_reducer.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "backend/kernels.h"
#include "base/check.h"

namespace hnas::distributed {

GradientReducer::GradientReducer(std::vector<nn::NamedParameter> parameters, int64_t bucket_floats, bool bf16_sums)
    : parameters_(std::move(parameters)),
      bucket_floats_(bucket_floats),
      bf16_sums_(bf16_sums),
      bucket_of_(parameters_.size()),
      slot_of_(parameters_.size()),
      ready_(parameters_.size()),
      has_gradient_(parameters_.size()) {
    for (size_t i = 0; i < parameters_.size(); ++i) {
        // A parameter listed twice would never be reported by the second entry and stall every bucket after it.
        const auto [first, added] = index_of_.emplace(parameters_[i].parameter.node(), i);
        HNAS_CHECK(added, "gradient sums: parameter '", parameters_[i].name, "' is the same tensor as '",
                   parameters_[first->second].name, "'");
    }
    std::vector<size_t> reverse_order(parameters_.size());
    for (size_t i = 0; i < parameters_.size(); ++i) reverse_order[i] = parameters_.size() - 1 - i;
    fill_buckets(reverse_order);
}

// Buckets of about bucket_floats_ values, filled with the parameters in `order`.
void GradientReducer::fill_buckets(const std::vector<size_t>& order) {
    buckets_.clear();
    floats_ = 0;
    int64_t filled = 0;
    for (const size_t i : order) {
        const int64_t size = parameters_[i].parameter.numel();
        if (buckets_.empty() || (filled > 0 && filled + size > bucket_floats_)) {
            buckets_.emplace_back();
            filled = 0;
        }
        Bucket& bucket = buckets_.back();
        bucket_of_[i] = buckets_.size() - 1;
        slot_of_[i] = bucket.parameters.size();
        bucket.parameters.push_back(i);
        bucket.offsets.push_back(filled);
        filled += size;
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

std::vector<size_t> GradientReducer::bucket_order() const {
    std::vector<size_t> order;
    for (const Bucket& bucket : buckets_) order.insert(order.end(), bucket.parameters.begin(), bucket.parameters.end());
    return order;
}

void GradientReducer::begin(Communicator& communicator, const std::string& what) {
    HNAS_CHECK(communicator_ == nullptr, "gradient sums '", what, "' begun before the previous ones finished");
    communicator_ = &communicator;
    communicator.open_sums(what);
    std::fill(ready_.begin(), ready_.end(), 0);
    ready_order_.clear();
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
    if (!refilled_) ready_order_.push_back(index);
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
    const bool pass_reported = !ready_order_.empty();
    for (size_t i = 0; i < parameters_.size(); ++i) parameter_ready(i);  // those the last pass did not reach
    start_ready_buckets();
    Communicator& communicator = *communicator_;
    communicator.start_sum(has_gradient_);
    communicator.wait_sums();
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
    if (!refilled_) refill_in_ready_order(communicator, pass_reported);
}

// Every rank gets rank 0's order, so all build the same buckets. A pass that reported no gradient on
// rank 0 (its shard was empty) says nothing about the order: the buckets stay until the next step.
void GradientReducer::refill_in_ready_order(Communicator& communicator, bool pass_reported) {
    std::string bytes;
    if (communicator.rank() == 0 && pass_reported) {
        std::vector<uint32_t> order(ready_order_.begin(), ready_order_.end());
        bytes.assign(reinterpret_cast<const char*>(order.data()), order.size() * sizeof(uint32_t));
    }
    communicator.broadcast(bytes, "gradient bucket order");
    if (bytes.empty()) return;
    HNAS_CHECK(bytes.size() == parameters_.size() * sizeof(uint32_t), "gradient sums: rank 0 sent a bucket order of ",
               bytes.size(), " bytes for ", parameters_.size(), " parameters");
    std::vector<uint32_t> received(parameters_.size());
    std::memcpy(received.data(), bytes.data(), bytes.size());
    std::vector<size_t> order(received.begin(), received.end());
    std::vector<char> seen(parameters_.size(), 0);
    for (const size_t i : order) {
        HNAS_CHECK(i < parameters_.size() && !seen[i], "gradient sums: rank 0's bucket order is not a permutation of the ",
                   parameters_.size(), " parameters (parameter ", i, ")");
        seen[i] = 1;
    }
    fill_buckets(order);
    refilled_ = true;
}

}  // namespace hnas::distributed
