"""PyTorch reference values for the C++ tests: writes tests/fixtures/ops.json, attention.json, models.json,
heads.json, optim.json, layers.json, multiview.json and vit.json, in the formats of tests/fixtures/README.md.

The layers and models are the PyTorch twin's (scripts/twin/model.py), run in float64 on parameters drawn
here; what is written out by hand below checks the twin (against torch.nn.MultiheadAttention and
torch.nn.Transformer*Layer, limits, definitions outside log space, finite differences). The files are
committed; run this again only to add or change a case. Each file draws from its own random stream, so a
change to one leaves the others byte-identical; seeds and threads are fixed.

    apt-get install -y python3-torch libopenblas0-openmp
    /usr/bin/python3 scripts/make_fixtures.py    # a `python3` first on PATH (pyenv's) may have no torch
"""

import copy
import json
import math
import os
import types

import torch
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

from twin import model as twin
from twin.model import BOS_ID, CLS_ID, EOS_ID, FIRST_PIECE_ID, MASK_ID, PAD_ID, SEP_ID
from twin.optim import make_optimizer, no_weight_decay

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
NEG = twin.NEG  # masked entry of an additive mask

OPS = {"matmul", "linear", "add", "sub", "mul", "div", "scale", "sum", "mean", "max", "exp", "log", "sqrt", "rsqrt",
       "relu", "tanh", "sigmoid", "gelu", "softmax", "log_softmax", "logsumexp", "layer_norm", "embedding",
       "cross_entropy", "transpose", "permute", "reshape", "concat", "slice", "head_scores", "head_context"}

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


def jsons(tensors, digits):
    return {k: tensor_json(t, digits) for k, t in tensors.items()}


F32_DIGITS = 9    # round-trips float32 exactly
F64_DIGITS = 12   # far below float32 resolution, and stable against last-bit BLAS noise

cases = []


def add_case(name, op, attrs, inputs, fn, nograd=()):
    """Record one case. inputs: ordered {name: float32 or int32 tensor}; fn(**float64_inputs) -> output, its
    float inputs not in `nograd` differentiable."""
    assert op in OPS, op
    assert all(c["name"] != name for c in cases), f"duplicate case name {name}"
    ref = {k: t.double().requires_grad_(k not in nograd) if t.dtype == torch.float32 else t.long() for k, t in inputs.items()}
    out = fn(**ref)
    grad_out = uniform(out.shape, 0.5, 1.5) if out.dim() == 0 else uniform(out.shape)
    (out * grad_out.double()).sum().backward()
    grads = {k: tensor_json(v.grad, F64_DIGITS) for k, v in ref.items() if v.requires_grad}
    assert grads, f"{name}: no differentiable input"
    cases.append({"name": name, "op": op, "attrs": attrs, "inputs": jsons(inputs, F32_DIGITS),
                  "output": tensor_json(out.detach().contiguous(), F64_DIGITS),
                  "grad_output": tensor_json(grad_out, F32_DIGITS), "grads": grads})


# ---------------------------------------------------------------- the cases
# Draws happen in the order written (left to right within a call): reordering them changes every later value.

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
             {"a": uniform((2, 3, 4)), "b": uniform((2, 4, 5))}, lambda a, b: a @ b)
    add_case("matmul_batched_4d_trans_b", "matmul", {"trans_a": False, "trans_b": True},
             {"a": uniform((2, 2, 3, 4)), "b": uniform((2, 2, 5, 4))}, lambda a, b: a @ b.transpose(-1, -2))


def build_linear():
    for name, xshape in (("linear_2d", (5, 4)), ("linear_3d_input", (2, 3, 4))):
        add_case(name, "linear", {}, {"x": uniform(xshape), "weight": uniform((3, 4)), "bias": uniform((3,))},
                 lambda x, weight, bias: F.linear(x, weight, bias))


def build_binary():
    shapes = (("same_shape", (2, 3, 4), (2, 3, 4)), ("broadcast_last_axis", (2, 3, 4), (4,)),
              ("broadcast_middle_axis", (2, 3, 4), (2, 1, 4)), ("broadcast_both", (3, 1), (1, 4)))
    for op, fn in {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}.items():
        for suffix, sa, sb in shapes:
            b = uniform(sb, 0.5, 1.5) if op == "div" else uniform(sb)
            add_case(f"{op}_{suffix}", op, {}, {"a": uniform(sa), "b": b}, lambda a, b, fn=fn: fn(a, b))
    add_case("scale_3d", "scale", {"factor": 0.125}, {"x": uniform((2, 3, 4))}, lambda x: 0.125 * x)


def build_reductions():
    specs = {
        "sum": [("axis0", (3, 4), 0, False), ("last_axis_keepdim", (2, 3, 4), -1, True),
                ("middle_axis", (2, 3, 4), 1, False), ("1d_to_scalar", (6,), 0, False)],
        "mean": [("axis0_keepdim", (3, 4), 0, True), ("last_axis", (2, 3, 4), -1, False),
                 ("middle_axis_keepdim", (2, 3, 4), 1, True)],
        "max": [("axis0", (3, 4), 0, False), ("last_axis_keepdim", (2, 3, 4), -1, True),
                ("middle_axis", (2, 3, 4), 1, False)],
    }
    fns = {"sum": lambda x, axis, keepdim: x.sum(dim=axis, keepdim=keepdim),
           "mean": lambda x, axis, keepdim: x.mean(dim=axis, keepdim=keepdim),
           "max": lambda x, axis, keepdim: x.max(dim=axis, keepdim=keepdim).values}
    for op, rows in specs.items():
        for suffix, shape, axis, keepdim in rows:
            x = uniform(shape)
            if op == "max":  # no ties, so the argmax (and the gradient) is unique
                srt = x.sort(dim=axis).values
                assert (srt.narrow(axis, 1, srt.shape[axis] - 1) - srt.narrow(axis, 0, srt.shape[axis] - 1)).min() > 1e-3
            add_case(f"{op}_{suffix}", op, {"axis": axis, "keepdim": keepdim}, {"x": x},
                     lambda x, axis=axis, keepdim=keepdim, f=fns[op]: f(x, axis, keepdim))


def build_unary():
    for name, bounds in (("exp_2d", (-2.0, 2.0)), ("log_positive", (0.5, 2.0)), ("sqrt_positive", (0.5, 2.0)),
                         ("rsqrt_positive", (0.5, 2.0)), ("relu_away_from_kink", None), ("tanh_2d", (-2.0, 2.0)),
                         ("sigmoid_2d", (-3.0, 3.0))):
        op = name.split("_")[0]
        x = away_from_zero((3, 5)) if bounds is None else uniform((3, 5), *bounds)
        add_case(name, op, {}, {"x": x}, getattr(torch, op))
    for approx in ("none", "tanh"):
        add_case(f"gelu_{approx}", "gelu", {"approximate": approx}, {"x": uniform((2, 3, 4), -3.0, 3.0)},
                 lambda x, approx=approx: F.gelu(x, approximate=approx))


