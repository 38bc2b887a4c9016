#!/usr/bin/python3
"""The PyTorch twin (scripts/twin/) run beside hnas as a benchmark peer (docs/performance.md); one JSON line
on stdout.

    /usr/bin/python3 scripts/torch_reference.py --task headline --kind hnas --steps 20 --warmup 3
    /usr/bin/python3 scripts/torch_reference.py --load initial.ckpt --no-dropout --steps 3 --warmup 0
    /usr/bin/python3 scripts/torch_reference.py --batches run.batches --steps 400
    /usr/bin/python3 scripts/torch_reference.py --sources decode.hnas
    ~/.cache/hnas-peers/torch-latest/bin/python scripts/torch_reference.py ... --peer compile --precision bf16

By default it trains `hnas-bench train`'s reference workloads with the same batches and step, timed the same
way; --load starts from `hnas-bench train --dump-initial`'s parameters and batch; --batches replays a real
run from what `hnas-bench batches` wrote (`scripts/bench.sh real` and `twin`); --sources runs hnas's beam
search over what `hnas-bench decode` wrote. A run that compiled reports apart the steps or batches during
which TorchDynamo compiled a graph.
"""
import argparse
import contextlib
import functools
import json
import math
import resource
import statistics
import sys
import time

import numpy as np
import torch

from twin import model as twin
from twin.checkpoint import read_checkpoint
from twin.decode import beam_search, decode_step, encode
from twin.optim import learning_rate_at, make_optimizer, set_learning_rate

# Shapes of the two reference workloads (docs/performance.md, Workloads); must match src/bench/train.cpp.
BATCH, VOCAB, WIDTH, HEADS, FFN, LAYERS = 32, 8000, 256, 4, 1024, 4
SOURCE_LENGTH, TARGET_LENGTH, MLM_LENGTH = 64, 16, 128
MAX_SOURCE_POSITIONS, MAX_TARGET_POSITIONS, MLM_POSITIONS = 128, 64, 128
MASK_FRACTION, LABEL_SMOOTHING, CLIP_NORM, DROPOUT = 0.15, 0.1, 1.0, 0.1
REFERENCE = twin.Shapes(WIDTH, HEADS, FFN, LAYERS, VOCAB, MLM_POSITIONS, source_positions=MAX_SOURCE_POSITIONS,
                        target_positions=MAX_TARGET_POSITIONS)
LOG_EVERY = 50


# ---- how a peer runs -------------------------------------------------------------------------------
def optimize(model, peer, precision, result, optimizer=None):
    """(model, optimizer) as the peer runs them: IPEX's optimize() for ipex (a copy of the model, so what
    held the model before, such as its parameters' list, must be taken again), else as they are. Notes the
    peer, the precision and IPEX's version in result."""
    result.update({"peer": peer, "precision": precision})
    if peer != "ipex":
        return model, optimizer
    import intel_extension_for_pytorch as ipex
    result["ipex"] = ipex.__version__
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if optimizer is None:
        return ipex.optimize(model, dtype=dtype), None
    return ipex.optimize(model, optimizer=optimizer, dtype=dtype)


def peer_forward(function, peer, precision, result):
    """function as the peer calls it: compiled for compile (function itself, so that each function keeps
    its own TorchDynamo cache and config.cache_size_limit), called under bf16 autocast for precision bf16."""
    bf16 = precision == "bf16"
    if peer == "compile":
        if bf16 and torch.__version__.startswith("2.5."):
            # torch 2.5's ATen/cpu/vec/vec_n.h declares VectorizedN's fmadd with two operands, so Inductor's
            # vectorized fma (softmax's backward on bf16-autocast scores: VectorizedN<float, 2>) does not
            # compile (CppCompileError); emitted as a product and a sum instead.
            from torch._inductor.codegen.cpp import CppVecOverrides
            CppVecOverrides.fma = staticmethod(lambda x, y, z: f"(({x}) * ({y}) + ({z}))")
            result["inductor_patch"] = "vectorized fma as product + sum"
        function = torch.compile(function)

    def run(*args):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return function(*args)

    return run


