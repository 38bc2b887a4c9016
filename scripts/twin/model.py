"""The PyTorch twin of hnas's models, written once: the attention kinds (src/nn/attention_kinds/), the
attention layer with its priors (src/nn/attention.cpp), the Transformer layer (src/nn/transformer_layer.cpp),
and the encoder-decoder and BERT-style models (src/models/) with hnas's parameter names, so that an hnas
checkpoint loads by name. scripts/make_fixtures.py runs them in float64 (functional_call), and
scripts/torch_reference.py trains them in float32.

Scores s are (B, H, Lq, Lk); `allowed` is a boolean mask broadcastable to them (a real query, a real key
and, in causal self-attention, a key at or before the query). Weights are exactly 0 where not allowed,
and a query with nothing allowed has a zero row. Masked entries are replaced (torch.where), never added
to, so no -inf or NaN can reach a gradient.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG = -1e9  # a masked score: finite, so a row with nothing allowed never becomes NaN; exact in float32
PAD_ID, BOS_ID, EOS_ID, CLS_ID, SEP_ID, MASK_ID, FIRST_PIECE_ID = 0, 2, 3, 4, 5, 6, 7  # src/data/tokenizer.h
MASKED_SCORE = -1e9  # ops::kMaskedScore, added to the span head's logits at padding


# ---- the attention kinds ---------------------------------------------------------------------------
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
    """Paper 000 Eq. 6-8: normalize over the queries per key, then over the keys per query."""
    return softmax_over_keys(s - masked_logsumexp(s, allowed, -2), allowed)


def hnas(s, allowed, theta):
    """Paper 004 Eq. 12: u_h dnas + (1 - u_h) lnas, u_h = sigmoid(theta_h) per head."""
    u = torch.sigmoid(theta).reshape(1, -1, 1, 1)
    return u * dnas(s, allowed) + (1 - u) * lnas(s, allowed)


def sinkhorn(s, allowed, iterations):
    log_a = masked(s, allowed)  # re-masked after each step: exp never sees a huge entry
    for _ in range(iterations):
        log_a = masked(log_a - masked_logsumexp(log_a, allowed, -2), allowed)
        log_a = masked(log_a - masked_logsumexp(log_a, allowed, -1), allowed)
    return zero_outside(torch.exp(log_a), allowed)


def dnas_causal(s, allowed):
    """dnas with the query-axis logsumexp over the queries 0..i only (a prefix), so no query sees later ones."""
    lq = s.shape[-2]
    prefix = torch.ones((lq, lq), dtype=torch.bool).tril()          # [i, i'] = i' <= i
    both = allowed.unsqueeze(-3) & prefix.reshape(1, 1, lq, lq, 1)  # (B, H, i, i', j)
    c = torch.logsumexp(masked(s.unsqueeze(-3).expand(both.shape), both), dim=-2)
    return softmax_over_keys(s - c, allowed)


def nap(s, allowed, gain, bias, eps, denominator="sqrt_variance_eps"):
    """Paper 002's NAP: the scores standardized per query, times a gain plus a bias per head. denominator
    sqrt_variance_eps divides by sqrt(var + eps); std_plus_eps by sigma + eps, as paper 002's code
    (normalize_masked in OliverRichter/normalized-attention) does."""
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


def normalize(kind, s, allowed, norm=None, iterations=3, eps=1e-5, denominator="sqrt_variance_eps"):
    """The weights of `kind` (all but ot) on scores s; norm holds the kind's parameters: hybrid_theta (hnas),
    gain and bias (nap)."""
    if kind == "hnas":
        return hnas(s, allowed, norm.hybrid_theta)
    if kind == "sinkhorn":
        return sinkhorn(s, allowed, iterations)
    if kind == "nap":
        return nap(s, allowed, norm.gain, norm.bias, eps, denominator)
    if kind not in ("lnas", "dnas", "dnas_causal", "non"):
        raise ValueError(f"attention kind {kind}")
    return {"lnas": lnas, "dnas": dnas, "dnas_causal": dnas_causal, "non": non}[kind](s, allowed)


def relative_position_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's _relative_position_bucket for one relative position rel = key - query."""
    bucket = 0
    if bidirectional:
        nb = num_buckets // 2
        bucket += nb if rel > 0 else 0
        n = abs(rel)
    else:
        nb = num_buckets
        n = max(-rel, 0)
    max_exact = nb // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact))
    return bucket + min(nb - 1, large)


