"""PyTorch reference values for the C++ op tests: writes tests/fixtures/ops.json.

This script is the only place Python touches the op tests. The C++ tests read the
JSON it writes, so the tests themselves never need Python. The file is committed;
run this script again only when adding or changing a case.

How to run
----------
It needs Debian's PyTorch and OpenBLAS, from the system Python:

    apt-get install -y python3-torch libopenblas0-openmp
    /usr/bin/python3 scripts/make_fixtures.py

Use /usr/bin/python3: a `python3` found first on PATH (for example a pyenv one)
has no torch. Only the standard library and torch are used. The seed and thread
count are fixed, so running the script twice writes a byte-identical file.

File format (a contract with the C++ tests)
-------------------------------------------
    {
      "generator": "scripts/make_fixtures.py",
      "torch_version": "<torch.__version__>",
      "cases": [
        {
          "name": "softmax_query_axis_masked",     unique
          "op": "softmax",                          op name, listed below
          "attrs": {"axis": -2},                    ints, floats, bools, strings, int lists
          "inputs": {"x": T, "mask": T},            in the order the op lists them
          "output": T,
          "grad_output": T,                         same shape as output
          "grads": {"x": T}                         differentiable inputs only
        }, ...
      ]
    }
    T = {"shape": [2, 3], "data": [...]}            data is flat and row-major
    T = {"shape": [4], "dtype": "int32", "data": [...]}   integer tensors (ids, targets)

Float tensors leave out "dtype", which means float32. A scalar has shape [] and
one data element.

Numerics. Every float input (and grad_output) is drawn as float32 and written
with 9 significant digits, which reads back as the same float32. The reference
is computed in float64 from exactly those float32 values. "output" and "grads"
are float64 results, written with 12 significant digits. Each entry of "grads"
is the gradient of sum(output * grad_output) with respect to that input, that
is, the vector-Jacobian product with grad_output. Keys keep the order written
here (inputs in op order); they are not sorted.

Ops, inputs (in order) and attrs
--------------------------------
  matmul      a, b; trans_a, trans_b. out = op(a) @ op(b), where op swaps the last
              two axes when its flag is set (a and b are stored already transposed)
  linear      x, weight, bias. out = x @ weight^T + bias, weight is (out, in)
  add sub mul div   a, b, with numpy broadcasting
  scale       x; factor. out = factor * x
  sum mean max      x; axis (may be negative), keepdim. max has no ties, and its
              gradient goes to the argmax
  exp log sqrt rsqrt relu tanh sigmoid   x
  gelu        x; approximate, "none" (erf form) or "tanh"
  softmax log_softmax   x, mask; axis. out = softmax(x + mask, axis). The mask is
              additive, broadcasts to x, holds 0 (allowed) or -1e9 (masked), and
              has no gradient. Masked log_softmax outputs are about -1e9, so compare
              them with a relative tolerance.
  logsumexp   x; axis, keepdim
  layer_norm  x, weight, bias; eps. Normalizes over the last axis, biased variance.
  embedding   weight (V, D), ids int32; out[..., :] = weight[ids[...], :]. Only
              weight has a gradient; repeated ids add up.
  cross_entropy   logits (N, V), targets int32 (N); ignore_index, label_smoothing.
              Scalar output, torch's reduction='mean'. With p = log_softmax(logits),
              e = label_smoothing, and rows n with targets[n] != ignore_index:
                  out = sum_n [ (1 - e) * -p[n, t_n] + e * mean_c(-p[n, c]) ] / count(n)
  transpose   x; axis0, axis1.   permute: x; dims.   reshape: x; shape.
              The output is contiguous.
  concat      x0, x1 (, x2); axis
  slice       x; axis, start, end. out = x.narrow(axis, start, end - start)
"""

import json
import math
import os

import torch
import torch.nn.functional as F

SEED = 20240607
OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ops.json")
MAX_BYTES = 400 * 1024
NEG = -1e9  # masked entry of an additive mask; finite, exact in float32