def build_softmax():
    key_pad = torch.zeros((2, 1, 1, 4), dtype=torch.float32)
    key_pad[1, 0, 0, 3] = NEG          # batch 1: last key is padding
    query_pad = torch.zeros((2, 1, 3, 1), dtype=torch.float32)
    query_pad[1, 0, 2, 0] = NEG        # batch 1: last query is padding
    causal = torch.full((3, 4), NEG, dtype=torch.float32).triu(2)  # NEG where key j > query i + 1
    rows = (("key_axis_key_padding_mask", (2, 2, 3, 4), key_pad, -1),
            ("query_axis_query_padding_mask", (2, 2, 3, 4), query_pad, -2),
            ("key_axis_causal_mask", (2, 2, 3, 4), causal, -1),
            ("2d_axis0_unmasked", (3, 5), torch.zeros((1, 5), dtype=torch.float32), 0))
    for op, fn in {"softmax": torch.softmax, "log_softmax": torch.log_softmax}.items():
        for suffix, shape, mask, axis in rows:
            add_case(f"{op}_{suffix}", op, {"axis": axis}, {"x": uniform(shape, -2.0, 2.0), "mask": mask.clone()},
                     lambda x, mask, axis=axis, fn=fn: fn(x + mask, dim=axis), nograd=("mask",))
    # The last: exp(100) overflows float32, so only a max-subtracted implementation passes.
    for name, shape, axis, keepdim, lo, hi in (("last_axis", (3, 5), -1, False, -2.0, 2.0),
                                               ("middle_axis_keepdim", (2, 3, 4), 1, True, -2.0, 2.0),
                                               ("large_values_needs_max_shift", (3, 4), -1, False, 99.0, 101.0)):
        add_case(f"logsumexp_{name}", "logsumexp", {"axis": axis, "keepdim": keepdim}, {"x": uniform(shape, lo, hi)},
                 lambda x, axis=axis, keepdim=keepdim: torch.logsumexp(x, dim=axis, keepdim=keepdim))


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
    for name, targets, ignore, eps in (("ignore_index_label_smoothing", [2, 0, 4, 1, 0, 3], 0, 0.1),
                                       ("ignore_index", [2, 0, 4, 1, 0, 3], 0, 0.0),
                                       ("no_ignored", [0, 3, 1, 4, 2, 0], -100, 0.0),
                                       ("no_ignored_label_smoothing", [4, 3, 1, 0, 2, 1], -100, 0.1)):
        def fn(logits, targets, ignore=ignore, eps=eps):
            out = F.cross_entropy(logits, targets, ignore_index=ignore, label_smoothing=eps, reduction="mean")
            by_hand = cross_entropy_by_hand(logits.detach(), targets, ignore, eps)
            assert abs(out.item() - by_hand.item()) < 1e-12, (name, out.item(), by_hand.item())
            return out

        add_case(f"cross_entropy_{name}", "cross_entropy", {"ignore_index": ignore, "label_smoothing": eps},
                 {"logits": uniform((6, 5), -2.0, 2.0), "targets": ids(targets)}, fn)


def build_shape_ops():
    add_case("transpose_3d_axes_0_2", "transpose", {"axis0": 0, "axis1": 2},
             {"x": uniform((2, 3, 4))}, lambda x: x.transpose(0, 2).contiguous())
    add_case("transpose_4d_last_two_negative", "transpose", {"axis0": -1, "axis1": -2},
             {"x": uniform((2, 2, 3, 4))}, lambda x: x.transpose(-1, -2).contiguous())
    add_case("permute_4d_split_heads", "permute", {"dims": [0, 2, 1, 3]},
             {"x": uniform((2, 3, 2, 4))}, lambda x: x.permute(0, 2, 1, 3).contiguous())
    add_case("reshape_3d_to_2d", "reshape", {"shape": [6, 4]}, {"x": uniform((2, 3, 4))}, lambda x: x.reshape(6, 4))
    add_case("concat_axis0_two_inputs", "concat", {"axis": 0}, {"x0": uniform((2, 3)), "x1": uniform((3, 3))},
             lambda x0, x1: torch.cat([x0, x1], dim=0))
    add_case("concat_last_axis_three_inputs", "concat", {"axis": -1},
             {"x0": uniform((2, 3, 2)), "x1": uniform((2, 3, 1)), "x2": uniform((2, 3, 3))},
             lambda x0, x1, x2: torch.cat([x0, x1, x2], dim=-1))
    add_case("slice_axis0", "slice", {"axis": 0, "start": 1, "end": 3},
             {"x": uniform((4, 3))}, lambda x: x.narrow(0, 1, 2).contiguous())
    add_case("slice_middle_axis_3d", "slice", {"axis": 1, "start": 2, "end": 5},
             {"x": uniform((2, 5, 3))}, lambda x: x.narrow(1, 2, 3).contiguous())


def build_head_products():
    """ops::head_scores and ops::head_context: per-head products of (B, T, H*K) projections."""
    add_case("head_scores_3_heads_alpha", "head_scores", {"heads": 3, "alpha": 0.5},
             {"q": uniform((2, 3, 6)), "k": uniform((2, 4, 6))},
             lambda q, k: 0.5 * twin.split_heads(q, 3) @ twin.split_heads(k, 3).transpose(-1, -2))
    add_case("head_context_3_heads", "head_context", {}, {"weights": uniform((2, 3, 3, 4)), "v": uniform((2, 4, 6))},
             lambda weights, v: twin.merge_heads(weights @ twin.split_heads(v, 3)))
    # Grouped queries: two rows of q (or of the weights) a row of k (or v), beam search's beams of a source.
    add_case("head_scores_grouped", "head_scores", {"heads": 3, "alpha": 0.5},
             {"q": uniform((4, 1, 6)), "k": uniform((2, 4, 6))},
             lambda q, k: 0.5 * twin.split_heads(q, 3) @ twin.split_heads(k, 3).repeat_interleave(2, 0).transpose(-1, -2))
    add_case("head_context_grouped", "head_context", {}, {"weights": uniform((4, 3, 1, 4)), "v": uniform((2, 4, 6))},
             lambda weights, v: twin.merge_heads(weights @ twin.split_heads(v, 3).repeat_interleave(2, 0)))


# ---------------------------------------------------------------- attention layer
# Whole multi-head attention layers (twin.Attention), one per (normalization kind, setting); the checks
# hold each kind to its definition, its limits and, for lnas, torch.nn.MultiheadAttention.

ATTENTION_KINDS = ("lnas", "dnas", "hnas", "sinkhorn", "dnas_causal", "nap", "non")
PROBABILITY_KINDS = ("lnas", "dnas", "hnas", "sinkhorn", "dnas_causal")  # rows sum to 1
PARAMETER_NAMES = tuple(f"{p}_proj.{t}" for p in ("q", "k", "v", "out") for t in ("weight", "bias"))
WIDTH, HEADS, BATCH = 8, 2, 2
SINKHORN_ITERATIONS, NAP_EPS = 3, 1e-5
PAPER002_NAP = {"eps": 1e-3, "denominator": "std_plus_eps", "score_scale": "none"}
HYBRID_THETA = [-1.2, 0.4]
NAP_GAIN, NAP_BIAS = [1.3, 0.8], [0.1, -0.2]
PRIOR_BUCKETS, PRIOR_MAX_DISTANCE = 8, 16
OT_ALPHA = 0.7  # paper 003 Eq. 25's alpha, away from its default 1 so that it is exercised
PRIOR_ALPHA = 1.6  # paper 003 Eq. 18's alpha in the context-prior cases
CONTEXT_HIDDEN = 6
attention_cases = []
score_scale = []  # scores at allowed entries of every case, to report their spread


def t5_bucket_float32(rel, bidirectional, num_buckets, max_distance):
    """T5's own code (float32 tensors), only to cross-check relative_position_bucket."""
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(rel < max_exact, rel, large)


PRIOR = {"num_buckets": PRIOR_BUCKETS, "max_distance": PRIOR_MAX_DISTANCE}


def bucket_matrix(lq, lk, bidirectional):
    return twin.bucket_matrix(lq, lk, dict(PRIOR, bidirectional=bidirectional))


def check_buckets():
    rel = torch.arange(-40, 41, dtype=torch.long)
    for bidirectional in (True, False):
        ours = [twin.relative_position_bucket(r, bidirectional, PRIOR_BUCKETS, PRIOR_MAX_DISTANCE) for r in rel.tolist()]
        t5 = t5_bucket_float32(rel, bidirectional, PRIOR_BUCKETS, PRIOR_MAX_DISTANCE).tolist()
        assert ours == t5, (bidirectional, ours, t5)
    # the fixture sizes hit the log branch. Bidirectional bucket 4 (rel > 0 with n = 0) cannot
    # occur. Causal n = 8 lands exactly on a truncation boundary (log(2)/log(4)*4 == 2 -> 6).
    assert set(bucket_matrix(10, 10, True).reshape(-1).tolist()) == {0, 1, 2, 3, 5, 6, 7}
    assert set(bucket_matrix(10, 10, False).reshape(-1).tolist()) == set(range(7))
    assert twin.relative_position_bucket(-8, False, PRIOR_BUCKETS, PRIOR_MAX_DISTANCE) == 6


def normalize(kind, s, allowed):
    """kind's weights on scores s with the cases' hybrid theta, NAP gain and bias, iterations and eps."""
    norm = types.SimpleNamespace(hybrid_theta=torch.tensor(HYBRID_THETA, dtype=torch.float64),
                                 gain=torch.tensor(NAP_GAIN, dtype=torch.float64),
                                 bias=torch.tensor(NAP_BIAS, dtype=torch.float64))
    return twin.normalize(kind, s, allowed, norm, SINKHORN_ITERATIONS, NAP_EPS)


def double_leaves(tensors):
    """float64 copies of float32 tensors that collect their gradients."""
    return {k: t.double().requires_grad_(True) for k, t in tensors.items()}


