#!/usr/bin/python3
"""PyTorch twin of `hnas-bench train`: the reference seq2seq and masked-LM models written by
hand from nn.Linear / nn.Embedding / nn.LayerNorm, with hnas's parameter names, shapes, initialization,
batches and training step (forward loss, backward, global-norm clipping at 1.0, Adam with a constant
learning rate), timed the same way and reported as the same JSON line.

    /usr/bin/python3 scripts/torch_reference.py --task headline --kind hnas --steps 20 --warmup 3
    /usr/bin/python3 scripts/torch_reference.py --load initial.ckpt --no-dropout --steps 3 --warmup 0
    ~/.cache/hnas-peers/torch-latest/bin/python scripts/torch_reference.py --peer compile --precision bf16

--peer picks how PyTorch runs the same model and step: eager (the default, as it always did), compile
(torch.compile, default mode, around the loss: forward and, through AOTAutograd, backward; the
optimizer stays eager) or ipex (intel_extension_for_pytorch.optimize(model, optimizer, dtype)); --precision
bf16 runs the forward and the loss under torch.autocast("cpu", torch.bfloat16) (scripts/torch_peers.py, shared
with torch_real.py and torch_decode.py). A compiled run's first step compiles: the JSON line reports its
seconds apart (first_step_s, compile_s = first step minus the median timed step) and the warm-up steps,
which the timing excludes, as warmup_ms.

--load takes the initial parameters and the first batch from a checkpoint written by
`hnas-bench train --dump-initial FILE` (src/io/checkpoint.h describes the format; this file holds a
reader of its own) and then trains on that batch at every step, as hnas does when it dumps.

The PyTorch 1.13 twin needs Debian's python3-torch with libopenblas0-openmp (without OpenBLAS torch uses the reference BLAS).
Conventions follow scripts/make_fixtures.py: post-LN layers, GELU in its erf form, token embeddings times
sqrt(D) in the seq2seq model, learned positions; the attention normalizations are scripts/torch_attention.py's,
the ones the fixtures use.
"""
import argparse
import dataclasses
import json
import math
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_attention
import torch_peers

# Shapes of the two reference workloads (docs/performance.md, Workloads); must match src/bench/train.cpp.
BATCH, VOCAB, WIDTH, HEADS, FFN, LAYERS = 32, 8000, 256, 4, 1024, 4
SOURCE_LENGTH, TARGET_LENGTH, MLM_LENGTH = 64, 16, 128
MAX_SOURCE_POSITIONS, MAX_TARGET_POSITIONS, MLM_POSITIONS, SEGMENTS = 128, 64, 128, 2
MASK_FRACTION, LABEL_SMOOTHING, CLIP_NORM, DROPOUT = 0.15, 0.1, 1.0, 0.1
HYBRID_INIT, LN_EPS = 0.5, 1e-5


@dataclasses.dataclass(frozen=True)
class Shapes:
    """A twin's sizes and choices: the reference workloads' by default; scripts/torch_real.py reads them
    from a run's config. norm is where layer norm sits: "post" (x = LN(x + f(x))) or "pre" (x = x + f(LN(x)),
    with a final LN after the stack, hnas's encoder.final_norm)."""
    width: int = WIDTH
    heads: int = HEADS
    ffn: int = FFN
    layers: int = LAYERS
    vocab: int = VOCAB
    mlm_positions: int = MLM_POSITIONS
    max_source_positions: int = MAX_SOURCE_POSITIONS
    max_target_positions: int = MAX_TARGET_POSITIONS
    norm: str = "post"
    hybrid_init: float = HYBRID_INIT
    ln_eps: float = LN_EPS


REFERENCE = Shapes()
PAD_ID, BOS_ID, EOS_ID, MASK_ID, FIRST_ORDINARY_ID = 0, 2, 3, 6, 7