def graphs_compiled():
    """Graphs TorchDynamo has compiled in this process (0 while it is not even imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return utils.counters["stats"]["unique_graphs"] if utils else 0


class Timer:
    """Times the units of a run (training steps, decoded batches), each with its work (1 a step, its articles
    a batch), and notes the units during which TorchDynamo compiled a graph."""

    def __init__(self):
        self.seconds, self.work, self.compiling = [], [], []
        self.graphs_before = graphs_compiled()

    @contextlib.contextmanager
    def unit(self, work=1):
        graphs, start = graphs_compiled(), time.perf_counter()
        yield
        self.seconds.append(time.perf_counter() - start)
        self.work.append(work)
        if graphs_compiled() > graphs:
            self.compiling.append(len(self.seconds) - 1)

    def report(self, result):
        """For a run that compiled: the units that compiled a graph (0-based), their seconds, the graphs
        compiled before and during the units, the frames TorchDynamo gave up on (run eager: a graph break it
        cannot resume, config.cache_size_limit recompiles reached), and the seconds of all the units at the
        rate of those that compiled nothing (their work over their seconds)."""
        if graphs_compiled() == 0:
            return
        from torch._dynamo.utils import counters
        quiet = [i for i in range(len(self.seconds)) if i not in self.compiling]
        quiet_seconds = sum(self.seconds[i] for i in quiet)
        result.update({"compiling_units": self.compiling,
                       "compiling_seconds": sum(self.seconds[i] for i in self.compiling),
                       "graphs_before": self.graphs_before, "graphs": graphs_compiled() - self.graphs_before,
                       "frames_left_eager": counters["frames"]["total"] - counters["frames"]["ok"],
                       "cache_size_limit": torch._dynamo.config.cache_size_limit})
        if quiet and quiet_seconds > 0:
            result["seconds_without_compiling"] = sum(self.work) * quiet_seconds / sum(self.work[i] for i in quiet)


def finish(result):
    """Peak RSS, the torch version and the BLAS the process actually mapped (Debian's torch links
    libblas.so.3, an alternative), then the JSON line."""
    result.update({"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                   "torch": torch.__version__})
    with open("/proc/self/maps") as maps:
        result["blas"] = sorted({line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line})
    print(json.dumps(result), flush=True)


def train_step(optimizer, forward_loss, batch, parameters, clip_norm, step):
    """One optimizer step: the loss and the gradient's global norm before clipping."""
    optimizer.zero_grad(set_to_none=True)
    loss = forward_loss(batch)
    value = loss.item()
    if not math.isfinite(value):
        sys.exit(f"torch_reference: loss {value} at step {step}")
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(parameters, clip_norm)
    optimizer.step()
    return value, float(norm)


def batch_tensors(arrays, prefix):
    """{field: tensor} of the entries named prefix + field, ids as int64."""
    return {name[len(prefix):]: torch.tensor(array, dtype=torch.long if array.dtype == np.int32 else torch.float32)
            for name, array in arrays.items() if name.startswith(prefix)}