def parameter_shapes(module, prefix=""):
    """{name: shape} of a twin module's parameters in hnas's order (src/models/), the order the fixtures
    draw them in: a torch module lists its own parameters before its children's, so the seq2seq model's
    decoder position table and the MLM head's output bias move to where hnas has them."""
    shapes = {n: tuple(p.shape) for n, p in module.named_parameters()}
    names = list(shapes)
    for name, after in (("decoder.positions.weight", "encoder.positions.weight"), ("mlm_head.bias", "mlm_head.norm.bias")):
        if name in names:
            names.remove(name)
            names.insert(names.index(after) + 1, name)
    return {prefix + n: shapes[n] for n in names}


def check_normalizations(name, kind, s, allowed, key_valid, query_valid):
    """Self-checks of the normalizations on one case's scores (float64, no grad)."""
    s = s.detach()
    results = {k: normalize(k, s, allowed) for k in ATTENTION_KINDS}
    row_has_key = allowed.any(dim=-1)                                   # (B, H, Lq)
    valid_rows = row_has_key & (query_valid.reshape(BATCH, 1, -1) == 1)
    assert valid_rows.any(), name
    for k, a in results.items():
        assert not torch.isnan(a).any(), (name, k)
        assert (a[~allowed] == 0).all(), (name, k, "nonzero weight at a non-allowed entry")
        if k in PROBABILITY_KINDS:
            sums = a.sum(dim=-1)
            assert (sums[valid_rows] - 1).abs().max() < 1e-12, (name, k, "rows must sum to 1")
            assert (sums[~row_has_key] == 0).all(), (name, k)
            assert (a >= 0).all(), (name, k)
    # dnas: every real key keeps at least 1/(number of real keys) of the total attention
    col_has_query = allowed.any(dim=-2)                                 # (B, H, Lk)
    real_keys = key_valid.reshape(BATCH, 1, -1).sum(dim=-1, keepdim=True).expand_as(col_has_query)
    col_sums = results["dnas"].sum(dim=-2)
    assert (col_sums[col_has_query] >= 1 / real_keys[col_has_query] - 1e-12).all(), (name, "dnas column floor")
    # dnas and dnas_causal by their definitions, outside log space: exp over its sum (dnas) or its prefix sums
    # (dnas_causal) down the query axis, then over the keys
    e = twin.zero_outside(torch.exp(s), allowed)
    for k, over_queries in (("dnas", e.sum(dim=-2, keepdim=True)), ("dnas_causal", e.cumsum(dim=-2))):
        bq = twin.zero_outside(e / over_queries.clamp(min=1e-300), allowed)
        direct = bq / bq.sum(dim=-1, keepdim=True).clamp(min=1e-300)
        assert (direct - results[k]).abs().max() < 1e-13, (name, k, "log space vs direct")
    # hnas at theta -> +-inf is dnas / lnas; sinkhorn with one iteration is dnas
    for t, limit in ((40.0, "dnas"), (-40.0, "lnas")):
        h = twin.hnas(s, allowed, torch.full((HEADS,), t, dtype=torch.float64))
        assert (h - results[limit]).abs().max() < 1e-15, (name, "hnas limit", limit)
    assert (twin.sinkhorn(s, allowed, 1) - results["dnas"]).abs().max() < 1e-14, (name, "sinkhorn k=1")
    # sinkhorn: the last step normalizes keys, so columns are only approximately 1 in full batches
    # nap: per valid row, weights have mean b_h and (biased) variance g_h^2 var/(var + eps)
    a = results["nap"]
    n = allowed.to(s.dtype).sum(dim=-1)
    mean = a.sum(dim=-1) / n.clamp(min=1)
    bias = torch.tensor(NAP_BIAS, dtype=torch.float64).reshape(1, -1, 1).expand_as(mean)
    assert (mean[valid_rows] - bias[valid_rows]).abs().max() < 1e-12, (name, "nap mean")
    # gradients of the normalizations with respect to the scores: the case's own kind in full,
    # the other kinds (on the same masks) with gradcheck's faster random projection
    for k in ATTENTION_KINDS:
        assert torch.autograd.gradcheck(lambda scores, k=k: normalize(k, scores, allowed), (s.clone().requires_grad_(True),),
                                        eps=1e-6, atol=1e-7, rtol=1e-5, fast_mode=k != kind), (name, k)


def check_ot(name, a, allowed, query_valid):
    """OT attention's weights: each real query's row sums to 1 (sum_j u_j = 1), and Eq. 25 at the
    group limit: with templates in two groups (similarity 0 within, -1e4 across) and equal scores,
    each template of an input's group gets u_j / |group|."""
    rows = (query_valid.reshape(BATCH, 1, -1) == 1).expand(BATCH, HEADS, -1)
    assert (a.detach().sum(dim=-1)[rows] - 1).abs().max() < 1e-12, (name, "ot rows must sum to 1")
    group = torch.tensor([0, 1, 0, 0])
    similarity = torch.where(group.reshape(-1, 1) == group[:2].reshape(1, -1), 0.0, -1e4).double()
    u = torch.tensor([0.6, 0.4], dtype=torch.float64)
    weights = twin.ot(torch.full((1, 1, 1, 4), 0.7, dtype=torch.float64), torch.ones((1, 1, 1, 4), dtype=torch.bool),
                                 similarity.reshape(1, 1, 4, 2), u.log().reshape(1, 1, 1, 2))
    assert (weights.reshape(-1) - torch.tensor([0.2, 0.4, 0.2, 0.2], dtype=torch.float64)).abs().max() < 1e-12, name


def load_mha(mha, p, prefix=""):
    """torch.nn.MultiheadAttention given the weights of one of our attention layers (p[prefix + "q_proj.weight"] ...)."""
    with torch.no_grad():
        for t in ("weight", "bias"):
            getattr(mha, f"in_proj_{t}").copy_(torch.cat([p[f"{prefix}{c}_proj.{t}"] for c in "qkv"]))
            getattr(mha.out_proj, t).copy_(p[f"{prefix}out_proj.{t}"])


def check_against_torch_mha(name, x, memory, params, allowed, attrs, out, a, query_valid):
    """lnas is standard attention: compare with torch.nn.MultiheadAttention on valid query rows."""
    mha = torch.nn.MultiheadAttention(WIDTH, HEADS, batch_first=True, dtype=torch.float64)
    load_mha(mha, params)
    with torch.no_grad():
        lq, lk = allowed.shape[-2:]
        mask = torch.zeros((BATCH, HEADS, lq, lk), dtype=torch.float64)
        prior = attrs.get("prior")
        if prior is not None:
            buckets = bucket_matrix(lq, lk, prior["bidirectional"]).long()
            mask = mask + params["relative_bias.weight"][buckets].permute(2, 0, 1).unsqueeze(0)
        mask = torch.where(allowed, mask, torch.full_like(mask, NEG))
        ref_out, ref_a = mha(x, memory, memory, attn_mask=mask.reshape(BATCH * HEADS, lq, lk),
                             need_weights=True, average_attn_weights=False)
    rows = query_valid == 1
    assert (ref_out[rows] - out[rows]).abs().max() < 1e-12, (name, "lnas vs nn.MultiheadAttention")
    rows = rows.reshape(BATCH, 1, -1).expand(BATCH, HEADS, -1)
    assert (ref_a[rows] - a[rows]).abs().max() < 1e-12, (name, "lnas weights vs nn.MultiheadAttention")


