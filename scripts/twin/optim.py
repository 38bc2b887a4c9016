"""hnas's optimizer rules (src/optim/optimizer.cpp) and learning-rate schedules (src/optim/schedule.cpp) for
the twin: which parameters weight decay skips, the hybrid gates' rate scale, Adam and AdamW (torch.optim's),
LAMB as You et al. (2019) and as ALBERT's code have it, and the rate at every step.
"""
import math

import torch


def no_weight_decay(name):
    """Biases, layer norms (and every parameter under a norm: hnas's hybrid theta, NAP's gain and bias) and the
    relative-position prior are not decayed."""
    return name.rsplit(".", 1)[-1] == "bias" or "norm." in name or "relative_bias." in name


def is_hybrid_gate(name):
    return name.endswith("hybrid_theta")


class Lamb(torch.optim.Optimizer):
    """LAMB, per tensor with phi = identity. You et al. (2019), Algorithm 2, with bias correction:
    m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, r = m^ / (sqrt(v^) + eps) + lambda w,
    w -= lr (||w|| / ||r||) r, the ratio 1 when either norm is 0. albert: as google-research/albert's
    lamb_optimizer.py (paper 004's pretraining), m and v uncorrected and the ratio only on the decayed
    groups (exclude_from_layer_adaptation = exclude_from_weight_decay). A torch.optim.Optimizer (parameter
    groups, per-parameter state), so that IPEX's optimize() can take it. The moments are computed out of
    place, term by term, as the fixtures' float64 references write them."""

    def __init__(self, groups, lr, betas, eps, albert=False):
        # albert is a group option: IPEX's optimize() rebuilds the optimizer from its groups and defaults.
        super().__init__(groups, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0, "decayed": True, "albert": albert})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            (beta1, beta2), eps, decay, lr = group["betas"], group["eps"], group["weight_decay"], group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update({"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)})
                state["step"] += 1
                g, t = p.grad, state["step"]
                state["m"] = m = beta1 * state["m"] + (1 - beta1) * g
                state["v"] = v = beta2 * state["v"] + (1 - beta2) * g * g
                if group["albert"]:
                    r = m / (torch.sqrt(v) + eps) + decay * p
                else:
                    r = (m / (1 - beta1 ** t)) / (torch.sqrt(v / (1 - beta2 ** t)) + eps) + decay * p
                w_norm, r_norm = p.norm().item(), r.norm().item()
                adapted = group["decayed"] or not group["albert"]
                ratio = w_norm / r_norm if adapted and w_norm > 0 and r_norm > 0 else 1.0
                p.copy_(p - lr * ratio * r)


def make_optimizer(named_parameters, kind, learning_rate, beta1, beta2, epsilon, weight_decay, gate_rate_scale=1.0):
    """The optimizer `kind` (adam, adamw, lamb, lamb_albert) over [(name, parameter)] in hnas's groups: the
    decayed parameters, the others, and the hybrid gates, which step at gate_rate_scale times the rate
    (each group's "rate_scale"; set_learning_rate applies it). Empty groups are left out."""
    named = list(named_parameters)
    groups = [{"params": [p for n, p in named if not no_weight_decay(n)], "weight_decay": weight_decay,
               "decayed": True, "rate_scale": 1.0},
              {"params": [p for n, p in named if no_weight_decay(n) and not is_hybrid_gate(n)], "weight_decay": 0.0,
               "decayed": False, "rate_scale": 1.0},
              {"params": [p for n, p in named if is_hybrid_gate(n)], "weight_decay": 0.0, "decayed": False,
               "rate_scale": gate_rate_scale}]
    groups = [dict(g, lr=learning_rate * g["rate_scale"]) for g in groups if g["params"]]
    betas = (beta1, beta2)
    if kind in ("lamb", "lamb_albert"):
        return Lamb(groups, learning_rate, betas, epsilon, albert=kind == "lamb_albert")
    optimizers = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if kind not in optimizers:
        raise SystemExit(f"optimizer {kind}: the twin knows adam, adamw, lamb and lamb_albert")
    return optimizers[kind](groups, lr=learning_rate, betas=betas, eps=epsilon)


def set_learning_rate(optimizer, learning_rate):
    for group in optimizer.param_groups:
        group["lr"] = learning_rate * group["rate_scale"]


def learning_rate_at(train, step):
    """The rate at `step` (from 1) of a run's train config: learning_rate, schedule, warmup_steps, steps and
    min_learning_rate (cosine)."""
    lr, warmup, total, kind = train["learning_rate"], train["warmup_steps"], train["steps"], train["schedule"]
    if kind == "constant":
        return lr
    if step <= warmup:
        return lr * step / warmup
    if kind == "linear":
        return lr * max(total - step, 0) / max(total - warmup, 1)
    if kind == "inverse_sqrt":
        return lr * math.sqrt(max(warmup, 1) / step)
    if kind == "bert_linear":
        return lr * max(total - step, 0) / max(total, 1)
    if kind == "cosine":
        progress = min(1.0, (step - warmup) / max(total - warmup, 1))
        low = train["min_learning_rate"]
        return low + 0.5 * (lr - low) * (1.0 + math.cos(math.pi * progress))
    raise SystemExit(f"schedule {kind}: the twin knows constant, linear, inverse_sqrt, bert_linear and cosine")