# ---- hnas checkpoints -----------------------------------------------------------------------------
CRC32C_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ (0x82F63B78 if _crc & 1 else 0)
    CRC32C_TABLE.append(_crc)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    table = CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def read_checkpoint(path, verify_crc=False, copy=True):
    """(metadata, {name: numpy array}) of an hnas checkpoint (src/io/checkpoint.h): the 32-byte
    preamble, the JSON header, then 64-byte-aligned entries. Checksums of the preamble and the header
    are always checked, the entries' only with verify_crc (slow in pure Python). copy=False: read-only
    arrays viewing the file's bytes (one copy of the file in memory instead of two)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 32 or blob[:8] != b"HNASCKPT":
        sys.exit(f"{path}: not an hnas checkpoint (bad magic)")
    version, header_length, data_length, header_crc, preamble_crc = struct.unpack_from("<IIQII", blob, 8)
    if version != 1:
        sys.exit(f"{path}: checkpoint format version {version}, this reader knows 1")
    if crc32c(blob[:28]) != preamble_crc:
        sys.exit(f"{path}: preamble checksum mismatch")
    header_bytes = blob[32:32 + header_length]
    if crc32c(header_bytes) != header_crc:
        sys.exit(f"{path}: header checksum mismatch")
    start = (32 + header_length + 63) // 64 * 64
    if len(blob) != start + data_length:
        sys.exit(f"{path}: {len(blob)} bytes, the preamble says {start + data_length}")
    header = json.loads(header_bytes.decode("utf-8"))
    view = memoryview(blob)
    arrays = {}
    for entry in header["entries"]:
        begin = start + entry["offset"]
        raw = view[begin:begin + entry["length"]]
        if verify_crc and crc32c(raw) != entry["crc32c"]:
            sys.exit(f"{path}: entry {entry['name']}: checksum mismatch")
        if entry["dtype"] == "bytes":
            arrays[entry["name"]] = bytes(raw)
            continue
        dtype = {"f32": "<f4", "i32": "<i4"}[entry["dtype"]]
        array = np.frombuffer(raw, dtype=dtype).reshape(entry["shape"])
        arrays[entry["name"]] = array.copy() if copy else array
    return header["metadata"], arrays


# ---- the models -----------------------------------------------------------------------------------
def linear(in_features, out_features, bias=True):
    """hnas's nn::Linear: Xavier-uniform weight (out, in), zero bias."""
    layer = nn.Linear(in_features, out_features, bias=bias)
    nn.init.xavier_uniform_(layer.weight)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def embedding(rows, width, stddev):
    table = nn.Embedding(rows, width)
    nn.init.normal_(table.weight, 0.0, stddev)
    return table


class Masks:
    """Which entries of one attention's scores are allowed, (B, 1, Lq, Lk): real keys of real queries,
    and in causal self-attention keys at or before the query."""

    def __init__(self, key_valid, query_valid, causal=False):
        self.allowed = (key_valid[:, None, None, :] > 0.5) & (query_valid[:, None, :, None] > 0.5)
        if causal:
            lq, lk = query_valid.shape[1], key_valid.shape[1]
            self.allowed = self.allowed & torch.ones(lq, lk, dtype=torch.bool).tril()


class HybridNorm(nn.Module):
    """HNAS: u*DNAS + (1-u)*LNAS with u = sigmoid(theta), one theta per head."""

    def __init__(self, shapes):
        super().__init__()
        u0 = shapes.hybrid_init
        self.hybrid_theta = nn.Parameter(torch.full((shapes.heads,), math.log(u0 / (1 - u0))))

    def forward(self, s, masks):
        return torch_attention.hnas(s, masks.allowed, self.hybrid_theta)