# ---- the reference workloads -----------------------------------------------------------------------
def make_batch(task, generator):
    """Random fixed-shape batch, every position real; the same layout as hnas-bench's."""
    def random_ids(*shape):
        return torch.randint(twin.FIRST_PIECE_ID, VOCAB, shape, generator=generator)

    if task == "headline":
        words = random_ids(BATCH, TARGET_LENGTH - 1)
        return {"source_ids": random_ids(BATCH, SOURCE_LENGTH),
                "source_valid": torch.ones(BATCH, SOURCE_LENGTH),
                "target_input": torch.cat([torch.full((BATCH, 1), twin.BOS_ID), words], 1),
                "target_output": torch.cat([words, torch.full((BATCH, 1), twin.EOS_ID)], 1),
                "target_valid": torch.ones(BATCH, TARGET_LENGTH)}
    per_row = round(MASK_FRACTION * MLM_LENGTH)
    ids = random_ids(BATCH, MLM_LENGTH)
    chosen = torch.rand(BATCH, MLM_LENGTH, generator=generator).argsort(1)[:, :per_row].sort(1).values
    positions = (chosen + torch.arange(BATCH)[:, None] * MLM_LENGTH).reshape(-1)
    labels = ids.reshape(-1)[positions].clone()
    ids.view(-1)[positions] = twin.MASK_ID
    segments = (torch.arange(MLM_LENGTH) >= MLM_LENGTH // 2).long().expand(BATCH, -1).contiguous()
    return {"input_ids": ids, "segment_ids": segments, "valid": torch.ones(BATCH, MLM_LENGTH),
            "masked_positions": positions, "masked_labels": labels}


def model_flops_per_step(task, masked_rows):
    """3 x the forward matmul FLOPs, as hnas-bench counts them."""
    b, d, f, v = BATCH, WIDTH, FFN, VOCAB

    def attention(queries, keys):
        return 2 * (2 * queries * d * d + 2 * keys * d * d) + 2 * 2 * queries * keys * d

    def ffn(rows):
        return 2 * 2 * rows * d * f

    if task == "headline":
        s, t = SOURCE_LENGTH, TARGET_LENGTH
        forward = LAYERS * b * (attention(s, s) + ffn(s))
        forward += LAYERS * b * (attention(t, t) + attention(t, s) + ffn(t))
        forward += 2 * b * t * d * v
    else:
        forward = LAYERS * b * (attention(MLM_LENGTH, MLM_LENGTH) + ffn(MLM_LENGTH))
        forward += 2 * masked_rows * d * d + 2 * masked_rows * d * v
    return 3.0 * forward


def train_reference(args):
    generator = torch.Generator().manual_seed(args.seed)
    metadata, arrays = None, None
    if args.load:
        metadata, arrays = read_checkpoint(args.load, args.verify_crc)
        args.task, args.kind = metadata["task"], metadata["kind"]
        args.lr = metadata.get("learning_rate", args.lr)
    dropout = 0.0 if args.no_dropout else DROPOUT
    model = (twin.Seq2Seq(REFERENCE, args.kind, dropout, LABEL_SMOOTHING) if args.task == "headline"
             else twin.Bert(REFERENCE, args.kind, dropout))
    first = make_batch(args.task, generator)
    result = {"impl": "torch", "task": args.task, "kind": args.kind, "threads": torch.get_num_threads(),
              "batch": BATCH,
              # as hnas-bench counts: tokens the model reads, and the loss's targets (target or masked tokens)
              "input_tokens_per_step": BATCH * (SOURCE_LENGTH + TARGET_LENGTH if args.task == "headline" else MLM_LENGTH),
              "target_tokens_per_step": BATCH * TARGET_LENGTH if args.task == "headline"
                                        else first["masked_positions"].numel(),
              "parameters": sum(p.numel() for p in model.parameters()), "dropout": not args.no_dropout}
    if arrays is not None:
        twin.load_parameters(model, {n: a for n, a in arrays.items() if not n.startswith("batch/")}, args.load)
        first = batch_tensors(arrays, "batch/")

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    model.train()
    model, optimizer = optimize(model, args.peer, args.precision, result, optimizer)
    parameters = list(model.parameters())  # IPEX's optimize() copies the model and may repack weights
    forward_loss = peer_forward(model.loss, args.peer, args.precision, result)
    if arrays is not None:  # the step-0 check runs the peer's own forward (compiled, IPEX's, in its precision)
        model.eval()
        with torch.no_grad():
            start = time.perf_counter()
            result["loss0_eval"] = forward_loss(first).float().item()
            result["loss0_eval_s"] = time.perf_counter() - start
        model.train()
        result["loaded"] = args.load
        result["hnas_loss0_eval"] = metadata["loss0_eval"]

    times, losses, grad_norms, warmup_times = [], [], [], []
    for step in range(args.warmup + args.steps):
        batch = first if step == 0 or args.load else make_batch(args.task, generator)
        start = time.perf_counter()
        value, norm = train_step(optimizer, forward_loss, batch, parameters, CLIP_NORM, step)
        (times if step >= args.warmup else warmup_times).append(time.perf_counter() - start)
        if len(losses) < 8:
            losses.append(value)
            grad_norms.append(norm)
    result.update({"warmup": args.warmup, "steps": args.steps, "losses": losses, "grad_norms": grad_norms,
                   "loss0": losses[0], "warmup_ms": [1e3 * t for t in warmup_times]})
    flops = model_flops_per_step(args.task, first["masked_positions"].numel() if args.task == "mlm" else 0)
    result["model_gflop_per_step"] = flops * 1e-9
    if times:
        median, mean = statistics.median(times), sum(times) / len(times)
        result.update({"step_ms_median": 1e3 * median, "step_ms_mean": 1e3 * mean, "step_ms_min": 1e3 * min(times),
                       "step_ms_max": 1e3 * max(times), "input_tokens_per_s": result["input_tokens_per_step"] / median,
                       "input_tokens_per_s_mean": result["input_tokens_per_step"] / mean,
                       "target_tokens_per_s": result["target_tokens_per_step"] / median,
                       "model_gflop_per_s": flops / median * 1e-9})
        if args.peer == "compile" and args.warmup:
            result["first_step_s"] = warmup_times[0]
            result["compile_s"] = warmup_times[0] - median
    finish(result)


# ---- a real run ------------------------------------------------------------------------------------
def twin_of(config):
    """The twin of the run's model with the run's dropout; what the twin cannot build is refused by name."""
    m, task, train = config["model"], config["task"], config["train"]
    if task not in ("headline", "mlm"):
        sys.exit(f"torch_reference: task {task}: only headline and mlm runs have a twin")
    expected = {"activation": "gelu", "positions": "learned"}
    if task == "headline":
        expected.update(norm="post", decoder_layers=m["encoder_layers"], tie_embeddings=True, scale_embeddings=True,
                        embedding_norm=False)
    for key, value in expected.items():
        if m.get(key) != value:
            sys.exit(f"torch_reference: model.{key} is {m.get(key)!r}, the twin has {value!r}")
    if m["norm"] not in ("post", "pre"):
        sys.exit(f"torch_reference: model.norm is {m['norm']!r}, the twin has post or pre")
    # One rate for every dropout but the feed-forward's inner one, which the twin does not have.
    rates = {name: rate for name, rate in m["dropout"].items() if name != "ffn"}
    if m["dropout"].get("ffn", 0.0) != 0.0 or len(set(rates.values())) > 1:
        sys.exit(f"torch_reference: model.dropout is {m['dropout']}: the twin takes one rate, and ffn 0")
    attention = m["attention"]
    kind = attention["encoder"]["kind"]
    if kind not in ("lnas", "dnas", "hnas"):
        sys.exit(f"torch_reference: encoder kind {kind}: the twin's models take lnas, dnas and hnas")
    for stack in ("decoder", "cross"):
        if stack in attention and attention[stack]["kind"] != "lnas":
            sys.exit(f"torch_reference: model.attention.{stack}.kind is {attention[stack]['kind']}, the twin's is lnas")
    shapes = twin.Shapes(m["d_model"], m["heads"], m["ffn_dim"], m["encoder_layers"],
                         m["vocab_size"] or config["tokenizer"]["vocab_size"], m.get("max_positions", MLM_POSITIONS),
                         m["norm"], attention["encoder"].get("hybrid_init", 0.5), m["layer_norm_eps"],
                         m.get("max_source_positions"), m.get("max_target_positions"))
    dropout = next(iter(rates.values()), 0.0)
    if task == "headline":
        return twin.Seq2Seq(shapes, kind, dropout, train["label_smoothing"], m["share_encoder_decoder"])
    return twin.Bert(shapes, kind, dropout, sentence_order_weight=train["sentence_order_weight"])


def replay_run(args):
    metadata, arrays = read_checkpoint(args.batches, copy=False)
    config, available = metadata["config"], metadata["steps"]
    steps = args.steps or available
    if steps > available:
        sys.exit(f"torch_reference: --steps {steps} but {args.batches} holds {available} batches")
    model, train = twin_of(config), config["train"]
    if train["gradient_accumulation"] != 1 or train["clip_scope"] != "global":
        sys.exit("torch_reference: the twin takes one batch per step and clips the global norm")
    twin.load_parameters(model, {n: a for n, a in arrays.items() if not n.startswith("batch/")}, args.batches)
    # The batches stay as views of the file's bytes until their step, as a data pipeline would hold them.
    stored = [{name: array for name, array in arrays.items() if name.startswith(f"batch/{step}/")}
              for step in range(available)]
    del arrays

    result = {"impl": "torch", "task": config["task"], "kind": config["model"]["attention"]["encoder"]["kind"]}
    optimizer = make_optimizer(model.named_parameters(), train["optimizer"], train["learning_rate"], train["beta1"],
                               train["beta2"], train["epsilon"], train["weight_decay"], train.get("gate_learning_rate_scale", 1.0))
    trained, optimizer = optimize(model.train(), args.peer, args.precision, result, optimizer)
    # The step-0 check: f32, dropout off, the peer's own forward; IPEX's bf16 model holds bf16 weights.
    checked = model if args.peer == "ipex" and args.precision == "bf16" else trained
    checked.eval()
    start = time.perf_counter()
    with torch.no_grad():
        loss0_eval = peer_forward(checked.loss, args.peer, "f32", {})(batch_tensors(stored[0], "batch/0/")).item()
    result["loss0_eval_s"] = time.perf_counter() - start
    model = trained.train()
    del checked, trained
    forward_loss = peer_forward(model.loss, args.peer, args.precision, result)
    parameters = list(model.parameters())
    window, window_means = [], []
    timer = Timer()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        with timer.unit():
            set_learning_rate(optimizer, learning_rate_at(train, step))
            batch = batch_tensors(stored[step - 1], f"batch/{step - 1}/")
            value = train_step(optimizer, forward_loss, batch, parameters, train["clip_norm"], step)[0]
        window.append(value)
        if step % LOG_EVERY == 0 or step == steps:
            window_means.append({"step": step, "loss": sum(window) / len(window)})
            window = []
            print(f"torch_reference: step {step}/{steps}  loss {window_means[-1]['loss']:.4f}  "
                  f"elapsed {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    result.update({"seconds": time.perf_counter() - start, "threads": torch.get_num_threads(), "steps": steps,
                   "loss0_eval": loss0_eval, "hnas_loss0_eval": metadata["loss0_eval"], "losses": window_means})
    timer.report(result)
    finish(result)


