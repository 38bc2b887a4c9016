// Models in checkpoints: parameters are stored as entries named by their dotted paths, so a
// checkpoint, a PyTorch fixture and a log line all name a tensor the same way. Also ⟨BERT,BERT⟩
// initialization (paper 000 §7.2 and Table 2, after Goodman et al. 2019; Rothe et al. 2020): a
// seq2seq model's encoder and decoder both start from a masked-LM checkpoint.
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "models/seq2seq.h"

namespace hnas::models {

// Adds every parameter of `module` as an f32 entry named `prefix` + its path.
void add_parameters(io::CheckpointWriter& writer, const nn::Module& module, const std::string& prefix = "");
// Copies every parameter of `module` from the checkpoint; a missing entry or a shape mismatch is an
// error naming the parameter, the file and both shapes.
void load_parameters(const io::Checkpoint& checkpoint, nn::Module& module, const std::string& prefix = "");

struct InitReport {
    std::vector<std::pair<std::string, std::string>> mapped;  // (checkpoint entry, model parameter)
    std::vector<std::string> fresh;                           // model parameters left as initialized
    std::vector<std::string> unused;                          // checkpoint parameters nothing took
};

// Loads every parameter of `module` that the checkpoint holds under the same name (continued
// pretraining, fine-tuning a pretrained encoder: heads the checkpoint lacks start fresh). A shape
// mismatch is an error naming both shapes; a checkpoint sharing no parameter at all is an error.
InitReport initialize_by_name(const io::Checkpoint& checkpoint, nn::Module& module);

// A run starting from a checkpoint must compute what the checkpoint's model computed: the options that
// change what the same tensors mean (heads, norm placement, activation, positions, mixer, layer-norm
// epsilon) must match, and a run of the checkpoint's architecture may not have layers it lacks (they would
// start random, with nothing but a log line saying so; initialize_from_bert counts an MLM encoder's layers
// for a seq2seq run). The error names the file, the key and both values.
void check_init_architecture(const ModelConfig& pretrained, const ModelConfig& model, const std::string& path);

// Loads a BERT model's parameters (`prefix` + path, as add_parameters wrote them) into a seq2seq model:
// token embeddings; positions (the first max_*_positions rows) into both position tables; the
// embedding layer norm into both stacks' (when the seq2seq model has one); encoder layer N into encoder
// layer N and into decoder layer N's self-attention, feed-forward and their norms. Cross-attention
// stays freshly initialized. Size mismatches are errors naming both shapes.
InitReport initialize_from_bert(const io::Checkpoint& bert, Seq2SeqModel& model, const std::string& prefix = "");

}  // namespace hnas::models