OPS = {
    "matmul", "linear", "add", "sub", "mul", "div", "scale", "sum", "mean", "max",
    "exp", "log", "sqrt", "rsqrt", "relu", "tanh", "sigmoid", "gelu", "softmax",
    "log_softmax", "logsumexp", "layer_norm", "embedding", "cross_entropy",
    "transpose", "permute", "reshape", "concat", "slice",
}

gen = torch.Generator()


# ---------------------------------------------------------------- input drawing
# All draws return float32 tensors; the reference later upcasts them exactly.

def uniform(shape, lo=-1.0, hi=1.0):
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo


def randn(shape):
    return torch.randn(shape, generator=gen, dtype=torch.float32)


def away_from_zero(shape, gap=0.05):
    """U(gap, 1) with a random sign: keeps inputs off the relu kink."""
    mag = uniform(shape, gap, 1.0)
    sign = torch.where(uniform(shape) < 0, -1.0, 1.0).to(torch.float32)
    return mag * sign


def ids(values):
    return torch.tensor(values, dtype=torch.int32)


# ---------------------------------------------------------------- serialization

def fmt(x, digits):
    v = float(f"{x:.{digits}g}")
    assert math.isfinite(v), "non-finite value in a fixture"
    return v + 0.0  # turns -0.0 into 0.0


def tensor_json(t, digits):
    entry = {"shape": list(t.shape)}
    if t.dtype in (torch.int32, torch.int64):
        entry["dtype"] = "int32"
        entry["data"] = [int(v) for v in t.reshape(-1).tolist()]
    else:
        entry["data"] = [fmt(v, digits) for v in t.reshape(-1).tolist()]
        if t.dtype == torch.float32:  # the written decimals must read back as the same float32
            assert torch.equal(torch.tensor(entry["data"], dtype=torch.float32).reshape(t.shape), t)
    return entry


F32_DIGITS = 9    # round-trips float32 exactly
F64_DIGITS = 12   # far below float32 resolution, and stable against last-bit BLAS noise

cases = []


def add_case(name, op, attrs, inputs, fn, nograd=()):
    """Record one case.

    inputs: ordered dict name -> float32 or int32 tensor.
    fn(**float64_inputs) -> output; float inputs not in `nograd` are differentiable.
    """
    assert op in OPS, op
    assert all(c["name"] != name for c in cases), f"duplicate case name {name}"
    ref = {}
    for k, t in inputs.items():
        if t.dtype == torch.float32:
            d = t.double()
            if k not in nograd:
                d.requires_grad_(True)
            ref[k] = d
        else:
            ref[k] = t.long()
    out = fn(**ref)
    grad_out = uniform(out.shape, 0.5, 1.5) if out.dim() == 0 else uniform(out.shape)
    (out * grad_out.double()).sum().backward()
    grads = {k: tensor_json(v.grad, F64_DIGITS) for k, v in ref.items() if v.requires_grad}
    assert grads, f"{name}: no differentiable input"
    cases.append({
        "name": name,
        "op": op,
        "attrs": attrs,
        "inputs": {k: tensor_json(t, F32_DIGITS) for k, t in inputs.items()},
        "output": tensor_json(out.detach().contiguous(), F64_DIGITS),
        "grad_output": tensor_json(grad_out, F32_DIGITS),
        "grads": grads,
    })


# ---------------------------------------------------------------- the cases

def op_t(t, flag):
    return t.transpose(-1, -2) if flag else t


def build_matmul():
    for ta in (False, True):
        for tb in (False, True):
            a = uniform((4, 3) if ta else (3, 4))
            b = uniform((5, 4) if tb else (4, 5))
            name = "matmul_2d" + ("_trans_a" if ta else "") + ("_trans_b" if tb else "")
            add_case(name, "matmul", {"trans_a": ta, "trans_b": tb}, {"a": a, "b": b},
                     lambda a, b, ta=ta, tb=tb: op_t(a, ta) @ op_t(b, tb))
    add_case("matmul_batched_3d", "matmul", {"trans_a": False, "trans_b": False},
             {"a": uniform((2, 3, 4)), "b": uniform((2, 4, 5))},
             lambda a, b: a @ b)
    add_case("matmul_batched_4d_trans_b", "matmul", {"trans_a": False, "trans_b": True},
             {"a": uniform((2, 2, 3, 4)), "b": uniform((2, 2, 5, 4))},
             lambda a, b: a @ b.transpose(-1, -2))