def add_attention_case(kind, setting, lq, lk, self_attention, causal, key_valid, query_valid, prior=None,
                       paper002_nap=False, context_prior=False):
    """Record one attention layer case. key_valid (B, Lk) and query_valid (B, Lq) are 0/1 lists.
    paper002_nap: NAP as paper 002's code computes it (sigma + eps with eps 1e-3, unscaled scores)."""
    name = f"{kind}_{setting}"
    assert kind in ATTENTION_KINDS + ("ot",), kind
    assert all(c["name"] != name for c in attention_cases), f"duplicate case name {name}"
    assert not causal or (self_attention and lq == lk)
    assert not self_attention or (lq == lk and key_valid == query_valid)
    attrs = {"sinkhorn": {"iterations": SINKHORN_ITERATIONS}, "nap": {"eps": NAP_EPS}, "ot": {"alpha": OT_ALPHA}}.get(kind, {})
    if context_prior:
        assert not causal
        attrs.update({"context_prior": {"hidden": CONTEXT_HIDDEN}, "alpha": PRIOR_ALPHA})
    if paper002_nap:
        assert kind == "nap"
        attrs.update(PAPER002_NAP)
    if prior is not None:
        attrs["prior"] = dict(PRIOR, bidirectional=prior == "bidirectional")
        assert prior == ("causal" if causal else "bidirectional")

    inputs = {"x": uniform((BATCH, lq, WIDTH), -2.0, 2.0)}  # U(-2, 2): scores come out O(1)
    if not self_attention:
        inputs["memory"] = uniform((BATCH, lk, WIDTH), -2.0, 2.0)
    inputs["key_valid"] = torch.tensor(key_valid, dtype=torch.float32)
    inputs["query_valid"] = torch.tensor(query_valid, dtype=torch.float32)
    params = {p: uniform((WIDTH, WIDTH), -0.5, 0.5) if p.endswith("weight") else uniform((WIDTH,), -0.1, 0.1)
              for p in PARAMETER_NAMES}
    norm = {"hnas": {"hybrid_theta": HYBRID_THETA}, "nap": {"gain": NAP_GAIN, "bias": NAP_BIAS}}.get(kind, {})
    params.update({f"norm.{n}": torch.tensor(v, dtype=torch.float32) for n, v in norm.items()})
    if prior is not None:
        params["relative_bias.weight"] = uniform((PRIOR_BUCKETS, HEADS), -1.0, 1.0)
    if context_prior:
        for n, shape, bound in (("key_proj.weight", (CONTEXT_HIDDEN, WIDTH), 0.5), ("key_proj.bias", (CONTEXT_HIDDEN,), 0.1),
                                ("context_proj.weight", (CONTEXT_HIDDEN, WIDTH), 0.5), ("head_weights", (HEADS, CONTEXT_HIDDEN), 1.0)):
            params[f"context_prior.{n}"] = uniform(shape, -bound, bound)
    grad_out = uniform((BATCH, lq, WIDTH))

    x = inputs["x"].double().requires_grad_(True)
    memory = x if self_attention else inputs["memory"].double().requires_grad_(True)
    ref = double_leaves(params)
    key_valid_t, query_valid_t = inputs["key_valid"].double(), inputs["query_valid"].double()
    masks = twin.Masks(key_valid_t, query_valid_t, HEADS, causal)
    allowed = masks.allowed
    out, a, s = functional_call(twin.Attention(WIDTH, HEADS, kind, **attrs), ref, (x, memory, masks))
    (out * grad_out.double()).sum().backward()

    if kind == "ot":
        check_ot(name, a, allowed, query_valid_t)
    else:
        check_normalizations(name, kind, s, allowed, key_valid_t, query_valid_t)
    assert (a[~allowed] == 0).all() and not torch.isnan(out).any()
    if kind == "lnas" and not context_prior:
        check_against_torch_mha(name, x.detach(), memory.detach(), {k: v.detach() for k, v in ref.items()},
                                allowed, attrs, out.detach(), a.detach(), query_valid_t)
    score_scale.append(s.detach()[allowed])

    leaves = dict({"x": x} if self_attention else {"x": x, "memory": memory}, **ref)
    attention_cases.append({
        "name": name, "kind": kind, "attrs": attrs, "self_attention": self_attention, "causal": causal,
        "width": WIDTH, "heads": HEADS, "inputs": jsons(inputs, F32_DIGITS), "parameters": jsons(params, F32_DIGITS),
        "weights": tensor_json(a.detach().contiguous(), F64_DIGITS),
        **({} if prior is None else {"buckets": tensor_json(bucket_matrix(lq, lk, prior == "bidirectional"), 0)}),
        "output": tensor_json(out.detach().contiguous(), F64_DIGITS), "grad_output": tensor_json(grad_out, F32_DIGITS),
        "grads": {k: tensor_json(v.grad, F64_DIGITS) for k, v in leaves.items()}})


def build_attention():
    check_buckets()
    pad3_of_5, q3 = [[1] * 5, [1, 1, 1, 0, 0]], [[1, 1, 1], [1, 1, 0]]
    for kind in ATTENTION_KINDS:
        add_attention_case(kind, "self_padded", 5, 5, True, False, pad3_of_5, pad3_of_5)
        add_attention_case(kind, "cross_padded", 3, 5, False, False, pad3_of_5, q3)
    for kind in ("lnas", "dnas_causal", "nap"):
        add_attention_case(kind, "causal", 5, 5, True, True, [[1] * 5, [1, 1, 1, 1, 0]], [[1] * 5, [1, 1, 1, 1, 0]])
    pad3 = [[1] * 10, [1] * 7 + [0] * 3]
    add_attention_case("lnas", "self_prior", 10, 10, True, False, pad3, pad3, prior="bidirectional")
    add_attention_case("hnas", "self_prior", 10, 10, True, False, pad3, pad3, prior="bidirectional")
    pad2 = [[1] * 10, [1] * 8 + [0] * 2]
    add_attention_case("dnas_causal", "causal_prior", 10, 10, True, True, pad2, pad2, prior="causal")
    add_attention_case("lnas", "cross_prior", 6, 10, False, False, pad3, [[1] * 6, [1] * 5 + [0]], prior="bidirectional")
    # NAP as paper 002's code computes it; no causal case: sigma is not differentiable at a one-key row
    add_attention_case("nap", "paper002_self_padded", 5, 5, True, False, pad3_of_5, pad3_of_5, paper002_nap=True)
    # Appended last, so that the cases above keep their draws: paper 003's OT attention, then its alpha and
    # context preference (section 7) with and without the relative prior.
    add_attention_case("ot", "self_padded", 5, 5, True, False, pad3_of_5, pad3_of_5)
    add_attention_case("ot", "cross_padded", 3, 5, False, False, pad3_of_5, q3)
    add_attention_case("ot", "self_prior", 10, 10, True, False, pad3, pad3, prior="bidirectional")
    add_attention_case("lnas", "self_context_prior", 5, 5, True, False, pad3_of_5, pad3_of_5, context_prior=True)
    add_attention_case("hnas", "cross_context_prior", 3, 5, False, False, pad3_of_5, q3, context_prior=True)
    add_attention_case("ot", "self_context_prior", 10, 10, True, False, pad3, pad3, prior="bidirectional",
                       context_prior=True)
    s = torch.cat(score_scale)
    print(f"attention scores at allowed entries: std {s.std().item():.3f}, max |s| {s.abs().max().item():.3f}")


# ---------------------------------------------------------------- paper 002's blocks and mixers
# One encoder layer (src/nn/transformer_layer.h) per (block, mixer, kind) that paper 002 compares. The
# gradient flowing in is 0 at padded positions, as every loss leaves them out.

