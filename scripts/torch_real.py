#!/usr/bin/python3
"""PyTorch twin of a real `hnas train` run (docs/performance.md): replays the batches the run drew, as
`hnas-bench batches --run DIR` wrote them with a model's initial parameters, and trains the twin model
(scripts/torch_reference.py's, which must match the run's config) with the config's optimizer,
learning-rate schedule, clipping, label smoothing and dropout, step by step on the same batches.

    /usr/bin/python3 scripts/torch_real.py --batches run.batches --steps 400 --threads 2
    ~/.cache/hnas-peers/torch-latest/bin/python scripts/torch_real.py --batches run.batches --peer compile --precision bf16

--peer and --precision (scripts/torch_peers.py) pick how PyTorch runs: eager, torch.compile or IPEX, in f32
or under PyTorch's own mixed precision, torch.autocast("cpu", dtype=torch.bfloat16): the products in bf16
(oneDNN, AMX where the CPU has it), the ops autocast keeps in f32 in f32. The step-0 check runs in f32 through
the peer's own forward (compiled: a graph of its own, before the timed steps; IPEX's optimized model), but for
IPEX in bf16, whose optimize() turns the weights to bf16: there it runs on the model before optimize().

Prints one JSON line: seconds from the first step's start to the end of the last, the process's peak
RSS, the step-0 loss with dropout off beside hnas's, and the mean loss of every 50 steps; for torch.compile,
whose batches of varying shapes recompile, also the steps during which a graph was compiled (0-based),
their seconds, the graphs compiled and the seconds of all the steps at the rate of those that compiled
nothing (seconds_without_compiling). Progress goes to stderr every 50 steps. scripts/bench_real.sh runs it
beside `hnas train`.
"""
import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F

import torch_peers
import torch_reference as ref

LOG_EVERY = 50


def twin_of(config):
    """The twin's shapes and dropout rate for the run's model; what the twin cannot build is refused by name."""
    m, task = config["model"], config["task"]
    if task not in ("headline", "mlm"):
        sys.exit(f"torch_real: task {task}: only headline and mlm runs have a twin")
    expected = {"activation": "gelu", "positions": "learned"}
    if task == "headline":
        expected.update(norm="post", decoder_layers=m["encoder_layers"], tie_embeddings=True, scale_embeddings=True,
                        embedding_norm=False)
    for key, value in expected.items():
        if m.get(key) != value:
            sys.exit(f"torch_real: model.{key} is {m.get(key)!r}, the twin has {value!r}")
    if m["norm"] not in ("post", "pre"):
        sys.exit(f"torch_real: model.norm is {m['norm']!r}, the twin has post or pre")
    # One rate for every dropout but the feed-forward's inner one, which the twin does not have.
    rates = {name: rate for name, rate in m["dropout"].items() if name != "ffn"}
    if m["dropout"].get("ffn", 0.0) != 0.0 or len(set(rates.values())) > 1:
        sys.exit(f"torch_real: model.dropout is {m['dropout']}: the twin takes one rate, and ffn 0")
    shapes = ref.Shapes(width=m["d_model"], heads=m["heads"], ffn=m["ffn_dim"], layers=m["encoder_layers"],
                        vocab=m["vocab_size"] or config["tokenizer"]["vocab_size"],
                        mlm_positions=m.get("max_positions", ref.MLM_POSITIONS),
                        max_source_positions=m.get("max_source_positions", ref.MAX_SOURCE_POSITIONS),
                        max_target_positions=m.get("max_target_positions", ref.MAX_TARGET_POSITIONS), norm=m["norm"],
                        hybrid_init=m["attention"]["encoder"].get("hybrid_init", ref.HYBRID_INIT),
                        ln_eps=m["layer_norm_eps"])
    attention = m["attention"]
    for stack in ("decoder", "cross"):
        if stack in attention and attention[stack]["kind"] != "lnas":
            sys.exit(f"torch_real: model.attention.{stack}.kind is {attention[stack]['kind']}, the twin's is lnas")
    if task == "headline" and config["train"]["label_smoothing"] != ref.LABEL_SMOOTHING:
        sys.exit(f"torch_real: train.label_smoothing is {config['train']['label_smoothing']}, the twin's {ref.LABEL_SMOOTHING}")
    if config["train"]["gradient_accumulation"] != 1 or config["train"]["clip_scope"] != "global":
        sys.exit("torch_real: the twin takes one batch per step and clips the global norm")
    return shapes, next(iter(rates.values()), 0.0)


def no_weight_decay(name):
    """src/optim/optimizer.cpp's rule: biases, norms and relative-position priors are not decayed."""
    return name.rsplit(".", 1)[-1] == "bias" or "norm." in name or "relative_bias." in name


def learning_rate_at(train, step):
    """src/optim/schedule.cpp for the schedules the twin knows; steps count from 1."""
    lr, warmup, total, kind = train["learning_rate"], train["warmup_steps"], train["steps"], train["schedule"]
    if kind == "constant":
        return lr
    if step <= warmup:
        return lr * step / warmup
    if kind == "linear":
        return lr * max(total - step, 0) / max(total - warmup, 1)
    sys.exit(f"torch_real: train.schedule {kind}: the twin knows constant and linear")


