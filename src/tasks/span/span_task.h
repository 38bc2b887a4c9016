// Fine-tuning a BERT-style encoder on extractive question answering (SQuAD 1.1 and 2.0; paper 004
// Table 2): start and end logits at every piece of [CLS] question [SEP] context window [SEP], the mean
// of the two cross-entropies as the loss. An answer is the best span over all windows of a question
// (run_squad's n-best: the top start and end pieces, end ≥ start, at most data.max_answer pieces, inside
// the context, starting where its window is the piece's max context); under SQuAD 2.0 the answer is
// empty when the null score (the smallest [CLS] start + end logit over the windows) exceeds the best
// span's score by more than data.null_threshold. Validation reports SQuAD's exact match and F1.
#pragma once

#include <string>
#include <vector>

#include "data/squad_features.h"
#include "tasks/task.h"

namespace hnas::tasks::span {

const TaskDefinition& definition();

// The start and end logits of one window, one value per position.
struct WindowLogits {
    std::vector<float> start, end;
};

// The answer of every question of `file`, from the logits of its windows (features[i] ↔ logits[i]).
// The text is the context from the first to the last whole word the span's pieces belong to.
std::vector<std::string> best_answers(const data::SquadFile& file, const std::vector<data::SpanFeature>& features,
                                      const std::vector<WindowLogits>& logits, int64_t max_answer, double null_threshold);

}  // namespace hnas::tasks::span