# ---- decoding --------------------------------------------------------------------------------------
def decode_sources(args):
    settings, arrays = read_checkpoint(args.sources)
    config = settings["config"]
    if config["task"] != "headline":
        sys.exit(f"torch_reference: {args.sources} holds a {config['task']} model; only headline models decode")
    model = twin_of(config).eval()
    twin.load_parameters(model, {n: a for n, a in arrays.items() if not n.startswith("source/")}, args.sources)
    result = {"impl": "torch", "beam": settings["beam"], "batch": settings["batch"]}
    model, _ = optimize(model, args.peer, args.precision, result)
    run = {name: peer_forward(functools.partial(function, model), args.peer, args.precision, result)
           for name, function in (("encode", encode), ("decode_step", decode_step))}
    batches = [(torch.from_numpy(arrays[f"source/{b}/ids"]).long(), torch.from_numpy(arrays[f"source/{b}/valid"]))
               for b in range(settings["batches"])]

    with torch.inference_mode():
        beam_search(model, run, *batches[0], settings)
        timer = Timer()
        start = time.perf_counter()
        hypotheses = []
        for ids, valid in batches:
            with timer.unit(ids.shape[0]):
                hypotheses.append(beam_search(model, run, ids, valid, settings))
        seconds = time.perf_counter() - start
    ours = [tokens for batch in hypotheses for tokens in batch]
    theirs = [tokens for batch in settings["hypotheses"] for tokens in batch]
    result.update({"articles": len(ours), "seconds": seconds, "articles_per_s": len(ours) / seconds,
                   "generated_tokens": sum(map(len, ours)), "same_as_hnas": sum(a == b for a, b in zip(ours, theirs))})
    timer.report(result)
    if "seconds_without_compiling" in result:
        result["articles_per_s_without_compiling"] = len(ours) / result["seconds_without_compiling"]
    finish(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--load", metavar="FILE",
                        help="initial parameters and batch from `hnas-bench train --dump-initial FILE`; "
                             "task and kind are taken from it")
    source.add_argument("--batches", metavar="FILE", help="replay the run `hnas-bench batches` wrote")
    source.add_argument("--sources", metavar="FILE", help="decode what `hnas-bench decode --out` wrote")
    parser.add_argument("--task", choices=["headline", "mlm"], default="headline")
    parser.add_argument("--kind", choices=["lnas", "dnas", "hnas"], default="lnas",
                        help="encoder self-attention (the decoder's attentions are lnas)")
    parser.add_argument("--steps", type=int, help="timed training steps (default 20; --batches: every batch)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed training steps first")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam's constant learning rate")
    parser.add_argument("--no-dropout", action="store_true", help="every dropout rate 0")
    parser.add_argument("--verify-crc", action="store_true", help="with --load: check every entry's CRC-32C")
    parser.add_argument("--peer", choices=["eager", "compile", "ipex"], default="eager",
                        help="eager PyTorch, torch.compile (default mode) or IPEX's optimize()")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                        help="bf16: the forward under torch.autocast('cpu', torch.bfloat16)")
    args = parser.parse_args()
    if args.peer != "eager" and int(torch.__version__.split(".")[0]) < 2:
        parser.error(f"--peer {args.peer} needs PyTorch 2 (scripts/setup_peers.sh's torch-latest or torch-ipex); "
                     f"this is torch {torch.__version__}")
    if args.steps is None:
        args.steps = 0 if args.batches else 20
    if args.threads < 1 or args.steps < 0 or args.warmup < 0:
        parser.error("--threads must be >= 1, --steps and --warmup >= 0")
    if not (args.batches or args.sources) and args.steps + args.warmup < 1:
        parser.error("--steps and --warmup must make at least one step in all")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    (replay_run if args.batches else decode_sources if args.sources else train_reference)(args)


if __name__ == "__main__":
    main()