def bucket_matrix(lq, lk, prior):
    """bucket(j - i) for every query i and key j, (Lq, Lk) int32, of a prior {num_buckets, max_distance,
    bidirectional}."""
    return torch.tensor([[relative_position_bucket(j - i, prior["bidirectional"], prior["num_buckets"],
                                                   prior["max_distance"]) for j in range(lk)] for i in range(lq)],
                        dtype=torch.int32)


def split_heads(t, heads):  # (B, L, D) -> (B, H, L, K)
    b, length, d = t.shape
    return t.reshape(b, length, heads, d // heads).transpose(1, 2)


def merge_heads(t):  # (B, H, L, K) -> (B, L, D)
    b, h, length, k = t.shape
    return t.transpose(1, 2).reshape(b, length, h * k)


class Masks:
    """Where one attention may look, (B, H, Lq, Lk): real keys of real queries and, with causal, keys at or
    before the query; and the keys' 0/1 validity (B, Lk), which the context prior and pooling read."""

    def __init__(self, key_valid, query_valid, heads, causal=False):
        batch = key_valid.shape[0]
        allowed = (query_valid.reshape(batch, 1, -1, 1) == 1) & (key_valid.reshape(batch, 1, 1, -1) == 1)
        if causal:
            allowed = allowed & torch.ones((query_valid.shape[-1], key_valid.shape[-1]), dtype=torch.bool).tril()
        self.allowed = allowed.expand(batch, heads, -1, -1)
        self.key_valid = key_valid


# ---- the attention layer ---------------------------------------------------------------------------
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


class ContextPreference(nn.Module):
    """Paper 003 section 7's context-dependent preference (src/nn/context_preference.h): per head,
    w_h . tanh(W_key x_j + b + W_context s), s the mean of the real inputs; (B, H, 1, Lk)."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.key_proj = linear(width, hidden)
        self.context_proj = linear(width, hidden, bias=False)
        self.head_weights = nn.Parameter(torch.zeros(heads, hidden))  # zero: u starts uniform

    def forward(self, memory, key_valid):
        real = key_valid.reshape(key_valid.shape[0], -1, 1)
        summary = (memory * real).sum(1, keepdim=True) / real.sum(1, keepdim=True).clamp(min=1.0)
        hidden = torch.tanh(self.key_proj(memory) + self.context_proj(summary))
        return (hidden @ self.head_weights.transpose(0, 1)).permute(0, 2, 1).unsqueeze(2)


class Attention(nn.Module):
    """hnas's MultiHeadAttention with one kind's normalization. Linear layers compute y = x W^T + b;
    S = alpha q k^T / sqrt(K) (without the 1/sqrt(K) for score_scale "none"), plus log u, the priors'
    log preference (the relative-position prior and the context preference) before normalizing;
    out = merge(A v) W_o^T + b_o. values=False: paper 004's multi-view fusion (App. B), whose values are the
    secondary view's untransformed features, merge(A memory). ot (paper 003 Eq. 25): the heads' keys are
    the templates, compared with each other at the scores' scale, the priors its preference u."""

    def __init__(self, width, heads, kind="lnas", iterations=3, eps=1e-5, denominator="sqrt_variance_eps",
                 score_scale="sqrt_k", alpha=1.0, prior=None, context_prior=None, hybrid_init=0.5, values=True,
                 dropout=0.0):
        super().__init__()
        self.q_proj, self.k_proj = linear(width, width), linear(width, width)
        if values:
            self.v_proj, self.out_proj = linear(width, width), linear(width, width)
        if kind == "hnas":
            self.norm = nn.Module()
            self.norm.hybrid_theta = nn.Parameter(torch.full((heads,), math.log(hybrid_init / (1 - hybrid_init))))
        if kind == "nap":
            self.norm = nn.Module()
            self.norm.gain, self.norm.bias = nn.Parameter(torch.ones(heads)), nn.Parameter(torch.zeros(heads))
        if prior is not None:
            self.relative_bias = nn.Embedding(prior["num_buckets"], heads)
            nn.init.zeros_(self.relative_bias.weight)
        if context_prior is not None:
            self.context_prior = ContextPreference(width, heads, context_prior["hidden"])
        self.kind, self.heads, self.iterations, self.eps, self.denominator = kind, heads, iterations, eps, denominator
        self.scaled, self.alpha, self.prior, self.values, self.dropout = score_scale != "none", alpha, prior, values, dropout

    def log_preference(self, memory, key_valid, lq, lk):
        """log u of the priors turned on: the relative-position prior (1, H, Lq, Lk) plus the context
        preference (B, H, 1, Lk); None with neither."""
        total = None
        if self.prior is not None:
            buckets = bucket_matrix(lq, lk, self.prior).long()
            total = self.relative_bias.weight[buckets].permute(2, 0, 1).unsqueeze(0)
        if hasattr(self, "context_prior"):
            context = self.context_prior(memory, key_valid)
            total = context if total is None else total + context
        return total

    def forward(self, x, memory, masks, between=None):
        """(output (B, Lq, D), weights A, scores S); between, if given, maps the merged heads before out_proj."""
        q, k = split_heads(self.q_proj(x), self.heads), split_heads(self.k_proj(memory), self.heads)
        lq, lk = q.shape[-2], k.shape[-2]
        log_u = self.log_preference(memory, masks.key_valid, lq, lk)
        if self.kind == "ot":
            scale = 1.0 / math.sqrt(x.shape[-1] // self.heads)
            s = q @ k.transpose(-1, -2) * scale
            similarity = k @ k.transpose(-1, -2) * scale
            a = ot(s, masks.allowed, similarity, None if log_u is None else log_u.expand(s.shape), self.alpha)
        else:
            s = q @ k.transpose(-1, -2)
            if self.alpha != 1.0:
                s = self.alpha * s
            if self.scaled:
                s = s / math.sqrt(x.shape[-1] // self.heads)
            if log_u is not None:
                s = s + log_u
            a = normalize(self.kind, s, masks.allowed, getattr(self, "norm", None), self.iterations, self.eps,
                          self.denominator)
        if self.dropout > 0:
            a = F.dropout(a, self.dropout, self.training)
        if not self.values:
            return merge_heads(a @ split_heads(memory, self.heads)), a, s
        heads = merge_heads(a @ split_heads(self.v_proj(memory), self.heads))
        return self.out_proj(heads if between is None else between(heads)), a, s


# ---- the Transformer layer -------------------------------------------------------------------------
class FeedForward(nn.Module):
    """fc2(gelu(fc1(x))), GELU in its erf form; paper 002's MTE block normalizes the hidden layer first."""

    def __init__(self, width, hidden, hidden_norm=False, eps=1e-5):
        super().__init__()
        self.fc1, self.fc2 = linear(width, hidden), linear(hidden, width)
        if hidden_norm:
            self.hidden_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        hidden = self.fc1(x)
        if hasattr(self, "hidden_norm"):
            hidden = self.hidden_norm(hidden)
        return self.fc2(F.gelu(hidden))


class Layer(nn.Module):
    """hnas's TransformerLayer: the mixer (self-attention, or paper 002's sum or max pooling over the real
    positions), cross-attention in a decoder, and the feed-forward block, each sublayer f placed by norm:
    post x = LN(x + f(x)); pre x = x + f(LN(x)); mte (paper 002 App. D) x = x + LN(f(x)), its attention's
    merged heads normalized (NON: by its own 1/sqrt(n)) and passed through GELU before out_proj.
    attention: the self-attention's options (Attention's keywords); dropout on the weights and branches."""

    def __init__(self, width, heads, ffn, kind="lnas", norm="post", mixer="attention", cross_kind=None,
                 attention=None, dropout=0.0, eps=1e-5, hybrid_init=0.5):
        super().__init__()
        if mixer == "attention":
            self.self_attn = Attention(width, heads, kind, hybrid_init=hybrid_init, dropout=dropout,
                                       **(attention or {}))
        self.self_attn_norm = nn.LayerNorm(width, eps=eps)
        self.ffn = FeedForward(width, ffn, norm == "mte", eps)
        self.ffn_norm = nn.LayerNorm(width, eps=eps)
        if cross_kind is not None:
            self.cross_attn = Attention(width, heads, cross_kind, hybrid_init=hybrid_init, dropout=dropout)
            self.cross_attn_norm = nn.LayerNorm(width, eps=eps)
        if norm == "mte" and mixer == "attention" and kind != "non":
            self.self_attn_hidden_norm = nn.LayerNorm(width, eps=eps)
        self.kind, self.norm, self.mixer, self.p = kind, norm, mixer, dropout

    def sublayer(self, x, f, norm):
        branch = f(norm(x)) if self.norm == "pre" else f(x)
        if self.p > 0:
            branch = F.dropout(branch, self.p, self.training)
        if self.norm == "post":
            return norm(x + branch)
        return x + (norm(branch) if self.norm == "mte" else branch)

    def mix(self, h, masks):
        real = masks.key_valid.unsqueeze(-1)  # (B, L, 1)
        if self.mixer == "sum":
            return (h * real).sum(dim=1, keepdim=True) * real
        if self.mixer == "max":
            return (h + (real - 1) * 1e9).max(dim=1, keepdim=True).values * real
        between = None
        if self.norm == "mte":
            def between(heads):
                return F.gelu(heads if self.kind == "non" else self.self_attn_hidden_norm(heads))
        return self.self_attn(h, h, masks, between)[0]

    def share(self, layer):
        """hnas's model.share_encoder_decoder (src/nn/transformer_layer.h): this decoder layer runs on encoder
        `layer`'s weights, its self- and cross-attention on that layer's self-attention projections, its
        feed-forward and norms the same modules; only its cross-attention's norm stays its own."""
        for attention in (self.self_attn, self.cross_attn):
            for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
                setattr(attention, name, getattr(layer.self_attn, name))
        self.self_attn_norm, self.ffn, self.ffn_norm = layer.self_attn_norm, layer.ffn, layer.ffn_norm

    def forward(self, x, masks, memory=None, memory_masks=None):
        h = self.sublayer(x, lambda y: self.mix(y, masks), self.self_attn_norm)
        if memory is not None:
            h = self.sublayer(h, lambda y: self.cross_attn(y, memory, memory_masks)[0], self.cross_attn_norm)
        return self.sublayer(h, self.ffn, self.ffn_norm)


# ---- the models ------------------------------------------------------------------------------------
class Shapes:
    """A model's sizes and choices. norm is where layer norm sits: "post" (x = LN(x + f(x))) or "pre"
    (x = x + f(LN(x)), with a final LN after the stack, hnas's encoder.final_norm)."""

    def __init__(self, width, heads, ffn, layers, vocab, positions, norm="post", hybrid_init=0.5, ln_eps=1e-5,
                 source_positions=None, target_positions=None):
        self.width, self.heads, self.ffn, self.layers, self.vocab = width, heads, ffn, layers, vocab
        self.positions, self.norm, self.hybrid_init, self.ln_eps = positions, norm, hybrid_init, ln_eps
        self.source_positions = source_positions or positions
        self.target_positions = target_positions or positions

    def layer(self, kind, dropout, cross_kind=None):
        return Layer(self.width, self.heads, self.ffn, kind, self.norm, cross_kind=cross_kind, dropout=dropout,
                     eps=self.ln_eps, hybrid_init=self.hybrid_init)


class Stack(nn.Module):
    def __init__(self, shapes, positions, kind, dropout, cross_kind=None):
        super().__init__()
        self.positions = embedding(positions, shapes.width, 0.02)
        self.layers = nn.ModuleList(shapes.layer(kind, dropout, cross_kind) for _ in range(shapes.layers))


class Seq2Seq(nn.Module):
    """hnas's Seq2SeqModel: one token embedding, times sqrt(D), plus learned positions; the encoder (its
    self-attention of `kind`) and the decoder (lnas, causal, then cross-attention), post-LN; the output
    projection tied to the embedding; cross-entropy with label smoothing over the non-padding targets.
    shared: each decoder layer runs on its encoder layer's weights (Layer.share); torch names a shared
    parameter by its first place, the encoder's, as hnas does."""

    def __init__(self, shapes, kind, dropout=0.0, label_smoothing=0.1, shared=False):
        super().__init__()
        if shapes.norm != "post":
            raise ValueError(f"the seq2seq twin is post-LN, not {shapes.norm}")
        self.width, self.heads, self.p, self.label_smoothing = shapes.width, shapes.heads, dropout, label_smoothing
        self.embedding = embedding(shapes.vocab, shapes.width, 1.0 / math.sqrt(shapes.width))
        self.encoder = Stack(shapes, shapes.source_positions, kind, dropout)
        self.decoder = Stack(shapes, shapes.target_positions, "lnas", dropout, cross_kind="lnas")
        if shared:
            for decoder_layer, encoder_layer in zip(self.decoder.layers, self.encoder.layers):
                decoder_layer.share(encoder_layer)

    def embed(self, stack, ids):
        x = self.embedding(ids) * math.sqrt(self.width) + stack.positions.weight[:ids.shape[1]]
        return F.dropout(x, self.p, self.training) if self.p > 0 else x

    def encode(self, source_ids, source_valid):
        x = self.embed(self.encoder, source_ids)
        masks = Masks(source_valid, source_valid, self.heads)
        for layer in self.encoder.layers:
            x = layer(x, masks)
        return x

    def forward(self, b):
        """(logits (B*T, V), loss) of a batch {source_ids, source_valid, target_input, target_output, target_valid}."""
        memory = self.encode(b["source_ids"], b["source_valid"])
        self_masks = Masks(b["target_valid"], b["target_valid"], self.heads, causal=True)
        cross_masks = Masks(b["source_valid"], b["target_valid"], self.heads)
        y = self.embed(self.decoder, b["target_input"])
        for layer in self.decoder.layers:
            y = layer(y, self_masks, memory, cross_masks)
        logits = y.reshape(-1, self.width) @ self.embedding.weight.t()
        return logits, F.cross_entropy(logits, b["target_output"].reshape(-1), ignore_index=PAD_ID,
                                       label_smoothing=self.label_smoothing)

    def loss(self, b):
        return self(b)[1]


class Bert(nn.Module):
    """hnas's BertModel: token, position and segment embeddings and their LN, the encoder (post-LN, or pre-LN
    with a final LN), the pooler tanh(dense(h[:, 0])), and the heads a task puts on it (src/models/bert.h):
    masked_lm   LN(gelu(dense(h))) at the masked positions, times the token embedding^T, plus a bias;
    sentence_order  ALBERT's head on the pooled state, its loss weighted by sentence_order_weight;
    classes     a classifier on the pooled state (1 class: regression, mean squared error);
    span        start and end logits per position, padding at -1e9, the loss their mean cross-entropy."""

    def __init__(self, shapes, kind, dropout=0.0, masked_lm=True, sentence_order_weight=0.0, classes=0, span=False):
        super().__init__()
        self.width, self.heads, self.p = shapes.width, shapes.heads, dropout
        self.embeddings = nn.Module()
        self.embeddings.tokens = embedding(shapes.vocab, shapes.width, 0.02)
        self.embeddings.positions = embedding(shapes.positions, shapes.width, 0.02)
        self.embeddings.segments = embedding(2, shapes.width, 0.02)
        self.embeddings.norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        if masked_lm:
            self.mlm_head = nn.Module()
            self.mlm_head.dense = linear(shapes.width, shapes.width)
            self.mlm_head.norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
            self.mlm_head.bias = nn.Parameter(torch.zeros(shapes.vocab))
        self.pooler = nn.Module()
        self.pooler.dense = linear(shapes.width, shapes.width)
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList(shapes.layer(kind, dropout) for _ in range(shapes.layers))
        if shapes.norm == "pre":
            self.encoder.final_norm = nn.LayerNorm(shapes.width, eps=shapes.ln_eps)
        self.sentence_order_weight = sentence_order_weight
        if sentence_order_weight > 0:
            self.sop_head = linear(shapes.width, 2)
        if classes > 0:
            self.classifier = linear(shapes.width, classes)
        if span:
            self.span_head = linear(shapes.width, 2)

    def encode(self, b):
        ids, e = b["input_ids"], self.embeddings
        x = e.norm(e.tokens(ids) + e.positions.weight[:ids.shape[1]] + e.segments(b["segment_ids"]))
        if self.p > 0:
            x = F.dropout(x, self.p, self.training)
        masks = Masks(b["valid"], b["valid"], self.heads)
        for layer in self.encoder.layers:
            x = layer(x, masks)
        return self.encoder.final_norm(x) if hasattr(self.encoder, "final_norm") else x

    def pool(self, h):
        return torch.tanh(self.pooler.dense(h[:, 0]))

    def mlm_logits(self, h, positions):
        """The masked-LM head at the flat positions (b * L + t) of the encoder's states h."""
        rows = h.reshape(-1, self.width)[positions]
        # .to(): a no-op without autocast; under CPU autocast (bf16) torch 1.13 hands layer_norm the bf16
        # GELU output with f32 weights and stops ("expected scalar type BFloat16").
        hidden = self.mlm_head.norm(F.gelu(self.mlm_head.dense(rows)).to(self.mlm_head.norm.weight.dtype))
        return hidden @ self.embeddings.tokens.weight.t() + self.mlm_head.bias

    def forward(self, b):
        """(logits of the last head, loss): the losses of every head summed."""
        h = self.encode(b)
        logits, loss = None, 0.0
        if hasattr(self, "mlm_head"):
            logits = self.mlm_logits(h, b["masked_positions"])
            loss = F.cross_entropy(logits, b["masked_labels"], ignore_index=PAD_ID)
        pooled = self.pool(h)
        if self.sentence_order_weight > 0:
            logits = self.sop_head(pooled)
            loss = loss + self.sentence_order_weight * F.cross_entropy(logits, b["sentence_order"])
        if hasattr(self, "classifier"):
            logits = self.classifier(pooled)
            if logits.shape[-1] == 1:
                loss = loss + ((logits.reshape(-1) - b["targets"]) ** 2).mean()
            else:
                loss = loss + F.cross_entropy(logits, b["labels"])
        if hasattr(self, "span_head"):
            both = self.span_head(h) + ((1 - b["valid"]) * MASKED_SCORE).unsqueeze(-1)
            start, end = both[..., 0], both[..., 1]
            logits = torch.stack([start, end])
            loss = loss + (F.cross_entropy(start, b["start_positions"]) + F.cross_entropy(end, b["end_positions"])) / 2
        return logits, loss

    def loss(self, b):
        return self(b)[1]


def load_parameters(model, params, source):
    """Copies every parameter of `params` ({hnas name: array or tensor}) into the model, whose parameter
    names and shapes must be the same."""
    ours = dict(model.named_parameters())
    missing, unused = sorted(set(ours) - set(params)), sorted(set(params) - set(ours))
    if missing or unused:
        raise SystemExit(f"{source}: parameters do not match the torch model: missing {missing}, unused {unused}")
    with torch.no_grad():
        for name, p in ours.items():
            if tuple(p.shape) != tuple(params[name].shape):
                raise SystemExit(f"{source}: {name} has shape {list(params[name].shape)}, torch {list(p.shape)}")
            p.copy_(torch.as_tensor(params[name]))
