// Public BERT weights in and hnas BERT-style models out, in Hugging Face's layout: safetensors with
// BertForPreTraining's parameter names, a config.json (BertConfig) and BERT's vocab.txt.
//
// import_bert writes an hnas masked-LM checkpoint (step 0) that init_from, hnas inspect and the
// analyses read: the encoder, the MLM head and, when the file has one, the NSP head
// cls.seq_relationship as the sentence-order head (both are 2-way heads on the pooled [CLS]); the
// WordPiece tokenizer of the vocab.txt. hnas renumbers the vocabulary (src/data/wordpiece.h), so the
// word-embedding rows and the MLM bias follow the renumbering; the two pieces BERT lacks (bos, eos)
// start as copies of [CLS]'s and [SEP]'s rows (Rothe et al.'s ⟨BERT,BERT⟩ begins and ends sequences
// with them). An attention kind's own parameters (hnas's θ) start fresh.
//
// export_bert writes the reverse: model.safetensors (f32, the vocabulary back in vocab.txt order, bos and
// eos dropped; parameters Hugging Face's BERT has no place for, such as an attention kind's θ or a
// fine-tuning head, under their hnas names prefixed "hnas."), config.json and vocab.txt (a SentencePiece
// model's checkpoint gets its tokenizer.model instead). export ∘ import is the identity on the file's
// tensors (cls.predictions.decoder.weight, tied to the word embeddings, is not written).
#pragma once

#include <string>
#include <vector>

#include "nn/attention_norm.h"

namespace hnas::convert {

struct ImportOptions {
    std::string weights;         // model.safetensors
    std::string vocab;           // vocab.txt
    std::string config;          // config.json (BertConfig); empty: config.json beside the weights, if any
    int64_t heads = 0;           // when no config.json gives num_attention_heads
    std::string attention = nn::default_attention_kind();  // the kind the imported encoder runs with
    std::string out;             // the hnas checkpoint to write
    bool allow_non_finite = false;   // import NaN and infinite weights as they are (refused otherwise)
};

struct ImportReport {
    std::vector<std::string> mapped, fresh, unused;  // hnas parameters taken / left fresh; file tensors not taken
};

ImportReport import_bert(const ImportOptions& options);

// Writes DIR/model.safetensors, DIR/config.json and DIR/vocab.txt (or DIR/tokenizer.model).
void export_bert(const std::string& checkpoint, const std::string& out_dir);

// The Hugging Face name of an hnas BERT parameter; "" when Hugging Face's BERT has none.
std::string hugging_face_name(const std::string& hnas_name);

}  // namespace hnas::convert