def build_linear():
    for name, xshape in (("linear_2d", (5, 4)), ("linear_3d_input", (2, 3, 4))):
        add_case(name, "linear", {},
                 {"x": uniform(xshape), "weight": uniform((3, 4)), "bias": uniform((3,))},
                 lambda x, weight, bias: F.linear(x, weight, bias))


def build_binary():
    fns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    shapes = (
        ("same_shape", (2, 3, 4), (2, 3, 4)),
        ("broadcast_last_axis", (2, 3, 4), (4,)),
        ("broadcast_middle_axis", (2, 3, 4), (2, 1, 4)),
        ("broadcast_both", (3, 1), (1, 4)),
    )
    for op, fn in fns.items():
        for suffix, sa, sb in shapes:
            b = uniform(sb, 0.5, 1.5) if op == "div" else uniform(sb)
            add_case(f"{op}_{suffix}", op, {}, {"a": uniform(sa), "b": b},
                     lambda a, b, fn=fn: fn(a, b))


def build_scale():
    add_case("scale_3d", "scale", {"factor": 0.125}, {"x": uniform((2, 3, 4))},
             lambda x: 0.125 * x)


def build_reductions():
    specs = {
        "sum": [("axis0", (3, 4), 0, False), ("last_axis_keepdim", (2, 3, 4), -1, True),
                ("middle_axis", (2, 3, 4), 1, False), ("1d_to_scalar", (6,), 0, False)],
        "mean": [("axis0_keepdim", (3, 4), 0, True), ("last_axis", (2, 3, 4), -1, False),
                 ("middle_axis_keepdim", (2, 3, 4), 1, True)],
        "max": [("axis0", (3, 4), 0, False), ("last_axis_keepdim", (2, 3, 4), -1, True),
                ("middle_axis", (2, 3, 4), 1, False)],
    }
    fns = {
        "sum": lambda x, axis, keepdim: x.sum(dim=axis, keepdim=keepdim),
        "mean": lambda x, axis, keepdim: x.mean(dim=axis, keepdim=keepdim),
        "max": lambda x, axis, keepdim: x.max(dim=axis, keepdim=keepdim).values,
    }
    for op, rows in specs.items():
        for suffix, shape, axis, keepdim in rows:
            x = uniform(shape)
            if op == "max":  # no ties, so the argmax (and the gradient) is unique
                srt = x.sort(dim=axis).values
                assert (srt.narrow(axis, 1, srt.shape[axis] - 1) - srt.narrow(axis, 0, srt.shape[axis] - 1)).min() > 1e-3
            add_case(f"{op}_{suffix}", op, {"axis": axis, "keepdim": keepdim}, {"x": x},
                     lambda x, axis=axis, keepdim=keepdim, f=fns[op]: f(x, axis, keepdim))


def build_unary():
    shape = (3, 5)
    add_case("exp_2d", "exp", {}, {"x": uniform(shape, -2.0, 2.0)}, torch.exp)
    add_case("log_positive", "log", {}, {"x": uniform(shape, 0.5, 2.0)}, torch.log)
    add_case("sqrt_positive", "sqrt", {}, {"x": uniform(shape, 0.5, 2.0)}, torch.sqrt)
    add_case("rsqrt_positive", "rsqrt", {}, {"x": uniform(shape, 0.5, 2.0)}, torch.rsqrt)
    add_case("relu_away_from_kink", "relu", {}, {"x": away_from_zero(shape)}, torch.relu)
    add_case("tanh_2d", "tanh", {}, {"x": uniform(shape, -2.0, 2.0)}, torch.tanh)
    add_case("sigmoid_2d", "sigmoid", {}, {"x": uniform(shape, -3.0, 3.0)}, torch.sigmoid)
    for approx in ("none", "tanh"):
        add_case(f"gelu_{approx}", "gelu", {"approximate": approx},
                 {"x": uniform((2, 3, 4), -3.0, 3.0)},
                 lambda x, approx=approx: F.gelu(x, approximate=approx))


