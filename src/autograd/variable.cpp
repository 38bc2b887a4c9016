#include "autograd/variable.h"

#include <unordered_map>
#include <unordered_set>

#include "backend/kernels.h"

namespace hnas {

namespace {
thread_local bool grad_recording = true;
}

bool grad_enabled() { return grad_recording; }

NoGradScope::NoGradScope() : previous_(grad_recording) { grad_recording = false; }
NoGradScope::~NoGradScope() { grad_recording = previous_; }

void Node::release_value() {
    if (!value.defined()) return;
    released_shape = value.shape();
    value = Tensor();
}

Var::Var(Tensor value, bool requires_grad) : node_(std::make_shared<Node>()) {
    node_->value = std::move(value);
    node_->requires_grad = requires_grad;
    node_->handles.store(1, std::memory_order_relaxed);
}

Var::Var(const Var& other) noexcept : node_(other.node_) {
    if (node_) node_->handles.fetch_add(1, std::memory_order_relaxed);
}

Var& Var::operator=(const Var& other) noexcept {
    if (node_ == other.node_) return *this;
    if (other.node_) other.node_->handles.fetch_add(1, std::memory_order_relaxed);
    drop_handle();
    node_ = other.node_;
    return *this;
}

Var& Var::operator=(Var&& other) noexcept {
    if (this == &other) return *this;
    drop_handle();
    node_ = std::move(other.node_);
    return *this;
}

Var::~Var() { drop_handle(); }

void Var::drop_handle() noexcept {
    if (!node_) return;
    // The last handle of an interior node still in a graph: its value is read by nobody but the
    // closures that kept references of their own.
    if (node_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1 && node_->backward_fn && node_.use_count() > 1) {
        node_->release_value();
    }
    node_.reset();
}

const Tensor& Var::value() const {
    HNAS_CHECK(node_, "var: use of an undefined Var");
    return node_->value;
}

Tensor& Var::value() {
    HNAS_CHECK(node_, "var: use of an undefined Var");
    return node_->value;
}

Tensor Var::grad() const {
    if (!node_ || !node_->grad_initialized) return Tensor();
    return node_->grad;
}

void Var::zero_grad() {
    if (node_) node_->grad_initialized = false;
}

void Var::backward() {
    HNAS_CHECK(node_, "backward: undefined Var");
    HNAS_CHECK(numel() == 1, "backward: needs a single value (a loss), got shape ", shape_str(shape()));
    backward(Tensor::full(shape(), 1.0f));
}

void Var::backward(const Tensor& grad_output) { backward(grad_output, BackwardHooks{}); }

void Var::backward(const Tensor& grad_output, const BackwardHooks& hooks) {
    HNAS_CHECK(node_ && node_->requires_grad, "backward: the value does not depend on any parameter");
    HNAS_CHECK(grad_output.shape() == shape(), "backward: gradient of shape ", shape_str(grad_output.shape()),
               " for a value of shape ", shape_str(shape()));

    // Iterative depth-first post-order: every node comes after all nodes it was computed from. The
    // order holds owning pointers because running a node's backward releases its edges.
    std::vector<std::shared_ptr<Node>> order;
    std::unordered_set<Node*> visited{node_.get()};
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{node_, 0}};
    while (!stack.empty()) {
        auto& [node, next_input] = stack.back();
        if (next_input < node->inputs.size()) {
            const std::shared_ptr<Node>& input = node->inputs[next_input++];
            if (input && input->requires_grad && visited.insert(input.get()).second) stack.push_back({input, 0});
        } else {
            order.push_back(node);
            stack.pop_back();
        }
    }

    // Per leaf, the edges from nodes still to run: its gradient is final when the count reaches zero.
    std::unordered_map<Node*, int> pending_edges;
    if (hooks.leaf_ready) {
        for (const auto& node : order) {
            for (const auto& input : node->inputs) {
                if (input && input->requires_grad && !input->backward_fn) ++pending_edges[input.get()];
            }
        }
    }

    const std::vector<std::shared_ptr<Node>> root{node_};
    GradSink(root).add(0, grad_output);
    if (hooks.leaf_ready && !node_->backward_fn) hooks.leaf_ready(*node_);  // the root is itself a leaf

    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node* node = it->get();
        if (!node->backward_fn) continue;  // a leaf: its gradient stays for the optimizer
        if (node->grad_initialized) {
            GradSink sink(node->inputs);
            node->backward_fn(node->grad, sink);
        }
        if (hooks.leaf_ready) {
            for (const auto& input : node->inputs) {
                const auto pending = input ? pending_edges.find(input.get()) : pending_edges.end();
                if (pending != pending_edges.end() && --pending->second == 0) hooks.leaf_ready(*input);
            }
        }
        if (hooks.node_done) hooks.node_done(*node);
        // Interior nodes are used once: free the closure, the graph edges and the gradient now.
        node->backward_fn = nullptr;
        node->inputs.clear();
        node->grad = Tensor();
        node->grad_initialized = false;
    }
}

GradSink::Target GradSink::target(size_t input) {
    Node& node = *inputs_[input];
    // Copy on write: a gradient shared by add() must not change under its other holders.
    if (node.grad.defined() && node.grad.storage_shared()) {
        node.grad = node.grad_initialized ? node.grad.clone() : Tensor();
    }
    if (!node.grad.defined()) node.grad = Tensor::empty(node.shape());
    const bool accumulate = node.grad_initialized;
    node.grad_initialized = true;
    return {node.grad, accumulate};
}

void GradSink::add(size_t input, const Tensor& grad) {
    if (!wants(input)) return;
    Node& node = *inputs_[input];
    // An interior node's gradient is read only by its own backward pass, so its first contribution
    // of the full shape is shared instead of copied (a residual add's backward then copies nothing).
    // Leaves are excluded: the gradient sums (data-parallel) write their gradients in place.
    if (!node.grad_initialized && node.backward_fn && grad.shape() == node.shape()) {
        node.grad = grad;
        node.grad_initialized = true;
        return;
    }
    Target out = target(input);
    kernels::accumulate_reduced(grad, out.grad, out.accumulate);
}

Var make_result(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn backward_fn) {
    Var result(std::move(value));
    if (!grad_enabled()) return result;
    bool any_requires_grad = false;
    for (const Var& input : inputs) any_requires_grad |= input.requires_grad();
    if (!any_requires_grad) return result;
    Node* node = result.node();
    node->requires_grad = true;
    node->op = op;
    node->inputs.reserve(inputs.size());
    for (const Var& input : inputs) node->inputs.push_back(input.shared_node());
    node->backward_fn = std::move(backward_fn);
    return result;
}

}  // namespace hnas