class Attention(nn.Module):
    def __init__(self, shapes, kind, dropout):
        super().__init__()
        width = shapes.width
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (linear(width, width) for _ in range(4))
        self.kind = kind
        if kind == "hnas":
            self.norm = HybridNorm(shapes)
        self.dropout = dropout
        self.heads, self.width = shapes.heads, width

    def split(self, t):  # (B, T, D) -> (B, H, T, K)
        return t.view(t.shape[0], t.shape[1], self.heads, self.width // self.heads).transpose(1, 2)

    def forward(self, x, memory, masks):
        q = self.split(self.q_proj(x))
        k = self.split(self.k_proj(memory))
        v = self.split(self.v_proj(memory))
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.width // self.heads))
        if self.kind == "lnas":
            a = torch_attention.lnas(s, masks.allowed)
        elif self.kind == "dnas":
            a = torch_attention.dnas(s, masks.allowed)
        else:
            a = self.norm(s, masks)
        if self.dropout > 0:
            a = F.dropout(a, self.dropout, self.training)
        out = torch.matmul(a, v).transpose(1, 2).reshape(x.shape[0], x.shape[1], self.width)
        return self.out_proj(out)


class FeedForward(nn.Module):
    def __init__(self, shapes):
        super().__init__()
        self.fc1, self.fc2 = linear(shapes.width, shapes.ffn), linear(shapes.ffn, shapes.width)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # erf GELU; ffn dropout is 0 in the reference configs


class Layer(nn.Module):
    """Transformer layer of self-attention, cross-attention (decoder) and the feed-forward block, each
    x = LN(x + dropout(f(x))) (post-LN) or x = x + dropout(f(LN(x))) (pre-LN)."""

    def __init__(self, shapes, self_kind, dropout, cross=False):
        super().__init__()
        self.self_attn = Attention(shapes, self_kind, dropout)
        self.self_attn_norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        self.ffn = FeedForward(shapes)
        self.ffn_norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        if cross:
            self.cross_attn = Attention(shapes, "lnas", dropout)
            self.cross_attn_norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        self.p, self.pre_norm = dropout, shapes.norm == "pre"

    def sublayer(self, x, f, norm):
        branch = f(norm(x)) if self.pre_norm else f(x)
        if self.p > 0:
            branch = F.dropout(branch, self.p, self.training)
        return x + branch if self.pre_norm else norm(x + branch)

    def forward(self, x, self_masks, memory=None, memory_masks=None):
        h = self.sublayer(x, lambda y: self.self_attn(y, y, self_masks), self.self_attn_norm)
        if memory is not None:
            h = self.sublayer(h, lambda y: self.cross_attn(y, memory, memory_masks), self.cross_attn_norm)
        return self.sublayer(h, self.ffn, self.ffn_norm)


class Stack(nn.Module):
    def __init__(self, shapes, positions, kind, dropout, cross):
        super().__init__()
        self.positions = embedding(positions, shapes.width, 0.02)
        self.layers = nn.ModuleList(Layer(shapes, kind, dropout, cross) for _ in range(shapes.layers))


class Seq2Seq(nn.Module):
    """Encoder-decoder with one token embedding (tied output projection), hnas's Seq2SeqModel."""

    def __init__(self, kind, dropout, shapes=REFERENCE):
        super().__init__()
        if shapes.norm != "post":
            sys.exit(f"torch reference: the seq2seq twin is post-LN, not {shapes.norm}")
        self.width = shapes.width
        self.embedding = embedding(shapes.vocab, shapes.width, 1.0 / math.sqrt(shapes.width))
        self.encoder = Stack(shapes, shapes.max_source_positions, kind, dropout, cross=False)
        self.decoder = Stack(shapes, shapes.max_target_positions, "lnas", dropout, cross=True)
        self.p = dropout

    def embed(self, stack, ids):
        x = self.embedding(ids) * math.sqrt(self.width) + stack.positions.weight[:ids.shape[1]]
        return F.dropout(x, self.p, self.training) if self.p > 0 else x

    def loss(self, b):
        source_valid, target_valid = b["source_valid"], b["target_valid"]
        masks = Masks(source_valid, source_valid)
        x = self.embed(self.encoder, b["source_ids"])
        for layer in self.encoder.layers:
            x = layer(x, masks)
        self_masks = Masks(target_valid, target_valid, causal=True)
        cross_masks = Masks(source_valid, target_valid)
        y = self.embed(self.decoder, b["target_input"])
        for layer in self.decoder.layers:
            y = layer(y, self_masks, x, cross_masks)
        logits = y.reshape(-1, self.width) @ self.embedding.weight.t()
        return F.cross_entropy(logits, b["target_output"].reshape(-1), ignore_index=PAD_ID,
                               label_smoothing=LABEL_SMOOTHING)


class BertEmbeddings(nn.Module):
    def __init__(self, shapes):
        super().__init__()
        self.tokens = embedding(shapes.vocab, shapes.width, 0.02)
        self.positions = embedding(shapes.mlm_positions, shapes.width, 0.02)
        self.segments = embedding(SEGMENTS, shapes.width, 0.02)
        self.norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)


class MlmHead(nn.Module):
    def __init__(self, shapes):
        super().__init__()
        self.dense = linear(shapes.width, shapes.width)
        self.norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        self.bias = nn.Parameter(torch.zeros(shapes.vocab))


class Pooler(nn.Module):
    def __init__(self, shapes):
        super().__init__()
        self.dense = linear(shapes.width, shapes.width)


class Encoder(nn.Module):
    def __init__(self, shapes, kind, dropout):
        super().__init__()
        self.layers = nn.ModuleList(Layer(shapes, kind, dropout) for _ in range(shapes.layers))
        self.final_norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps) if shapes.norm == "pre" else None

    def forward(self, x, masks):
        for layer in self.layers:
            x = layer(x, masks)
        return self.final_norm(x) if self.final_norm is not None else x