def build_softmax():
    key_pad = torch.zeros((2, 1, 1, 4), dtype=torch.float32)
    key_pad[1, 0, 0, 3] = NEG          # batch 1: last key is padding
    query_pad = torch.zeros((2, 1, 3, 1), dtype=torch.float32)
    query_pad[1, 0, 2, 0] = NEG        # batch 1: last query is padding
    causal = torch.zeros((3, 4), dtype=torch.float32)
    for i in range(3):
        for j in range(4):
            if j > i + 1:
                causal[i, j] = NEG
    rows = (
        ("key_axis_key_padding_mask", (2, 2, 3, 4), key_pad, -1),
        ("query_axis_query_padding_mask", (2, 2, 3, 4), query_pad, -2),
        ("key_axis_causal_mask", (2, 2, 3, 4), causal, -1),
        ("2d_axis0_unmasked", (3, 5), torch.zeros((1, 5), dtype=torch.float32), 0),
    )
    fns = {"softmax": torch.softmax, "log_softmax": torch.log_softmax}
    for op, fn in fns.items():
        for suffix, shape, mask, axis in rows:
            add_case(f"{op}_{suffix}", op, {"axis": axis},
                     {"x": uniform(shape, -2.0, 2.0), "mask": mask.clone()},
                     lambda x, mask, axis=axis, fn=fn: fn(x + mask, dim=axis),
                     nograd=("mask",))


def build_logsumexp():
    add_case("logsumexp_last_axis", "logsumexp", {"axis": -1, "keepdim": False},
             {"x": uniform((3, 5), -2.0, 2.0)},
             lambda x: torch.logsumexp(x, dim=-1, keepdim=False))
    add_case("logsumexp_middle_axis_keepdim", "logsumexp", {"axis": 1, "keepdim": True},
             {"x": uniform((2, 3, 4), -2.0, 2.0)},
             lambda x: torch.logsumexp(x, dim=1, keepdim=True))
    # exp(100) overflows float32: only a max-subtracted implementation passes.
    add_case("logsumexp_large_values_needs_max_shift", "logsumexp", {"axis": -1, "keepdim": False},
             {"x": uniform((3, 4), 99.0, 101.0)},
             lambda x: torch.logsumexp(x, dim=-1, keepdim=False))


def build_layer_norm():
    for name, shape in (("layer_norm_2d", (4, 6)), ("layer_norm_3d", (2, 3, 8))):
        d = shape[-1]
        add_case(name, "layer_norm", {"eps": 1e-5},
                 {"x": randn(shape), "weight": uniform((d,), 0.5, 1.5), "bias": uniform((d,))},
                 lambda x, weight, bias, d=d: F.layer_norm(x, (d,), weight, bias, eps=1e-5))


def build_embedding():
    add_case("embedding_repeated_ids", "embedding", {},
             {"weight": uniform((7, 5)), "ids": ids([[1, 3, 3, 6], [0, 1, 5, 3]])},
             lambda weight, ids: F.embedding(ids, weight))


def cross_entropy_by_hand(logits, targets, ignore_index, eps):
    logp = torch.log_softmax(logits, dim=-1)
    keep = targets != ignore_index
    nll = -logp[keep].gather(1, targets[keep].unsqueeze(1)).squeeze(1)
    smooth = -logp[keep].mean(dim=1)
    return ((1 - eps) * nll + eps * smooth).sum() / keep.sum()


