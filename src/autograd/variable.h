// Reverse-mode automatic differentiation on an eager tape.
// A Var is a shared handle to a Node: the value an op computed, its gradient, the Vars it was computed
// from, and the closure that carries the op's chain rule. Ops (src/ops/) compute their value at once
// and attach the closure next to the forward code, so an op's forward and backward read as one piece.
// backward() walks the nodes in reverse topological order from a scalar; leaf gradients accumulate
// across calls until zero_grad(); interior nodes release their closures as soon as they have run.
// An interior value that no Var holds any more is released at once: a backward closure keeps its
// own reference to what it reads, so the graph holds only what backward needs (as PyTorch's saved
// tensors do), not every intermediate of the forward pass.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace hnas {

struct Node;
class GradSink;

// backward closure: reads the output gradient, adds into the inputs' gradients through the sink.
using BackwardFn = std::function<void(const Tensor& grad_output, GradSink& sink)>;
// Watches a backward pass (see Var::backward): data-parallel training starts summing a leaf's gradient
// over the ranks as soon as it is final, and lets those sums advance while the pass computes.
struct BackwardHooks {
    std::function<void(Node& leaf)> leaf_ready;  // once per leaf the pass reaches, when its gradient is final
    std::function<void(const Node& node)> node_done;  // after every interior node's backward ran
};

struct Node {
    Tensor value;                      // empty once released (see release_value)
    Shape released_shape;              // the value's shape after it was released
    std::atomic<int32_t> handles{0};   // the Vars holding this node; the graph's edges do not count
    Tensor grad;                       // allocated on first use
    bool grad_initialized = false;     // false: grad holds garbage and must be overwritten, not added to
    bool requires_grad = false;
    const char* op = "leaf";
    std::vector<std::shared_ptr<Node>> inputs;
    BackwardFn backward_fn;

    const Shape& shape() const { return value.defined() ? value.shape() : released_shape; }
    // An interior node whose last Var is gone: only its consumers' closures may still read its
    // storage, through references of their own.
    void release_value();
};

class Var {
public:
    Var() = default;
    explicit Var(Tensor value, bool requires_grad = false);
    Var(const Var& other) noexcept;
    Var(Var&& other) noexcept = default;
    Var& operator=(const Var& other) noexcept;
    Var& operator=(Var&& other) noexcept;
    ~Var();

    bool defined() const { return node_ != nullptr; }
    const Tensor& value() const;
    Tensor& value();
    const Shape& shape() const { return value().shape(); }
    int rank() const { return value().rank(); }
    int64_t dim(int axis) const { return value().dim(axis); }
    int64_t numel() const { return value().numel(); }
    float item() const { return value().item(); }
    bool requires_grad() const { return node_ && node_->requires_grad; }
    const char* op() const { return node_->op; }

    // The accumulated gradient; an undefined Tensor when nothing has flowed into it yet.
    Tensor grad() const;
    void zero_grad();

    // Back-propagate from this Var, which must hold one value (a loss); seeds its gradient with 1.
    void backward();
    // Back-propagate a given gradient of this Var (same shape): the vector-Jacobian product.
    void backward(const Tensor& grad_output);
    // The same, calling hooks.leaf_ready once for every leaf this pass reaches, as soon as no node left
    // to run can add to the leaf's gradient (as PyTorch DDP's gradient hooks do), and hooks.node_done
    // after every node.
    void backward(const Tensor& grad_output, const BackwardHooks& hooks);

    Node* node() const { return node_.get(); }
    const std::shared_ptr<Node>& shared_node() const { return node_; }

private:
    void drop_handle() noexcept;

    std::shared_ptr<Node> node_;
};

// Where an op's backward writes: one slot per input, in the order the op listed them.
class GradSink {
public:
    explicit GradSink(const std::vector<std::shared_ptr<Node>>& inputs) : inputs_(inputs) {}

    bool wants(size_t input) const { return inputs_[input] && inputs_[input]->requires_grad; }

    // Add `grad` into input's gradient, summing over axes that were broadcast in the forward pass.
    void add(size_t input, const Tensor& grad);

    // Direct access for fused kernels: the gradient buffer and whether it already holds values that
    // must be added to (true) or garbage that must be overwritten (false). Marks it initialized.
    struct Target {
        Tensor& grad;
        bool accumulate;
    };
    Target target(size_t input);

private:
    const std::vector<std::shared_ptr<Node>>& inputs_;
};

// One entry of a Target's gradient: `value` added to it, or written over the garbage it held.
inline void write_gradient(float& entry, float value, bool accumulate) { entry = accumulate ? entry + value : value; }

// Records an op's result: a node that remembers its inputs and backward closure only when gradient
// recording is on and some input requires a gradient.
Var make_result(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn backward_fn);

// Gradient recording is on by default; NoGradScope turns it off (evaluation, decoding) for its lifetime.
bool grad_enabled();
class NoGradScope {
public:
    NoGradScope();
    ~NoGradScope();
    NoGradScope(const NoGradScope&) = delete;
    NoGradScope& operator=(const NoGradScope&) = delete;

private:
    bool previous_;
};

}  // namespace hnas