class Bert(nn.Module):
    """hnas's BertModel: embeddings + LN, the encoder (post-LN, or pre-LN with a final LN), MLM head only at the masked positions
    (the pooler exists, as in hnas, but takes no part in the MLM loss)."""

    def __init__(self, kind, dropout, sentence_order_weight=0.0, shapes=REFERENCE):
        super().__init__()
        self.width = shapes.width
        self.embeddings = BertEmbeddings(shapes)
        self.mlm_head = MlmHead(shapes)
        self.pooler = Pooler(shapes)
        self.encoder = Encoder(shapes, kind, dropout)
        self.p = dropout
        # ALBERT's sentence-order head on the pooled [CLS] state, as the mlm task trains it when
        # train.sentence_order_weight > 0 (hnas-bench's reference model has none).
        self.sentence_order_weight = sentence_order_weight
        if sentence_order_weight > 0:
            self.sop_head = linear(shapes.width, 2)

    def loss(self, b):
        ids, e = b["input_ids"], self.embeddings
        x = e.tokens(ids) + e.positions.weight[:ids.shape[1]] + e.segments(b["segment_ids"])
        x = e.norm(x)
        if self.p > 0:
            x = F.dropout(x, self.p, self.training)
        x = self.encoder(x, Masks(b["valid"], b["valid"]))
        rows = x.reshape(-1, self.width)[b["masked_positions"]]
        # .float(): a no-op in f32; under CPU autocast (--precision bf16) torch 1.13 hands layer_norm the bf16
        # GELU output with f32 weights and stops ("expected scalar type BFloat16").
        hidden = self.mlm_head.norm(F.gelu(self.mlm_head.dense(rows)).float())
        logits = hidden @ e.tokens.weight.t() + self.mlm_head.bias
        loss = F.cross_entropy(logits, b["masked_labels"], ignore_index=PAD_ID)
        if self.sentence_order_weight > 0:
            pooled = torch.tanh(self.pooler.dense(x[:, 0]))
            loss = loss + self.sentence_order_weight * F.cross_entropy(self.sop_head(pooled), b["sentence_order"])
        return loss