def build_cross_entropy():
    rows = (
        ("cross_entropy_ignore_index_label_smoothing", [2, 0, 4, 1, 0, 3], 0, 0.1),
        ("cross_entropy_ignore_index", [2, 0, 4, 1, 0, 3], 0, 0.0),
        ("cross_entropy_no_ignored", [0, 3, 1, 4, 2, 0], -100, 0.0),
        ("cross_entropy_no_ignored_label_smoothing", [4, 3, 1, 0, 2, 1], -100, 0.1),
    )
    for name, targets, ignore, eps in rows:
        logits = uniform((6, 5), -2.0, 2.0)

        def fn(logits, targets, ignore=ignore, eps=eps):
            out = F.cross_entropy(logits, targets, ignore_index=ignore,
                                  label_smoothing=eps, reduction="mean")
            by_hand = cross_entropy_by_hand(logits.detach(), targets, ignore, eps)
            assert abs(out.item() - by_hand.item()) < 1e-12, (name, out.item(), by_hand.item())
            return out

        add_case(name, "cross_entropy", {"ignore_index": ignore, "label_smoothing": eps},
                 {"logits": logits, "targets": ids(targets)}, fn)


def build_shape_ops():
    add_case("transpose_3d_axes_0_2", "transpose", {"axis0": 0, "axis1": 2},
             {"x": uniform((2, 3, 4))}, lambda x: x.transpose(0, 2).contiguous())
    add_case("transpose_4d_last_two_negative", "transpose", {"axis0": -1, "axis1": -2},
             {"x": uniform((2, 2, 3, 4))}, lambda x: x.transpose(-1, -2).contiguous())
    add_case("permute_4d_split_heads", "permute", {"dims": [0, 2, 1, 3]},
             {"x": uniform((2, 3, 2, 4))}, lambda x: x.permute(0, 2, 1, 3).contiguous())
    add_case("reshape_3d_to_2d", "reshape", {"shape": [6, 4]},
             {"x": uniform((2, 3, 4))}, lambda x: x.reshape(6, 4))
    add_case("concat_axis0_two_inputs", "concat", {"axis": 0},
             {"x0": uniform((2, 3)), "x1": uniform((3, 3))},
             lambda x0, x1: torch.cat([x0, x1], dim=0))
    add_case("concat_last_axis_three_inputs", "concat", {"axis": -1},
             {"x0": uniform((2, 3, 2)), "x1": uniform((2, 3, 1)), "x2": uniform((2, 3, 3))},
             lambda x0, x1, x2: torch.cat([x0, x1, x2], dim=-1))
    add_case("slice_axis0", "slice", {"axis": 0, "start": 1, "end": 3},
             {"x": uniform((4, 3))}, lambda x: x.narrow(0, 1, 2).contiguous())
    add_case("slice_middle_axis_3d", "slice", {"axis": 1, "start": 2, "end": 5},
             {"x": uniform((2, 5, 3))}, lambda x: x.narrow(1, 2, 3).contiguous())


# ---------------------------------------------------------------- writing

def dump(value, indent=0):
    """JSON with one key per line, but lists of numbers kept on one line."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f'{pad}  {json.dumps(k)}: {dump(v, indent + 1)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{pad}  {dump(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=False)


def main():
    torch.manual_seed(SEED)
    gen.manual_seed(SEED)
    torch.set_num_threads(2)
    build_matmul()
    build_linear()
    build_binary()
    build_scale()
    build_reductions()
    build_unary()
    build_softmax()
    build_logsumexp()
    build_layer_norm()
    build_embedding()
    build_cross_entropy()
    build_shape_ops()

    doc = {
        "generator": "scripts/make_fixtures.py",
        "torch_version": torch.__version__,
        "cases": cases,
    }
    text = dump(doc) + "\n"
    json.loads(text)  # the writer above must produce valid JSON
    path = os.path.normpath(OUT_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    size = len(text.encode("utf-8"))
    assert size < MAX_BYTES, f"{path} is {size} bytes; keep fixtures under {MAX_BYTES}"
    print(f"wrote {len(cases)} cases, {size} bytes, to {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