LAYER_WIDTH, LAYER_HEADS, LAYER_HIDDEN, LAYER_LENGTH = 8, 2, 12, 5
LAYER_KEY_VALID = [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
layer_cases = []


def block_parameter(name, shape):
    if name.endswith("norm.gain"):
        return uniform(shape, 0.5, 1.5)
    if name.endswith("norm.bias") and name.startswith("self_attn.norm"):
        return uniform(shape, -0.3, 0.3)
    if "norm" in name:
        return uniform(shape, 0.5, 1.5) if name.endswith("weight") else uniform(shape, -0.2, 0.2)
    return uniform(shape, -0.5, 0.5) if name.endswith("weight") else uniform(shape, -0.1, 0.1)


def add_layer_case(norm, mixer, kind, paper002_nap=False):
    name = f"{norm}_{mixer}" + (f"_{kind}" if mixer == "attention" else "") + ("_paper002" if paper002_nap else "")
    attrs = dict(PAPER002_NAP) if paper002_nap else ({"eps": NAP_EPS} if kind == "nap" else {})
    x_value = uniform((BATCH, LAYER_LENGTH, LAYER_WIDTH), -2.0, 2.0)
    key_valid = torch.tensor(LAYER_KEY_VALID, dtype=torch.float32)
    layer = twin.Layer(LAYER_WIDTH, LAYER_HEADS, LAYER_HIDDEN, kind, norm, mixer, attention=attrs, eps=LN_EPS)
    params = {n: block_parameter(n, shape) for n, shape in parameter_shapes(layer).items()}
    grad_out = uniform((BATCH, LAYER_LENGTH, LAYER_WIDTH)) * key_valid.unsqueeze(-1)

    x = x_value.double().requires_grad_(True)
    ref = double_leaves(params)
    out = functional_call(layer, ref, (x, twin.Masks(key_valid.double(), key_valid.double(), LAYER_HEADS)))
    (out * grad_out.double()).sum().backward()
    assert not torch.isnan(out).any(), name
    layer_cases.append({
        "name": name, "norm": norm, "mixer": mixer, "kind": kind, "attrs": attrs,
        "width": LAYER_WIDTH, "heads": LAYER_HEADS, "hidden": LAYER_HIDDEN, "layer_norm_eps": LN_EPS,
        "inputs": {"x": tensor_json(x_value, F32_DIGITS), "key_valid": tensor_json(key_valid, F32_DIGITS)},
        "parameters": jsons(params, F32_DIGITS), "output": tensor_json(out.detach().contiguous(), F64_DIGITS),
        "grad_output": tensor_json(grad_out, F32_DIGITS),
        "grads": {k: tensor_json(v.grad, F64_DIGITS) for k, v in dict(x=x, **ref).items()}})


def build_layers():
    for norm in ("post", "mte"):
        for mixer, kind in (("attention", "lnas"), ("attention", "nap"), ("attention", "non"), ("sum", "lnas"), ("max", "lnas")):
            add_layer_case(norm, mixer, kind)
    add_layer_case("mte", "attention", "nap", paper002_nap=True)


# ---------------------------------------------------------------- whole models
# The twin's tiny seq2seq and BERT models, ids to loss, checked against torch.nn.Transformer*Layer.

# d 16 keeps the file near 1.2 MB; d 32 with ffn 64 would write 4.3 MB (parameters and grads grow as d^2)
MODEL_VOCAB, MODEL_WIDTH, MODEL_HEADS, MODEL_FFN, MODEL_LAYERS, MODEL_POSITIONS = 50, 16, 4, 32, 2, 16
LN_EPS = 1e-5
HYBRID_INIT = 0.3
SEQ2SEQ_LABEL_SMOOTHING = 0.1
POOLER = ["pooler.dense.weight", "pooler.dense.bias"]
MASKED = {2: "mask", 6: "mask", 7: "random", 15: "keep", 21: "mask"}  # BERT's replacements at flat positions
MODEL_SHAPES = twin.Shapes(MODEL_WIDTH, MODEL_HEADS, MODEL_FFN, MODEL_LAYERS, MODEL_VOCAB, MODEL_POSITIONS, ln_eps=LN_EPS)
model_cases = []


def draw_parameter(name, shape):
    """float32: every matrix U(-b, b) with b = 0.3 sqrt(32 / columns), about sqrt(3 / columns):
    projections give unit-variance outputs from unit-variance inputs, and so do the tied output
    projections and the seq2seq token embeddings times sqrt(D). Layer norm gains U(0.8, 1.2), biases
    U(-0.1, 0.1), hybrid theta = logit(hybrid_init) + U(-0.4, 0.4) per head."""
    if name.endswith("hybrid_theta"):
        return uniform(shape, -0.4, 0.4) + math.log(HYBRID_INIT / (1 - HYBRID_INIT))
    if "norm." in name and name.endswith("weight"):  # every LayerNorm is named *norm
        return uniform(shape, 0.8, 1.2)
    if len(shape) == 1:
        return uniform(shape, -0.1, 0.1)
    bound = 0.3 * math.sqrt(32 / shape[1])
    return uniform(shape, -bound, bound)


class TorchLayer(torch.nn.Module):
    """torch.nn.Transformer{Encoder,Decoder}Layer (post-LN, GELU, no dropout) with our layer's weights, called
    as the twin calls its layers; torch's take key padding masks only, so padded query rows differ."""

    def __init__(self, p, prefix, decoder):
        super().__init__()
        cls = torch.nn.TransformerDecoderLayer if decoder else torch.nn.TransformerEncoderLayer
        self.layer = layer = cls(MODEL_WIDTH, MODEL_HEADS, MODEL_FFN, dropout=0.0, activation="gelu",
                                 layer_norm_eps=LN_EPS, batch_first=True, norm_first=False, dtype=torch.float64)
        load_mha(layer.self_attn, p, f"{prefix}.self_attn.")
        ours = {"self_attn_norm": layer.norm1, "ffn.fc1": layer.linear1, "ffn.fc2": layer.linear2, "ffn_norm": layer.norm2}
        if decoder:
            load_mha(layer.multihead_attn, p, f"{prefix}.cross_attn.")
            ours.update({"cross_attn_norm": layer.norm2, "ffn_norm": layer.norm3})
        for name, theirs in ours.items():
            theirs.load_state_dict({t: p[f"{prefix}.{name}.{t}"] for t in ("weight", "bias")})

    def forward(self, x, masks, memory=None, memory_masks=None):
        if memory is None:
            return self.layer(x, src_key_padding_mask=masks.key_valid == 0)
        causal = torch.ones((x.shape[1], x.shape[1]), dtype=torch.bool).triu(1)
        return self.layer(x, memory, tgt_mask=causal, tgt_key_padding_mask=masks.key_valid == 0,
                          memory_key_padding_mask=memory_masks.key_valid == 0)


def check_against_torch_transformer(name, model, p, x, logits):
    """lnas models are standard Transformers: the twin with torch's layers in place of its own must give
    the same logits at every row the loss reads."""
    p = {k: v.detach() for k, v in p.items()}
    model = copy.deepcopy(model).double()
    twin.load_parameters(model, p, name)
    for stack in ("encoder", "decoder") if isinstance(model, twin.Seq2Seq) else ("encoder",):
        layers = getattr(model, stack).layers
        for i in range(len(layers)):
            layers[i] = TorchLayer(p, f"{stack}.layers.{i}", stack == "decoder")
    with torch.no_grad():
        ref = model(x)[0]
    if isinstance(model, twin.Seq2Seq):
        rows = x["target_output"].reshape(-1) != PAD_ID
        assert torch.equal(rows, x["target_valid"].reshape(-1) == 1), name
    else:
        rows = torch.ones(ref.shape[0], dtype=torch.bool)
    assert (ref[rows] - logits[rows]).abs().max() < 1e-12, (name, "vs torch.nn.Transformer*Layer")


def seq2seq_inputs(source_lengths, target_lengths):
    """Ordinary pieces for the words; target_input = bos y_1 .. y_n, target_output = y_1 .. y_n eos."""
    s, t = max(source_lengths), max(target_lengths)
    source_ids, target_input, target_output = [], [], []
    for ls, lt in zip(source_lengths, target_lengths):
        words = torch.randint(FIRST_PIECE_ID, MODEL_VOCAB, (ls,), generator=gen).tolist()
        source_ids.append(words + [PAD_ID] * (s - ls))
        y = torch.randint(FIRST_PIECE_ID, MODEL_VOCAB, (lt - 1,), generator=gen).tolist()
        target_input.append([BOS_ID] + y + [PAD_ID] * (t - lt))
        target_output.append(y + [EOS_ID] + [PAD_ID] * (t - lt))
    return {"source_ids": ids(source_ids), "source_valid": torch.tensor([[1.0] * n + [0.0] * (s - n) for n in source_lengths]),
            "target_input": ids(target_input), "target_output": ids(target_output),
            "target_valid": torch.tensor([[1.0] * n + [0.0] * (t - n) for n in target_lengths])}


def bert_inputs(segment_lengths, length, masked):
    """[CLS] A [SEP] B [SEP] rows; segment_lengths = (len A, len B) per row; masked = {flat position:
    "mask" | "random" | "keep"} (BERT's 80/10/10 replacements)."""
    rows, segments = [], []
    for la, lb in segment_lengths:
        a = torch.randint(FIRST_PIECE_ID, MODEL_VOCAB, (la,), generator=gen).tolist()
        b = torch.randint(FIRST_PIECE_ID, MODEL_VOCAB, (lb,), generator=gen).tolist()
        row = [CLS_ID] + a + [SEP_ID] + b + [SEP_ID]
        seg = [0] * (la + 2) + [1] * (lb + 1)
        rows.append(row + [PAD_ID] * (length - len(row)))
        segments.append(seg + [0] * (length - len(seg)))
    flat = [v for row in rows for v in row]
    positions = sorted(masked)
    labels = [flat[i] for i in positions]
    assert all(label >= FIRST_PIECE_ID for label in labels), "masked tokens must be ordinary pieces"
    for i in positions:
        if masked[i] == "mask":
            flat[i] = MASK_ID
        elif masked[i] == "random":
            flat[i] = (flat[i] - FIRST_PIECE_ID + 11) % (MODEL_VOCAB - FIRST_PIECE_ID) + FIRST_PIECE_ID
    return {"input_ids": ids(flat).reshape(len(rows), length), "segment_ids": ids(segments),
            "valid": torch.tensor([[1.0 if v != PAD_ID else 0.0 for v in row] for row in rows]),
            "masked_positions": ids(positions), "masked_labels": ids(labels)}


def model_config(architecture, kinds, shared=False):
    """kinds: {stack: kind}, encoder first, then a seq2seq model's decoder and cross; shared: the seq2seq
    model's decoder layers on its encoder layers' weights."""
    positions = {"max_positions": MODEL_POSITIONS} if architecture != "seq2seq" else {
        "decoder_layers": MODEL_LAYERS, "max_source_positions": MODEL_POSITIONS, "max_target_positions": MODEL_POSITIONS,
        **({"share_encoder_decoder": True} if shared else {})}
    model = {"vocab_size": MODEL_VOCAB, "d_model": MODEL_WIDTH, "heads": MODEL_HEADS, "ffn_dim": MODEL_FFN,
             "encoder_layers": MODEL_LAYERS, **positions, "dropout": dict.fromkeys(("embedding", "attention", "residual", "ffn"), 0),
             "attention": {stack: {"kind": k, **({"hybrid_init": HYBRID_INIT} if k == "hnas" else {})} for stack, k in kinds.items()}}
    if architecture == "seq2seq":
        return {"task": "headline", "model": model}
    # the masked-LM loss alone: no sentence-order head
    return {"task": "mlm", "model": model, "train": {"sentence_order_weight": 0}}


def check_directional_derivative(name, forward, ref, grads):
    """The stored gradient against a central difference of the loss along one random direction."""
    direction = {k: torch.randn(v.shape, dtype=torch.float64, generator=check_gen) for k, v in ref.items()}
    h = 1e-6
    with torch.no_grad():
        plus = forward({k: v + h * direction[k] for k, v in ref.items()})[1]
        minus = forward({k: v - h * direction[k] for k, v in ref.items()})[1]
    numeric = ((plus - minus) / (2 * h)).item()
    analytic = sum((grads[k] * direction[k]).sum() for k in ref).item()
    assert abs(numeric - analytic) < 1e-6 * max(1.0, abs(analytic)), (name, "directional derivative", numeric, analytic)


check_gen = torch.Generator().manual_seed(7)  # only for self-check directions; nothing written depends on it


def twin_model(architecture, kind, shared=False, **heads):
    """The twin's model of the fixtures' sizes: seq2seq with `kind` in the encoder (shared: its decoder on
    the encoder's weights), or BERT with its heads."""
    if architecture == "seq2seq":
        return twin.Seq2Seq(MODEL_SHAPES, kind, label_smoothing=SEQ2SEQ_LABEL_SMOOTHING, shared=shared)
    return twin.Bert(MODEL_SHAPES, kind, **heads)


def run_model(name, model, inputs, unused):
    """Draws the model's parameters, runs `inputs` through it in float64 and checks the gradient, zeros for
    the parameters outside the loss (`unused`); returns the parameters, the float64 inputs and leaves, the
    logits, the loss and the gradients."""
    params = {n: draw_parameter(n, shape) for n, shape in parameter_shapes(model).items()}
    x = {k: (t.long() if t.dtype == torch.int32 else t.double()) for k, t in inputs.items()}
    ref = double_leaves(params)
    logits, loss = functional_call(model, ref, (x,))
    loss.backward()
    assert [k for k, v in ref.items() if v.grad is None] == unused, (name, "parameters outside the loss")
    grads = {k: (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in ref.items()}
    check_directional_derivative(name, lambda q: functional_call(model, q, (x,)), {k: v.detach() for k, v in ref.items()}, grads)
    return params, x, ref, logits.detach(), loss, grads


def model_json(inputs, params, logits, loss, grads):
    return {"inputs": jsons(inputs, F32_DIGITS), "parameters": jsons(params, F32_DIGITS),
            "logits": tensor_json(logits.contiguous(), F64_DIGITS), "loss": tensor_json(loss.detach(), F64_DIGITS),
            "grads": jsons(grads, F64_DIGITS)}


def add_model_case(architecture, kinds, inputs, shared=False):
    name = f"{architecture}_{'hnas' if 'hnas' in kinds.values() else 'lnas'}{'_shared' if shared else ''}"
    assert all(c["name"] != name for c in model_cases), f"duplicate case name {name}"
    seq2seq = architecture == "seq2seq"
    model = twin_model(architecture, kinds["encoder"], shared)
    label_smoothing = SEQ2SEQ_LABEL_SMOOTHING if seq2seq else 0.0
    # BERT's pooler is outside the masked-LM loss: no gradient, written as zeros
    params, x, ref, logits, loss, grads = run_model(name, model, inputs, [] if seq2seq else POOLER)
    targets = x["target_output"].reshape(-1) if seq2seq else x["masked_labels"]
    by_hand = cross_entropy_by_hand(logits, targets, PAD_ID, label_smoothing)
    assert abs(by_hand.item() - loss.item()) < 1e-12, (name, "loss vs cross-entropy of the stored logits")
    assert not torch.isnan(logits).any() and math.isfinite(loss.item())
    if "hnas" in kinds.values():
        # theta -> -inf: the hnas stacks become lnas; the same weights without theta give the lnas model
        detached = {k: v.detach() for k, v in ref.items()}
        with torch.no_grad():
            limit = {k: (torch.full_like(v, -80.0) if k.endswith("hybrid_theta") else v) for k, v in detached.items()}
            hnas_limit = functional_call(model, limit, (x,))[0]
            lnas = functional_call(twin_model(architecture, "lnas", shared),
                                   {k: v for k, v in detached.items() if not k.endswith("hybrid_theta")}, (x,))[0]
        assert (hnas_limit - lnas).abs().max() < 1e-12, (name, "hnas at theta -> -inf vs lnas")
        gap = (logits - lnas).abs().max().item()
        assert gap > 1e-2, (name, "hnas should move the logits", gap)
        thetas = [g for k, g in grads.items() if k.endswith("hybrid_theta")]
        assert len(thetas) == MODEL_LAYERS and all(len(set(t.tolist())) == MODEL_HEADS and t.abs().min() > 1e-8 for t in thetas), name
        print(f"{name}: max |logits - lnas logits with the same weights| = {gap:.3f}")
    else:
        check_against_torch_transformer(name, model, ref, x, logits)
    print(f"{name}: loss {loss.item():.4f}, logits std {logits.std().item():.3f}")
    model_cases.append({"name": name, "architecture": architecture, "config": model_config(architecture, kinds, shared),
                        "label_smoothing": label_smoothing, **model_json(inputs, params, logits, loss, grads)})


def build_models():
    for kind in ("lnas", "hnas"):
        # the paper's Gigaword setting: hnas in the encoder only
        add_model_case("seq2seq", {"encoder": kind, "decoder": "lnas", "cross": "lnas"},
                       seq2seq_inputs([7, 5, 3], [6, 4, 2]))
    for kind in ("lnas", "hnas"):
        add_model_case("bert", {"encoder": kind}, bert_inputs([(3, 4), (2, 2), (1, 1)], 10, MASKED))
    # the paper's shared stack (configs/gigaword_paper.json), last so that the cases above draw as before
    add_model_case("seq2seq", {"encoder": "hnas", "decoder": "lnas", "cross": "lnas"}, seq2seq_inputs([7, 5, 3], [6, 4, 2]),
                   shared=True)


# ---------------------------------------------------------------- BERT heads
# The heads a task puts on the BERT-style encoder, each with its loss, on the models' tiny lnas encoder.

head_cases = []


def add_head_case(name, heads, inputs):
    model = twin_model("bert", "lnas", masked_lm=heads["masked_lm"], classes=heads.get("classes", 0),
                       sentence_order_weight=1.0 if heads.get("sentence_order") else 0.0, span=heads.get("span", False))
    # the pooler is outside the span loss: zeros, as models.json writes them
    params, _, _, logits, loss, grads = run_model(name, model, inputs, POOLER if name == "span" else [])
    print(f"head {name}: loss {loss.item():.4f}")
    head_cases.append({"name": name, "architecture": "bert", "config": model_config("bert", {"encoder": "lnas"}),
                       "heads": heads, **model_json(inputs, params, logits, loss, grads)})


def build_heads():
    sop = bert_inputs([(3, 4), (2, 2), (1, 1)], 10, MASKED)
    sop["sentence_order"] = ids([1, 0, 1])
    add_head_case("sop", {"masked_lm": True, "sentence_order": True}, sop)
    pairs = bert_inputs([(3, 4), (2, 2), (1, 1)], 10, {})
    plain = {k: pairs[k] for k in ("input_ids", "segment_ids", "valid")}
    add_head_case("classify", {"masked_lm": False, "classes": 3}, dict(plain, labels=ids([2, 0, 1])))
    add_head_case("regression", {"masked_lm": False, "classes": 1},
                  dict(plain, targets=torch.tensor([0.5, -1.25, 3.0], dtype=torch.float32)))
    # answers inside B; the third row's answer is [CLS] (no answer)
    add_head_case("span", {"masked_lm": False, "span": True},
                  dict(plain, start_positions=ids([5, 4, 0]), end_positions=ids([7, 5, 0])))


# ---------------------------------------------------------------- optimizers
# The twin's optimizers (twin.optim.make_optimizer) from fixed gradients: AdamW and Adam, torch.optim's, checked
# against the update written out by hand; LAMB, the twin's own, against its invariant (a step moves w by lr ||w||).

OPTIM_STEPS = 5
OPTIM_LR, OPTIM_BETA1, OPTIM_BETA2, OPTIM_EPS = 1e-2, 0.9, 0.999, 1e-8
OPTIM_DECAY = {"adamw": 0.1, "adam": 0.1, "lamb": 0.01, "lamb_albert": 0.01}
OPTIM_EPS_ALBERT = 1e-6  # ALBERT's optimization.py gives its LAMBOptimizer epsilon=1e-6
OPTIM_GRAD_SCALES = (1.0, 0.5, 2.0, 0.1, 1.0)  # per step, so the moments see changing magnitudes
optim_cases = []


def optim_inputs():
    # layer.bias: LAMB's ||w|| = 0 on the first step
    params = {"layer.weight": uniform((4, 3)), "layer.bias": torch.zeros(3, dtype=torch.float32),
              "layer.norm.weight": uniform((2,), 0.5, 1.5)}
    grads = [{k: uniform(v.shape) * scale for k, v in params.items()} for scale in OPTIM_GRAD_SCALES]
    assert len(grads) == OPTIM_STEPS
    grads[0]["layer.weight"][0, 0] = 0.0  # m = v = 0 there after step 1: the update is 0 / (0 + eps)
    return params, grads


def optimizer_steps(kind, params, grads, decay, eps):
    """The parameters after every step of the twin's optimizer `kind`, in float64; weight decay on the
    decayed group only. lamb_albert takes the betas as float32 holds them, as the C++ optimizer (and
    ALBERT's TensorFlow) runs them: without bias correction nothing cancels float32(1 - 0.999)'s 1.3e-5
    relative offset from 0.001."""
    ref = double_leaves(params)
    betas = (OPTIM_BETA1, OPTIM_BETA2)
    if kind == "lamb_albert":
        betas = tuple(torch.tensor(b, dtype=torch.float32).item() for b in betas)
    optimizer = make_optimizer(ref.items(), kind, OPTIM_LR, *betas, eps, decay)
    steps = []
    for g in grads:
        for k, v in ref.items():
            v.grad = g[k].double()
        optimizer.step()
        steps.append({k: v.detach().clone() for k, v in ref.items()})
    return steps


def adam_by_hand(kind, params, grads, decay):
    """The same updates written out, to check torch.optim's against the formulas in the docstring."""
    w = {k: v.double() for k, v in params.items()}
    m, v2 = ({k: torch.zeros_like(v) for k, v in w.items()} for _ in range(2))
    steps = []
    for t, g in enumerate(grads, start=1):
        for k in w:
            lam = 0.0 if no_weight_decay(k) else decay
            gk = g[k].double() + (lam * w[k] if kind == "adam" else 0.0)
            m[k] = OPTIM_BETA1 * m[k] + (1 - OPTIM_BETA1) * gk
            v2[k] = OPTIM_BETA2 * v2[k] + (1 - OPTIM_BETA2) * gk * gk
            update = (m[k] / (1 - OPTIM_BETA1 ** t)) / (torch.sqrt(v2[k] / (1 - OPTIM_BETA2 ** t)) + OPTIM_EPS)
            w[k] = w[k] - OPTIM_LR * (update + (lam * w[k] if kind == "adamw" else 0.0))
        steps.append(dict(w))
    return steps


def check_lamb(params, steps):
    """LAMB's invariant: a step moves each tensor by lr ||w||, but where ||w|| = 0 (only layer.bias's first
    step), which takes the ratio-1 branch."""
    unit_ratio = 0
    for t, (before, after) in enumerate(zip([{k: v.double() for k, v in params.items()}] + steps, steps), start=1):
        for k in before:
            w_norm = before[k].norm().item()
            unit_ratio += w_norm == 0
            if w_norm > 0:
                assert abs((after[k] - before[k]).norm().item() - OPTIM_LR * w_norm) < 1e-14, (k, t)
    assert unit_ratio == 1, "only layer.bias's first step should take the ratio-1 branch"


def build_optim():
    params, grads = optim_inputs()
    decayed = [k for k in params if not no_weight_decay(k)]
    assert decayed == ["layer.weight"]
    for kind in ("adamw", "adam", "lamb", "lamb_albert"):
        decay = OPTIM_DECAY[kind]
        eps = OPTIM_EPS_ALBERT if kind == "lamb_albert" else OPTIM_EPS
        steps = optimizer_steps(kind, params, grads, decay, eps)
        if kind == "lamb":
            check_lamb(params, steps)
        elif kind != "lamb_albert":
            by_hand = adam_by_hand(kind, params, grads, decay)
            worst = max((a[k] - b[k]).abs().max().item() for a, b in zip(steps, by_hand) for k in a)
            assert worst < 1e-15, (kind, "torch.optim vs by hand", worst)
        moved = max((steps[-1][k] - params[k].double()).abs().max().item() for k in params)
        print(f"{kind}: largest move over {OPTIM_STEPS} steps {moved:.4f}")
        optim_cases.append({
            "name": kind, "kind": kind, "options": {"learning_rate": OPTIM_LR, "beta1": OPTIM_BETA1, "beta2": OPTIM_BETA2,
                                                    "epsilon": eps, "weight_decay": decay},
            "decayed": decayed, "parameters": jsons(params, F32_DIGITS), "grads": [jsons(g, F32_DIGITS) for g in grads],
            "steps": [jsons(s, F64_DIGITS) for s in steps]})


# ---------------------------------------------------------------- multi-view model
# Paper 004's multi-view attention model (src/models/multiview.h), boxes to loss, per attention kind and
# pooling baseline; ragged padding in every view.

MV_WIDTH, MV_READOUT, MV_CLASSES = 8, 12, 6
MV_VALID = ([[1, 1, 1], [1, 1, 0]], [[1, 1, 1, 1], [1, 1, 0, 0]], [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
MV_LABELS = [4, 1]
multiview_cases = []


def classifier_outcome(params, forward, labels):
    """What a classifier's case writes: forward(float64 leaves) gives the logits (B, C), their cross-entropy
    against labels the loss."""
    ref = double_leaves(params)
    logits = forward(ref)
    loss = F.cross_entropy(logits, torch.tensor(labels))
    loss.backward()
    assert not torch.isnan(logits).any()
    return {"parameters": jsons(params, F32_DIGITS), "logits": tensor_json(logits.detach(), F64_DIGITS),
            "loss": round(loss.item(), F64_DIGITS), "grads": {k: tensor_json(v.grad, F64_DIGITS) for k, v in ref.items()}}


def under(p, prefix):
    """The entries of p whose names start with prefix, without it."""
    return {n[len(prefix):]: v for n, v in p.items() if n.startswith(prefix)}


def multiview_parameter_names(mixer, kind):
    names = []
    if mixer == "attention":
        for m in (1, 2):
            prefix = f"fusion.views.{m}."
            names += [prefix + n for n in ("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias")]
            if kind == "hnas":
                names.append(prefix + "norm.hybrid_theta")
    names += ["fusion.norm.weight", "fusion.norm.bias"]
    for n in ("per_box", "pooled", "output"):
        names += [f"readout.{n}.weight", f"readout.{n}.bias"]
    return names


def multiview_parameter(name, heads):
    d, h, c = MV_WIDTH, MV_READOUT, MV_CLASSES
    if name.endswith("hybrid_theta"):
        return uniform((heads,), -1.0, 1.0)
    if name == "fusion.norm.weight":
        return uniform((d,), 0.5, 1.5)
    if name == "fusion.norm.bias":
        return uniform((d,), -0.2, 0.2)
    shape = {"readout.per_box": (h, d), "readout.pooled": (h, h), "readout.output": (c, h)}.get(name.rsplit(".", 1)[0], (d, d))
    # Larger query and key weights give sharp attention, where the kinds differ most.
    scale = 1.5 if "_proj" in name else 0.5
    return uniform(shape, -scale, scale) if name.endswith("weight") else uniform(shape[:1], -0.1, 0.1)


def multiview_model(kind, mixer, heads, views, valids, p):
    """Logits (B, C) in float64: views[v] (B, L_v, D), valids[v] (B, L_v) 0/1, p by hnas's names. The
    attention is the twin's with the untransformed values of paper 004's App. B."""
    real = valids[0].unsqueeze(-1)
    total = views[0]
    for m in (1, 2):
        x, valid = views[m], valids[m]
        if mixer == "attention":
            fusion = twin.Attention(MV_WIDTH, heads, kind, values=False)
            total = total + functional_call(fusion, under(p, f"fusion.views.{m}."),
                                            (views[0], x, twin.Masks(valid, valids[0], heads)))[0]
        elif mixer == "sum":
            total = total + (x * valid.unsqueeze(-1)).sum(dim=1, keepdim=True)
        else:
            total = total + (x + (valid.unsqueeze(-1) - 1) * 1e9).max(dim=1, keepdim=True).values
    fused = F.layer_norm(total, (MV_WIDTH,), p["fusion.norm.weight"], p["fusion.norm.bias"], LN_EPS) * real
    per_box = F.gelu(F.linear(fused, p["readout.per_box.weight"], p["readout.per_box.bias"])) * real
    pooled = F.gelu(F.linear(per_box.sum(dim=1), p["readout.pooled.weight"], p["readout.pooled.bias"]))
    return F.linear(pooled, p["readout.output.weight"], p["readout.output.bias"])


def add_multiview_case(kind, mixer, heads=1):
    name = (kind if mixer == "attention" else mixer) + (f"_heads{heads}" if heads > 1 else "")
    valids = [torch.tensor(v, dtype=torch.float32) for v in MV_VALID]
    views = [uniform((BATCH, v.shape[1], MV_WIDTH), -1.5, 1.5) * v.unsqueeze(-1) for v in valids]
    params = {n: multiview_parameter(n, heads) for n in multiview_parameter_names(mixer, kind)}
    outcome = classifier_outcome(
        params, lambda p: multiview_model(kind, mixer, heads, [v.double() for v in views], [v.double() for v in valids], p),
        MV_LABELS)
    multiview_cases.append({
        "name": name, "kind": kind, "mixer": mixer, "heads": heads,
        "width": MV_WIDTH, "readout": MV_READOUT, "classes": MV_CLASSES, "layer_norm_eps": LN_EPS,
        "inputs": {**{f"features_{v}": tensor_json(views[v], F32_DIGITS) for v in range(3)},
                   **{f"valid_{v}": tensor_json(valids[v], F32_DIGITS) for v in range(3)}, "labels": MV_LABELS},
        **outcome})


def build_multiview():
    for kind in ("lnas", "dnas", "hnas", "sinkhorn"):
        add_multiview_case(kind, "attention")
    add_multiview_case("dnas", "attention", heads=2)
    add_multiview_case("lnas", "sum")
    add_multiview_case("lnas", "max")


# ---------------------------------------------------------------- paper 003's ViT
# The images task's model (src/models/vit.h), patches to loss: pre-LN layers, LNAS then paper 003's ot last.

VIT_WIDTH, VIT_HEADS, VIT_FFN, VIT_PATCHES, VIT_VALUES, VIT_CLASSES, VIT_BATCH = 16, 4, 32, 4, 4, 3, 3
VIT_KINDS = ("lnas", "ot")
VIT_LABELS = [2, 0, 1]
vit_cases = []


def vit_layers():
    return [twin.Layer(VIT_WIDTH, VIT_HEADS, VIT_FFN, kind, "pre", attention={"alpha": 1.0} if kind == "ot" else {})
            for kind in VIT_KINDS]


def vit_parameter_shapes(layers):
    d = VIT_WIDTH
    shapes = {"patch_embedding.weight": (d, VIT_VALUES), "patch_embedding.bias": (d,), "class_token": (1, 1, d),
              "positions": (1, VIT_PATCHES + 1, d)}
    for i, layer in enumerate(layers):
        shapes.update(parameter_shapes(layer, f"encoder.layers.{i}."))
    return dict(shapes, **{"encoder.final_norm.weight": (d,), "encoder.final_norm.bias": (d,),
                           "classifier.weight": (VIT_CLASSES, d), "classifier.bias": (VIT_CLASSES,)})


def vit_parameter(name, shape):
    if "norm" in name:
        return uniform(shape, 0.5, 1.5) if name.endswith("weight") else uniform(shape, -0.2, 0.2)
    return uniform(shape, -0.1, 0.1) if name.endswith("bias") else uniform(shape, -0.5, 0.5)


def vit_model(patches, p, layers):
    """Logits (B, C) in float64, as VitModel::logits(VitModel::encode(patches)) in evaluation mode: the
    twin's pre-LN layers."""
    x = F.linear(patches, p["patch_embedding.weight"], p["patch_embedding.bias"])
    x = torch.cat([p["class_token"].expand(patches.shape[0], 1, VIT_WIDTH), x], 1) + p["positions"]
    real = torch.ones(x.shape[:2], dtype=x.dtype)
    for i, layer in enumerate(layers):
        x = functional_call(layer, under(p, f"encoder.layers.{i}."), (x, twin.Masks(real, real, VIT_HEADS)))
    x = F.layer_norm(x, (VIT_WIDTH,), p["encoder.final_norm.weight"], p["encoder.final_norm.bias"], LN_EPS)
    return F.linear(x[:, 0], p["classifier.weight"], p["classifier.bias"])


def build_vit():
    patches = uniform((VIT_BATCH, VIT_PATCHES, VIT_VALUES), 0.0, 1.0)
    layers = vit_layers()
    params = {n: vit_parameter(n, shape) for n, shape in vit_parameter_shapes(layers).items()}
    outcome = classifier_outcome(params, lambda p: vit_model(patches.double(), p, layers), VIT_LABELS)
    vit_cases.append({
        "name": "lnas_ot", "kinds": list(VIT_KINDS), "width": VIT_WIDTH, "heads": VIT_HEADS, "ffn": VIT_FFN,
        "patches": VIT_PATCHES, "patch_values": VIT_VALUES, "classes": VIT_CLASSES, "layer_norm_eps": LN_EPS,
        "inputs": {"patches": tensor_json(patches, F32_DIGITS), "labels": VIT_LABELS}, **outcome})


def write(name, cases, kib):
    text = dump({"generator": "scripts/make_fixtures.py", "torch_version": torch.__version__, "cases": cases}) + "\n"
    json.loads(text)  # the writer above must produce valid JSON
    path, max_bytes = os.path.normpath(os.path.join(FIXTURE_DIR, name + ".json")), kib * 1024
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    size = len(text.encode("utf-8"))
    assert size < max_bytes, f"{path} is {size} bytes; keep fixtures under {max_bytes}"
    print(f"wrote {len(cases)} cases, {size} bytes, to {os.path.relpath(path)}")


def main():
    torch.manual_seed(20240607)
    torch.set_num_threads(2)
    ops = (build_matmul, build_linear, build_binary, build_reductions, build_unary, build_softmax, build_layer_norm,
           build_embedding, build_cross_entropy, build_shape_ops, build_head_products)
    for name, seed, builders, written, kib in (
            ("ops", 20240607, ops, cases, 400), ("attention", 20240608, (build_attention,), attention_cases, 600),
            ("models", 20240609, (build_models,), model_cases, 1536), ("heads", 20240611, (build_heads,), head_cases, 1536),
            ("optim", 20240610, (build_optim,), optim_cases, 100), ("layers", 20240612, (build_layers,), layer_cases, 400),
            ("multiview", 20240613, (build_multiview,), multiview_cases, 400), ("vit", 20261126, (build_vit,), vit_cases, 200)):
        gen.manual_seed(seed)
        for build in builders:
            build()
        write(name, written, kib)


if __name__ == "__main__":
    main()
