#!/usr/bin/python3
"""PyTorch twin of hnas's beam search (docs/performance.md, Decoding): decodes the batches `hnas-bench decode` wrote
with the same trained model (its parameters are in the file), the same decoding settings and the same
search as src/decode/beam_search.cpp: every source starts with `beam` rows of which one is alive; per
step the best 2·beam extensions of a source's beams, eos ending a hypothesis only when it ranks among
the best `beam`; n-gram bans, min and max length; hypotheses ranked by log P / (tokens + 1)^A.
The decoder caches its self-attention keys and values and projects the encoder memory once, as fairseq's
incremental decoding does; beams are reordered with index_select.

    /usr/bin/python3 scripts/torch_decode.py --sources decode.hnas --threads 2
    ~/.cache/hnas-peers/torch-latest/bin/python scripts/torch_decode.py --sources decode.hnas --peer compile --precision bf16

--peer and --precision (scripts/torch_peers.py) pick how PyTorch runs the model: eager; compile, which
compiles the model's two functions, the encoder (with the memory's keys and values for every decoder layer)
and one decoder step over the cache, and leaves the beam search between them eager (its Python lists,
top-k, n-gram bans and reordering would break the graph at every step); ipex, IPEX's optimize() of the
model in eval mode. bf16: both functions under torch.autocast("cpu", torch.bfloat16); the scores stay f64.

One untimed batch warms up, then one timed pass decodes every batch. Prints one JSON line: seconds,
articles/s, peak RSS and how many best hypotheses equal hnas's token for token; for torch.compile, whose
batch and cache sizes change, also the graphs compiled while warming up, the batches of the timed pass
during which it compiled a graph and their seconds, and the articles/s of the batches that compiled
nothing (articles_per_s_without_compiling). scripts/bench_decode.sh runs it beside `hnas-bench decode`.
"""
import argparse
import functools
import json
import math
import resource
import time

import torch
import torch.nn.functional as F

import torch_peers
import torch_real
import torch_reference as ref

IMPOSSIBLE = -math.inf


def split_heads(t):  # (N, T, D) -> (N, H, T, K)
    return t.view(t.shape[0], t.shape[1], ref.HEADS, ref.WIDTH // ref.HEADS).transpose(1, 2)


def merge_heads(t):  # (N, H, T, K) -> (N, T, D)
    return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], ref.WIDTH)


class DecoderState:
    """The encoder memory's projected keys and values per decoder layer, its padding as an additive
    bias, and the self-attention keys and values of the tokens fed so far."""

    def __init__(self, cross, source_valid):
        self.cross = cross
        self.memory_bias = torch.where(source_valid > 0.5, 0.0, -math.inf)[:, None, None, :]
        self.self_kv = [None] * len(cross)
        self.position = 0

    def keep_rows(self, rows):
        self.cross = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.cross]
        self.memory_bias = self.memory_bias.index_select(0, rows)
        self.self_kv = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.self_kv]