class Lamb(torch.optim.Optimizer):
    """src/optim/optimizer.cpp's LAMB (You et al. 2019, with bias correction): r = m̂/(√v̂ + ε) + λw,
    w -= lr · (‖w‖/‖r‖) · r, the ratio 1 when either norm is 0. A torch.optim.Optimizer (parameter groups,
    per-parameter state), so that IPEX's optimize() can take it."""

    def __init__(self, groups, lr, betas, eps):
        super().__init__(groups, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0})

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
                m, v = state["m"], state["v"]
                c1, c2 = 1 - beta1 ** state["step"], 1 - beta2 ** state["step"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                r = (m / c1) / ((v / c2).sqrt() + eps) + decay * p
                w_norm, r_norm = p.norm().item(), r.norm().item()
                trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
                p.sub_(r, alpha=lr * trust)


def make_optimizer(model, train):
    named = list(model.named_parameters())
    kinds = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "lamb": Lamb}
    if train["optimizer"] not in kinds:
        sys.exit(f"torch_real: train.optimizer {train['optimizer']}: the twin knows adam, adamw and lamb")
    groups = [{"params": [p for n, p in named if not no_weight_decay(n)], "weight_decay": train["weight_decay"]},
              {"params": [p for n, p in named if no_weight_decay(n)], "weight_decay": 0.0}]
    return kinds[train["optimizer"]](groups, lr=train["learning_rate"], betas=(train["beta1"], train["beta2"]),
                                     eps=train["epsilon"])


def set_learning_rate(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", required=True, help="the file `hnas-bench batches` wrote")
    parser.add_argument("--steps", type=int, default=0, help="steps to train (default: every batch in the file)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    torch_peers.add_arguments(parser)
    args = parser.parse_args()
    torch_peers.check_arguments(parser, args)
    if args.threads < 1 or args.steps < 0:
        parser.error("--threads must be >= 1 and --steps >= 0")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    metadata, arrays = ref.read_checkpoint(args.batches, copy=False)
    config, available = metadata["config"], metadata["steps"]
    steps = args.steps or available
    if steps > available:
        sys.exit(f"torch_real: --steps {steps} but {args.batches} holds {available} batches")
    shapes, dropout = twin_of(config)
    kind = config["model"]["attention"]["encoder"]["kind"]
    if kind not in ("lnas", "dnas", "hnas"):
        sys.exit(f"torch_real: encoder kind {kind}: the twin knows lnas, dnas and hnas")
    train = config["train"]
    if config["task"] == "headline":
        model = ref.Seq2Seq(kind, dropout, shapes)
    else:
        model = ref.Bert(kind, dropout, train["sentence_order_weight"], shapes)
    ref.load_parameters(model, arrays, args.batches)
    # The batches stay as views of the file's bytes until their step, as a data pipeline would hold them.
    stored = [{} for _ in range(available)]
    for name, array in arrays.items():
        if name.startswith("batch/"):
            _, step, field = name.split("/")
            stored[int(step)][field] = array
    del arrays

    def batch(step):
        return {field: torch.tensor(array, dtype=torch.long if array.dtype.kind == "i" else torch.float32)
                for field, array in stored[step].items()}

    result = {"impl": "torch", "task": config["task"], "kind": kind}
    trained, optimizer = torch_peers.optimize(model.train(), args.peer, args.precision, result,
                                              make_optimizer(model, train))
    # The step-0 check: f32, dropout off, the peer's own forward; IPEX's bf16 model holds bf16 weights.
    checked = model if args.peer == "ipex" and args.precision == "bf16" else trained
    checked.eval()
    start = time.perf_counter()
    with torch.no_grad():
        loss0_eval = torch_peers.forward(checked.loss, args.peer, "f32", {})(batch(0)).item()
    result["loss0_eval_s"] = time.perf_counter() - start
    model = trained.train()
    del checked, trained
    forward_loss = torch_peers.forward(model.loss, args.peer, args.precision, result)
    parameters = list(model.parameters())
    window, window_means = [], []
    timer = torch_peers.Timer()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        with timer.unit():
            set_learning_rate(optimizer, learning_rate_at(train, step))
            model.zero_grad(set_to_none=True)
            loss = forward_loss(batch(step - 1))
            value = loss.item()
            if not math.isfinite(value):
                sys.exit(f"torch_real: loss {value} at step {step}")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, train["clip_norm"])
            optimizer.step()
        window.append(value)
        if step % LOG_EVERY == 0 or step == steps:
            window_means.append({"step": step, "loss": sum(window) / len(window)})
            window = []
            print(f"torch_real: step {step}/{steps}  loss {window_means[-1]['loss']:.4f}  "
                  f"elapsed {time.perf_counter() - start:.1f} s  rss {rss_mib():.0f} MiB", file=sys.stderr, flush=True)
    result.update({"seconds": time.perf_counter() - start, "threads": torch.get_num_threads(), "steps": steps,
                   "loss0_eval": loss0_eval, "hnas_loss0_eval": metadata["loss0_eval"], "losses": window_means})
    timer.report(result)
    result.update({"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                   "torch": torch.__version__, "blas": ref.blas_backend()})
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
