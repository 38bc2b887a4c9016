#!/usr/bin/python3
"""PyTorch twin of hnas's beam search (docs/performance.md, Decoding): decodes the batches `hnas-bench decode` wrote
with the same trained model (its parameters are in the file), the same decoding settings and the same
search as src/decode/beam_search.cpp: every source starts with `beam` rows of which one is alive; per
step the best 2·beam extensions of a source's beams, eos ending a hypothesis only when it ranks among
the best `beam`; n-gram bans, min and max length; hypotheses ranked by log P / (tokens + 1)^A.
The decoder caches its self-attention keys and values and projects the encoder memory once, as fairseq's
incremental decoding does; beams are reordered with index_select.

    /usr/bin/python3 scripts/torch_decode.py --sources decode.hnas --threads 2

One untimed batch warms up, then one timed pass decodes every batch. Prints one JSON line: seconds,
articles/s, peak RSS and how many best hypotheses equal hnas's token for token.
scripts/bench_decode.sh runs it beside `hnas-bench decode`.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn.functional as F

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

    def __init__(self, model, memory, source_valid):
        self.cross = [(split_heads(layer.cross_attn.k_proj(memory)), split_heads(layer.cross_attn.v_proj(memory)))
                      for layer in model.decoder.layers]
        self.memory_bias = torch.where(source_valid > 0.5, 0.0, -math.inf)[:, None, None, :]
        self.self_kv = [None] * len(model.decoder.layers)
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


def decode_step(model, state, tokens):
    """Logits (N, V) of the next token after `tokens` (N,), the last of each row's prefix."""
    x = model.embedding(tokens)[:, None, :] * math.sqrt(ref.WIDTH) + model.decoder.positions.weight[state.position]
    for i, layer in enumerate(model.decoder.layers):
        a = layer.self_attn
        k, v = split_heads(a.k_proj(x)), split_heads(a.v_proj(x))
        if state.self_kv[i] is not None:
            k, v = torch.cat([state.self_kv[i][0], k], 2), torch.cat([state.self_kv[i][1], v], 2)
        state.self_kv[i] = (k, v)
        h = layer.self_attn_norm(x + a.out_proj(attend(split_heads(a.q_proj(x)), k, v)))
        c = layer.cross_attn
        memory_k, memory_v = state.cross[i]
        h = layer.cross_attn_norm(h + c.out_proj(attend(split_heads(c.q_proj(h)), memory_k, memory_v, state.memory_bias)))
        x = layer.ffn_norm(h + layer.ffn(h))
    state.position += 1
    return x[:, 0] @ model.embedding.weight.t()


def encode(model, ids, valid):
    masks = ref.Masks(valid, valid)
    x = model.embed(model.encoder, ids)
    for layer in model.encoder.layers:
        x = layer(x, masks)
    return x


def banned_tokens(tokens, n):
    """Tokens that would complete an n-gram already in `tokens` (src/decode/beam_search.cpp's rule)."""
    if n <= 0 or len(tokens) < n - 1:
        return []
    suffix = tokens[len(tokens) - (n - 1):]
    return [tokens[start + n - 1] for start in range(len(tokens) - n + 1) if tokens[start:start + n - 1] == suffix]


def beam_search(model, ids, valid, settings):
    """The best hypothesis' tokens for every row of ids (B, S)."""
    beam, eos, vocabulary = settings["beam"], settings["eos_id"], ref.VOCAB
    sources = ids.shape[0]
    limit = min(settings["max_length"], ref.MAX_TARGET_POSITIONS - 1)
    rows = torch.arange(sources).repeat_interleave(beam)
    memory = encode(model, ids, valid)
    state = DecoderState(model, memory.index_select(0, rows), valid.index_select(0, rows))
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
        log_probabilities = torch.log_softmax(decode_step(model, state, inputs).double(), dim=-1)
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
    args = parser.parse_args()
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
    model.eval()
    batches = [(torch.from_numpy(arrays[f"source/{b}/ids"]).long(), torch.from_numpy(arrays[f"source/{b}/valid"]))
               for b in range(settings["batches"])]

    with torch.inference_mode():
        beam_search(model, *batches[0], settings)
        start = time.perf_counter()
        hypotheses = [beam_search(model, ids, valid, settings) for ids, valid in batches]
        seconds = time.perf_counter() - start
    ours = [tokens for batch in hypotheses for tokens in batch]
    theirs = [tokens for batch in settings["hypotheses"] for tokens in batch]
    print(json.dumps({"impl": "torch", "beam": settings["beam"], "articles": len(ours), "batch": settings["batch"],
                      "seconds": seconds, "articles_per_s": len(ours) / seconds,
                      "generated_tokens": sum(map(len, ours)),
                      "same_as_hnas": sum(a == b for a, b in zip(ours, theirs)),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "blas": ref.blas_backend()}))


if __name__ == "__main__":
    main()