# ---- batches --------------------------------------------------------------------------------------
def make_batch(task, generator):
    """Random fixed-shape batch, every position real; the same layout as hnas-bench's."""
    def random_ids(*shape):
        return torch.randint(FIRST_ORDINARY_ID, VOCAB, shape, generator=generator)

    if task == "headline":
        words = random_ids(BATCH, TARGET_LENGTH - 1)
        return {"source_ids": random_ids(BATCH, SOURCE_LENGTH),
                "source_valid": torch.ones(BATCH, SOURCE_LENGTH),
                "target_input": torch.cat([torch.full((BATCH, 1), BOS_ID), words], 1),
                "target_output": torch.cat([words, torch.full((BATCH, 1), EOS_ID)], 1),
                "target_valid": torch.ones(BATCH, TARGET_LENGTH)}
    per_row = round(MASK_FRACTION * MLM_LENGTH)
    ids = random_ids(BATCH, MLM_LENGTH)
    chosen = torch.rand(BATCH, MLM_LENGTH, generator=generator).argsort(1)[:, :per_row].sort(1).values
    positions = (chosen + torch.arange(BATCH)[:, None] * MLM_LENGTH).reshape(-1)
    labels = ids.reshape(-1)[positions].clone()
    ids.view(-1)[positions] = MASK_ID
    segments = (torch.arange(MLM_LENGTH) >= MLM_LENGTH // 2).long().expand(BATCH, -1).contiguous()
    return {"input_ids": ids, "segment_ids": segments, "valid": torch.ones(BATCH, MLM_LENGTH),
            "masked_positions": positions, "masked_labels": labels}


def load_parameters(model, arrays, path):
    """Copies every parameter of an hnas dump (the entries not under batch/) into the torch model,
    whose parameter names and shapes must be the same."""
    params = {name: array for name, array in arrays.items() if not name.startswith("batch/")}
    ours = dict(model.named_parameters())
    missing, unused = sorted(set(ours) - set(params)), sorted(set(params) - set(ours))
    if missing or unused:
        sys.exit(f"{path}: parameters do not match the torch model: missing {missing}, unused {unused}")
    with torch.no_grad():
        for name, p in ours.items():
            if tuple(p.shape) != tuple(params[name].shape):
                sys.exit(f"{path}: {name} has shape {list(params[name].shape)}, torch {list(p.shape)}")
            p.copy_(torch.tensor(params[name]))


def batch_from_checkpoint(arrays):
    batch = {}
    for name, array in arrays.items():
        if name.startswith("batch/"):
            t = torch.from_numpy(array)
            batch[name[len("batch/"):]] = t.long() if array.dtype == np.int32 else t
    return batch


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=["headline", "mlm"], default="headline")
    parser.add_argument("--kind", choices=["lnas", "dnas", "hnas"], default="lnas",
                        help="encoder self-attention (the decoder's attentions are lnas)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed training steps first")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam's constant learning rate")
    parser.add_argument("--no-dropout", action="store_true", help="every dropout rate 0")
    parser.add_argument("--load", metavar="FILE",
                        help="initial parameters and batch from `hnas-bench train --dump-initial FILE`; "
                             "task and kind are taken from it")
    parser.add_argument("--verify-crc", action="store_true", help="with --load: check every entry's CRC-32C")
    torch_peers.add_arguments(parser)
    args = parser.parse_args()
    torch_peers.check_arguments(parser, args)
    if args.steps < 0 or args.warmup < 0 or args.steps + args.warmup < 1:
        parser.error("--steps and --warmup must be >= 0 with at least one step in all")
    if args.threads < 1:
        parser.error("--threads must be >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    metadata, arrays = None, None
    if args.load:
        metadata, arrays = read_checkpoint(args.load, args.verify_crc)
        args.task, args.kind = metadata["task"], metadata["kind"]
        args.lr = metadata.get("learning_rate", args.lr)
    dropout = 0.0 if args.no_dropout else DROPOUT
    model = Seq2Seq(args.kind, dropout) if args.task == "headline" else Bert(args.kind, dropout)
    first = make_batch(args.task, generator)
    result = {"impl": "torch", "task": args.task, "kind": args.kind, "threads": torch.get_num_threads(),
              "batch": BATCH,
              # as hnas-bench counts: tokens the model reads, and the loss's targets (target or masked tokens)
              "input_tokens_per_step": BATCH * (SOURCE_LENGTH + TARGET_LENGTH if args.task == "headline" else MLM_LENGTH),
              "target_tokens_per_step": BATCH * TARGET_LENGTH if args.task == "headline"
                                        else first["masked_positions"].numel(),
              "parameters": sum(p.numel() for p in model.parameters()), "dropout": not args.no_dropout}
    if arrays is not None:
        load_parameters(model, arrays, args.load)
        first = batch_from_checkpoint(arrays)

    parameters = [p for p in model.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    model.train()
    model, optimizer = torch_peers.optimize(model, args.peer, args.precision, result, optimizer)
    parameters = [p for p in model.parameters()]  # IPEX's optimize() copies the model and may repack weights
    forward_loss = torch_peers.forward(model.loss, args.peer, args.precision, result)
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
        optimizer.zero_grad(set_to_none=True)
        loss = forward_loss(batch)
        value = loss.item()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(parameters, CLIP_NORM)
        optimizer.step()
        seconds = time.perf_counter() - start
        if not math.isfinite(value):
            sys.exit(f"torch reference: loss {value} at step {step}")
        if step >= args.warmup:
            times.append(seconds)
        else:
            warmup_times.append(seconds)
        if len(losses) < 8:
            losses.append(value)
            grad_norms.append(float(norm))
    result.update({"warmup": args.warmup, "steps": args.steps, "losses": losses, "grad_norms": grad_norms,
                   "loss0": losses[0], "warmup_ms": [1e3 * t for t in warmup_times]})
    masked = first["masked_positions"].numel() if args.task == "mlm" else 0
    flops = model_flops_per_step(args.task, masked)
    result["model_gflop_per_step"] = flops * 1e-9
    if times:
        ordered = sorted(times)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
        mean = sum(times) / n
        result.update({"step_ms_median": 1e3 * median, "step_ms_mean": 1e3 * mean, "step_ms_min": 1e3 * ordered[0],
                       "step_ms_max": 1e3 * ordered[-1], "input_tokens_per_s": result["input_tokens_per_step"] / median,
                       "input_tokens_per_s_mean": result["input_tokens_per_step"] / mean,
                       "target_tokens_per_s": result["target_tokens_per_step"] / median,
                       "model_gflop_per_s": flops / median * 1e-9})
        if args.peer == "compile" and args.warmup:
            result["first_step_s"] = warmup_times[0]
            result["compile_s"] = warmup_times[0] - median
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    result["torch"] = torch.__version__
    result["blas"] = blas_backend()
    print(json.dumps(result), flush=True)


def blas_backend():
    """The BLAS torch's process actually mapped (Debian's torch links libblas.so.3, an alternative)."""
    try:
        with open("/proc/self/maps") as maps:
            libraries = {line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line}
        return sorted(libraries)
    except OSError:
        return []


if __name__ == "__main__":
    main()
