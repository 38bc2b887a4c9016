"""The attention normalizations of hnas (src/nn/attention_kinds/) in PyTorch, written once for the
fixtures (scripts/make_fixtures.py, float64) and the PyTorch twin of the benchmark
(scripts/torch_reference.py, float32).

Scores s are (B, H, Lq, Lk); `allowed` is a boolean mask broadcastable to them (a real query, a real key
and, in causal self-attention, a key at or before the query). Weights are exactly 0 where not allowed,
and a query with nothing allowed has a zero row.
"""
import torch

NEG = -1e9  # a masked score: finite, so a row with nothing allowed never becomes NaN; exact in float32


def masked(t, allowed):
    return torch.where(allowed, t, torch.full_like(t, NEG))


def zero_outside(t, allowed):
    return torch.where(allowed, t, torch.zeros_like(t))


def masked_logsumexp(t, allowed, dim):
    return torch.logsumexp(masked(t, allowed), dim=dim, keepdim=True)


def softmax_over_keys(logits, allowed):
    return zero_outside(torch.softmax(masked(logits, allowed), dim=-1), allowed)


def lnas(s, allowed):
    return softmax_over_keys(s, allowed)


def dnas(s, allowed):
    return softmax_over_keys(s - masked_logsumexp(s, allowed, -2), allowed)


def hnas(s, allowed, theta):
    u = torch.sigmoid(theta).reshape(1, -1, 1, 1)
    return u * dnas(s, allowed) + (1 - u) * lnas(s, allowed)


def sinkhorn(s, allowed, iterations):
    log_a = masked(s, allowed)  # re-masked after each step: exp never sees a huge entry
    for _ in range(iterations):
        log_a = masked(log_a - masked_logsumexp(log_a, allowed, -2), allowed)
        log_a = masked(log_a - masked_logsumexp(log_a, allowed, -1), allowed)
    return zero_outside(torch.exp(log_a), allowed)


def dnas_causal(s, allowed):
    lq = s.shape[-2]
    prefix = torch.ones((lq, lq), dtype=torch.bool).tril()          # [i, i'] = i' <= i
    both = allowed.unsqueeze(-3) & prefix.reshape(1, 1, lq, lq, 1)  # (B, H, i, i', j)
    c = torch.logsumexp(masked(s.unsqueeze(-3).expand(both.shape), both), dim=-2)
    return softmax_over_keys(s - c, allowed)


def nap(s, allowed, gain, bias, eps, denominator="sqrt_variance_eps"):
    """denominator sqrt_variance_eps divides by sqrt(var + eps); std_plus_eps by sigma + eps, as paper
    002's code (normalize_masked in OliverRichter/normalized-attention) does."""
    count = allowed.to(s.dtype).sum(dim=-1, keepdim=True).clamp(min=1)
    mean = zero_outside(s, allowed).sum(dim=-1, keepdim=True) / count
    var = zero_outside((s - mean) ** 2, allowed).sum(dim=-1, keepdim=True) / count
    divisor = torch.sqrt(var + eps) if denominator == "sqrt_variance_eps" else torch.sqrt(var) + eps
    a = gain.reshape(1, -1, 1, 1) * (s - mean) / divisor + bias.reshape(1, -1, 1, 1)
    return zero_outside(a, allowed)


def non(s, allowed):
    """Paper 002's NON: the scores as weights, times 1/sqrt(n) for a query with n allowed keys."""
    count = allowed.to(s.dtype).sum(dim=-1, keepdim=True).clamp(min=1)
    return zero_outside(s, allowed) / torch.sqrt(count)


def ot(s, allowed, similarity, log_preference=None, alpha=1.0):
    """Paper 003's optimal-transport attention (Eq. 25): for query i and template t (a key),
    P[i, t] = sum_j u[i, j] * softmax over the allowed templates t of (alpha * s[i, t] + G[t, j]),
    the input templates j being the first N keys (similarity G is (B, H, Lk, N)) and u[i, :] the
    softmax of log_preference over the allowed inputs (uniform when None)."""
    n = similarity.shape[-1]
    inputs = allowed[..., :n]                                                  # (B, H, Lq, N)
    logits = alpha * s.unsqueeze(-2) + similarity.transpose(-1, -2).unsqueeze(-3)  # (B, H, Lq, N, Lk)
    per_input = torch.softmax(masked(logits, allowed.unsqueeze(-2)), dim=-1)
    preference = torch.zeros(inputs.shape, dtype=s.dtype) if log_preference is None else log_preference
    u = zero_outside(torch.softmax(masked(preference, inputs), dim=-1), inputs)
    return zero_outside((u.unsqueeze(-1) * per_input).sum(dim=-2), allowed)
