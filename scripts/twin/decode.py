"""hnas's beam search (src/decode/beam_search.cpp) over the twin's encoder-decoder (twin.model.Seq2Seq):
every source starts with `beam` rows of which one is alive; per step the best 2·beam extensions of a
source's beams, eos ending a hypothesis only when it ranks among the best `beam`; n-gram bans, min and max
length; hypotheses ranked by log P / (tokens + 1)^A. The decoder caches its self-attention keys and values
and projects the encoder memory once, as fairseq's incremental decoding does, but once a source, not once
a beam, and attends a source's beams to it as one product (hnas's start_decoding and grouped
cross-attention); the first step decodes each source once, its beams all starting from bos; beams are
reordered with index_select. The decoder's attentions are lnas, written here in their cached form.
"""
import math

import torch

from twin.model import merge_heads, split_heads

IMPOSSIBLE = -math.inf


class DecoderState:
    """The encoder memory's projected keys and values per decoder layer and its padding as an additive
    bias, a row a source being decoded; the self-attention keys and values of the tokens fed so far, a
    row a hypothesis."""

    def __init__(self, cross, source_valid):
        self.cross = cross
        self.memory_bias = torch.where(source_valid > 0.5, 0.0, -math.inf)[:, None, None, :]
        self.self_kv = [None] * len(cross)
        self.position = 0

    def keep_rows(self, rows, sources):
        """Keeps the hypotheses `rows` and the memory's rows `sources`, in order."""
        if not torch.equal(sources, torch.arange(self.memory_bias.shape[0])):
            self.cross = [(k.index_select(0, sources), v.index_select(0, sources)) for k, v in self.cross]
            self.memory_bias = self.memory_bias.index_select(0, sources)
        self.self_kv = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.self_kv]


def attend(q, k, v, bias=None):
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if bias is not None:
        s = s + bias
    return merge_heads(torch.matmul(torch.softmax(s, dim=-1), v))


def decode_step(model, tokens, position, self_kv, cross, memory_bias):
    """Logits (N, V) of the next token after `tokens` (N,), the last of each row's prefix, whose position's
    embedding is `position` (D,), and the self-attention keys and values with this token's appended."""
    x = model.embedding(tokens)[:, None, :] * math.sqrt(model.width) + position
    appended = []
    for i, layer in enumerate(model.decoder.layers):
        a, heads = layer.self_attn, model.heads
        k, v = split_heads(a.k_proj(x), heads), split_heads(a.v_proj(x), heads)
        if self_kv[i] is not None:
            k, v = torch.cat([self_kv[i][0], k], 2), torch.cat([self_kv[i][1], v], 2)
        appended.append((k, v))
        h = layer.self_attn_norm(x + a.out_proj(attend(split_heads(a.q_proj(x), heads), k, v)))
        c = layer.cross_attn
        memory_k, memory_v = cross[i]
        # a source's G beams as the G queries of one product over its memory: (M, H, G, K)
        q = c.q_proj(h).reshape(memory_k.shape[0], -1, heads, model.width // heads).transpose(1, 2)
        h = layer.cross_attn_norm(h + c.out_proj(attend(q, memory_k, memory_v, memory_bias).reshape(h.shape)))
        x = layer.ffn_norm(h + layer.ffn(h))
    return x[:, 0] @ model.embedding.weight.t(), appended


def encode(model, ids, valid):
    """The encoder memory of ids (B, S) projected to every decoder layer's cross-attention keys and values,
    once a source, as hnas's start_decoding does."""
    memory = model.encode(ids, valid)
    heads = model.heads
    return [(split_heads(layer.cross_attn.k_proj(memory), heads), split_heads(layer.cross_attn.v_proj(memory), heads))
            for layer in model.decoder.layers]


def banned_tokens(tokens, n):
    """Tokens that would complete an n-gram already in `tokens` (src/decode/beam_search.cpp's rule)."""
    if n <= 0 or len(tokens) < n - 1:
        return []
    suffix = tokens[len(tokens) - (n - 1):]
    return [tokens[start + n - 1] for start in range(len(tokens) - n + 1) if tokens[start:start + n - 1] == suffix]


def beam_search(model, run, ids, valid, settings):
    """The best hypothesis' tokens for every row of ids (B, S). run has the model's encode and decode_step
    (this module's, with the model bound) as the caller runs them (compiled, under autocast); settings are
    hnas's: beam, bos_id, eos_id, min_length, max_length, no_repeat_ngram, length_penalty."""
    beam, eos, vocabulary = settings["beam"], settings["eos_id"], model.embedding.num_embeddings
    sources = ids.shape[0]
    limit = min(settings["max_length"], model.decoder.positions.num_embeddings - 1)
    state = DecoderState(run["encode"](ids, valid), valid)
    active = list(range(sources))
    beam_log_probabilities = torch.full((sources * beam,), IMPOSSIBLE, dtype=torch.float64)
    beam_log_probabilities[::beam] = 0.0
    beam_tokens = [[] for _ in range(sources * beam)]
    finished = [[] for _ in range(sources)]
    keep = min(2 * beam, vocabulary)
    for step in range(limit + 1):
        if not active:
            break
        # every beam of a source starts from bos alone: the first step decodes each source once
        rows_a_state_row = beam if step == 0 else 1
        inputs = torch.tensor([settings["bos_id"]] * sources if step == 0 else [t[-1] for t in beam_tokens])
        logits, state.self_kv = run["decode_step"](inputs, model.decoder.positions.weight[state.position], state.self_kv,
                                                   state.cross, state.memory_bias)
        if step == 0:
            logits = logits.repeat_interleave(beam, 0)
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
        next_rows, next_memory_rows, next_active, next_log_probabilities, next_tokens = [], [], [], [], []
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
            next_memory_rows.append(a)
            for k in range(beam):
                lp, row, token = continuing[k] if k < len(continuing) else (IMPOSSIBLE, a * beam, eos)
                next_rows.append(row)
                next_log_probabilities.append(lp)
                next_tokens.append(beam_tokens[row] + [token])
        active, beam_tokens = next_active, next_tokens
        beam_log_probabilities = torch.tensor(next_log_probabilities, dtype=torch.float64)
        if active:
            state.keep_rows(torch.tensor(next_rows) // rows_a_state_row, torch.tensor(next_memory_rows))
    # sorted is stable, as hnas's stable_sort: of equal scores the first finished wins
    return [sorted(done, key=lambda scored: -scored[0])[0][1] if done else [] for done in finished]
