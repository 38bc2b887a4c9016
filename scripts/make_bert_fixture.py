#!/usr/bin/python3
"""A random tiny BERT in Hugging Face's layout, and what it computes, for tests/convert/test_bert_import.cpp.

    /usr/bin/python3 scripts/make_bert_fixture.py     # Debian's python3-torch; deterministic

Writes tests/fixtures/hf_bert/: model.safetensors (BertForPreTraining names, F32, written by hand), vocab.txt
(special pieces at BERT-like rows, not at hnas's ids, so the importer's renumbering is exercised), config.json
and expected.json: two padded rows in vocab.txt ids with their segment ids and mask, and, in float64, the MLM
logits of every real position, the pooled [CLS] states and the cls.seq_relationship logits, computed by the
PyTorch twin's BERT (scripts/twin/model.py) under hnas's names, as `hnas import-bert` renames them. Hugging
Face's BertForPreTraining computes the same (its additive -10000 mask leaves exactly 0 weight on padding).
"""

import json
import math
import os
import struct

import torch

from twin import model as twin

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf_bert")
LAYERS, WIDTH, HEADS, FFN, POSITIONS, TYPES, EPS = 2, 32, 4, 64, 16, 2, 1e-12
VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "the", "[CLS]", "[SEP]", "[MASK]", "whale", "ship", "sea", "call",
         "me", "ishmael", ".", ",", "##s", "##ing", "captain", "ahab", "white", "a", "of", "and", "to", "in", "he",
         "his", "was", "it", "boat", "harpoon", "##ed", "deck", "wind", "sail"]

gen = torch.Generator().manual_seed(20261123)


def draw(shape, scale):
    return ((torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * scale).contiguous()


def dense(p, name, rows, cols):
    p[name + ".weight"] = draw((rows, cols), math.sqrt(3 / cols))
    p[name + ".bias"] = draw((rows,), 0.1)


def norm(p, name):
    p[name + ".weight"] = 1 + draw((WIDTH,), 0.2)
    p[name + ".bias"] = draw((WIDTH,), 0.1)


def parameters():
    p = {}
    for table, rows in (("word", len(VOCAB)), ("position", POSITIONS), ("token_type", TYPES)):
        p[f"bert.embeddings.{table}_embeddings.weight"] = draw((rows, WIDTH), 0.5)
    norm(p, "bert.embeddings.LayerNorm")
    for i in range(LAYERS):
        pre = f"bert.encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            dense(p, pre + name, WIDTH, WIDTH)
        dense(p, pre + "intermediate.dense", FFN, WIDTH)
        dense(p, pre + "output.dense", WIDTH, FFN)
        norm(p, pre + "attention.output.LayerNorm")
        norm(p, pre + "output.LayerNorm")
    dense(p, "bert.pooler.dense", WIDTH, WIDTH)
    dense(p, "cls.predictions.transform.dense", WIDTH, WIDTH)
    norm(p, "cls.predictions.transform.LayerNorm")
    p["cls.predictions.bias"] = draw((len(VOCAB),), 0.1)
    dense(p, "cls.seq_relationship", 2, WIDTH)
    return p


def hnas_names():
    """{Hugging Face name: hnas name} of every tensor (src/convert/hf_bert.cpp's mapping)."""
    names = {"bert.embeddings.word_embeddings.weight": "embeddings.tokens.weight",
             "bert.embeddings.position_embeddings.weight": "embeddings.positions.weight",
             "bert.embeddings.token_type_embeddings.weight": "embeddings.segments.weight",
             "bert.embeddings.LayerNorm": "embeddings.norm", "bert.pooler.dense": "pooler.dense",
             "cls.predictions.transform.dense": "mlm_head.dense", "cls.predictions.transform.LayerNorm": "mlm_head.norm",
             "cls.predictions.bias": "mlm_head.bias", "cls.seq_relationship": "sop_head"}
    for i in range(LAYERS):
        for theirs, ours in (("attention.self.query", "self_attn.q_proj"), ("attention.self.key", "self_attn.k_proj"),
                             ("attention.self.value", "self_attn.v_proj"), ("attention.output.dense", "self_attn.out_proj"),
                             ("attention.output.LayerNorm", "self_attn_norm"), ("intermediate.dense", "ffn.fc1"),
                             ("output.dense", "ffn.fc2"), ("output.LayerNorm", "ffn_norm")):
            names[f"bert.encoder.layer.{i}.{theirs}"] = f"encoder.layers.{i}.{ours}"
    return names


def forward(p, ids, types, mask):
    """In float64: the MLM logits of every real position, the pooled states and the seq_relationship logits."""
    names, renamed = hnas_names(), {}
    for name, tensor in p.items():
        prefix = next(k for k in names if name == k or name.startswith(k + "."))
        renamed[names[prefix] + name[len(prefix):]] = tensor.double()
    shapes = twin.Shapes(WIDTH, HEADS, FFN, LAYERS, len(VOCAB), POSITIONS, ln_eps=EPS)
    model = twin.Bert(shapes, "lnas", sentence_order_weight=1.0).double()
    twin.load_parameters(model, renamed, "the tiny BERT")
    with torch.no_grad():
        h = model.encode({"input_ids": ids, "segment_ids": types, "valid": mask.double()})
        positions = torch.nonzero(mask.reshape(-1)).reshape(-1)
        pooled = model.pool(h)
        return model.mlm_logits(h, positions), pooled, model.sop_head(pooled)


def write_safetensors(path, tensors):
    header, offset, chunks = {}, 0, []
    for name in sorted(tensors):
        data = tensors[name].numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        chunks.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    os.makedirs(OUT, exist_ok=True)
    p = parameters()
    write_safetensors(os.path.join(OUT, "model.safetensors"), p)
    with open(os.path.join(OUT, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    config = {"architectures": ["BertForPreTraining"], "model_type": "bert", "hidden_size": WIDTH, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "intermediate_size": FFN, "max_position_embeddings": POSITIONS,
              "type_vocab_size": TYPES, "vocab_size": len(VOCAB), "layer_norm_eps": EPS, "hidden_act": "gelu"}
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    index = {t: i for i, t in enumerate(VOCAB)}
    rows = [["[CLS]", "call", "me", "ishmael", "[SEP]", "the", "whale", "##s", "[SEP]"],
            ["[CLS]", "ahab", "[MASK]", "the", "deck", "[SEP]", "[PAD]", "[PAD]", "[PAD]"]]
    ids = torch.tensor([[index[t] for t in row] for row in rows])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    flat, pooled, order = forward(p, ids, types, mask)
    positions = [b * ids.shape[1] + t for b in range(ids.shape[0]) for t in range(ids.shape[1]) if mask[b, t]]
    expected = {"generator": "scripts/make_bert_fixture.py", "input_ids": ids.tolist(), "segment_ids": types.tolist(),
                "mask": mask.tolist(), "positions": positions,
                **{key: [[round(v, 12) for v in row] for row in t.tolist()]
                   for key, t in (("mlm_logits", flat), ("pooled", pooled), ("seq_relationship", order))}}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f)
        f.write("\n")
    print(f"wrote {OUT}: {len(p)} tensors, {len(VOCAB)} pieces, {len(positions)} positions")


if __name__ == "__main__":
    main()