def attend(q, k, v, bias=None):
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(ref.WIDTH // ref.HEADS))
    if bias is not None:
        s = s + bias
    return merge_heads(torch.matmul(torch.softmax(s, dim=-1), v))


def decode_step(model, tokens, position, self_kv, cross, memory_bias):
    """Logits (N, V) of the next token after `tokens` (N,), the last of each row's prefix, whose position's
    embedding is `position` (D,), and the self-attention keys and values with this token's appended."""
    x = model.embedding(tokens)[:, None, :] * math.sqrt(ref.WIDTH) + position
    appended = []
    for i, layer in enumerate(model.decoder.layers):
        a = layer.self_attn
        k, v = split_heads(a.k_proj(x)), split_heads(a.v_proj(x))
        if self_kv[i] is not None:
            k, v = torch.cat([self_kv[i][0], k], 2), torch.cat([self_kv[i][1], v], 2)
        appended.append((k, v))
        h = layer.self_attn_norm(x + a.out_proj(attend(split_heads(a.q_proj(x)), k, v)))
        c = layer.cross_attn
        memory_k, memory_v = cross[i]
        h = layer.cross_attn_norm(h + c.out_proj(attend(split_heads(c.q_proj(h)), memory_k, memory_v, memory_bias)))
        x = layer.ffn_norm(h + layer.ffn(h))
    return x[:, 0] @ model.embedding.weight.t(), appended


def encode(model, ids, valid, rows):
    """The encoder memory of ids (B, S), repeated to `rows` (its row for each beam), projected to every
    decoder layer's cross-attention keys and values."""
    masks = ref.Masks(valid, valid)
    x = model.embed(model.encoder, ids)
    for layer in model.encoder.layers:
        x = layer(x, masks)
    memory = x.index_select(0, rows)
    return [(split_heads(layer.cross_attn.k_proj(memory)), split_heads(layer.cross_attn.v_proj(memory)))
            for layer in model.decoder.layers]


def banned_tokens(tokens, n):
    """Tokens that would complete an n-gram already in `tokens` (src/decode/beam_search.cpp's rule)."""
    if n <= 0 or len(tokens) < n - 1:
        return []
    suffix = tokens[len(tokens) - (n - 1):]
    return [tokens[start + n - 1] for start in range(len(tokens) - n + 1) if tokens[start:start + n - 1] == suffix]


def beam_search(model, run, ids, valid, settings):
    """The best hypothesis' tokens for every row of ids (B, S); run has the model's encode and decode_step
    as the peer calls them."""
    beam, eos, vocabulary = settings["beam"], settings["eos_id"], ref.VOCAB
    sources = ids.shape[0]
    limit = min(settings["max_length"], ref.MAX_TARGET_POSITIONS - 1)
    rows = torch.arange(sources).repeat_interleave(beam)
    state = DecoderState(run["encode"](ids, valid, rows), valid.index_select(0, rows))
    active = list(range(sources))
    beam_log_probabilities = torch.full((sources * beam,), IMPOSSIBLE, dtype=torch.float64)
    beam_log_probabilities[::beam] = 0.0
    beam_tokens = [[] for _ in range(sources * beam)]
    finished = [[] for _ in range(sources)]
    keep = min(2 * beam, vocabulary)
    for step in range(limit + 1):
        if not active:
            break
        inputs = torch.tensor([t[-1] if t else settings["bos_id"] for t in beam_tokens])
        logits, state.self_kv = run["decode_step"](inputs, model.decoder.positions.weight[state.position], state.self_kv,
                                                   state.cross, state.memory_bias)
        state.position += 1
        log_probabilities = torch.log_softmax(logits.double(), dim=-1)
        if step < settings["min_length"]:
            log_probabilities[:, eos] = IMPOSSIBLE
        if step == limit:  # out of room: only eos remains
            eos_column = log_probabilities[:, eos].clone()
            log_probabilities.fill_(IMPOSSIBLE)
            log_probabilities[:, eos] = eos_column
        for row, tokens in enumerate(beam_tokens):
            for token in banned_tokens(tokens, settings["no_repeat_ngram"]):
                log_probabilities[row, token] = IMPOSSIBLE
        candidates = (beam_log_probabilities[:, None] + log_probabilities).view(len(active), beam * vocabulary)
        top_values, top_indices = candidates.topk(keep, dim=1)
        top_values, top_indices = top_values.tolist(), top_indices.tolist()
        next_rows, next_active, next_log_probabilities, next_tokens = [], [], [], []
        for a, source in enumerate(active):
            done, continuing = finished[source], []
            ranked = [(lp, index) for lp, index in zip(top_values[a], top_indices[a]) if lp != IMPOSSIBLE]
            for rank, (lp, index) in enumerate(ranked):
                if len(continuing) == beam:
                    break
                row, token = a * beam + index // vocabulary, index % vocabulary
                if token != eos:
                    continuing.append((lp, row, token))
                elif rank < beam and len(done) < beam:
                    tokens = beam_tokens[row]
                    done.append((lp / (len(tokens) + 1) ** settings["length_penalty"], tokens))
            if len(done) >= beam or step == limit or not continuing:
                continue
            next_active.append(source)
            for k in range(beam):
                lp, row, token = continuing[k] if k < len(continuing) else (IMPOSSIBLE, a * beam, eos)
                next_rows.append(row)
                next_log_probabilities.append(lp)
                next_tokens.append(beam_tokens[row] + [token])
        active, beam_tokens = next_active, next_tokens
        beam_log_probabilities = torch.tensor(next_log_probabilities, dtype=torch.float64)
        if active:
            state.keep_rows(torch.tensor(next_rows))
    best = []
    for done in finished:
        ranked = sorted(done, key=lambda scored: -scored[0])  # stable, as hnas's stable_sort
        best.append(ranked[0][1] if ranked else [])
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", required=True, help="the file `hnas-bench decode --out` wrote")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    torch_peers.add_arguments(parser)
    args = parser.parse_args()
    torch_peers.check_arguments(parser, args)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    torch.set_num_threads(args.threads)

    settings, arrays = ref.read_checkpoint(args.sources)
    config = settings["config"]
    if config["task"] != "headline":
        raise SystemExit(f"torch_decode: {args.sources} holds a {config['task']} model; only headline models decode")
    torch_real.check_config(config)
    model = ref.Seq2Seq(config["model"]["attention"]["encoder"]["kind"], 0.0)
    ref.load_parameters(model, {n: a for n, a in arrays.items() if not n.startswith("source/")}, args.sources)
    result = {"impl": "torch", "beam": settings["beam"], "batch": settings["batch"]}
    model, _ = torch_peers.optimize(model.eval(), args.peer, args.precision, result)
    run = {name: torch_peers.forward(functools.partial(function, model), args.peer, args.precision, result)
           for name, function in (("encode", encode), ("decode_step", decode_step))}
    batches = [(torch.from_numpy(arrays[f"source/{b}/ids"]).long(), torch.from_numpy(arrays[f"source/{b}/valid"]))
               for b in range(settings["batches"])]

    with torch.inference_mode():
        beam_search(model, run, *batches[0], settings)
        timer = torch_peers.Timer()
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
    result.update({"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "torch": torch.__version__.split("+")[0], "blas": ref.blas_backend()})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
