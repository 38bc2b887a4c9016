// Paper 002's synthetic tasks (§5, Fig. 2; the authors' task_generators.py): uniformly random symbol
// sequences, fresh for every batch, and the position or symbol a model must find.
//   case distinction   S = 100 symbols, N = 128: if 64 occurs the label is the position of the (first)
//                      minimum, else if 50 occurs it is position 0 (the first token), else the
//                      position of the (first) maximum (§5.1; shares 72.4 / 20.1 / 7.5 %);
//   mode finding       S = 10: the most frequent symbol, ties broken toward the smallest (§5.3).
// The first-token variant of case distinction (§5.2) has the same data; only the model's output head
// differs, so it is a property of the task, not of the generator.
//
// Batch k of a run is drawn from its own random stream (seed, k), so a resumed run, a validation set
// and any batch alone are reproducible without replaying the batches before it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/enum_names.h"
#include "base/rng.h"

namespace hnas::data {

enum class SyntheticProblem { case_distinction, mode };
inline constexpr EnumName<SyntheticProblem> kSyntheticProblemNames[]{{SyntheticProblem::case_distinction, "case_distinction"},
                                                                     {SyntheticProblem::mode, "mode"}};
constexpr const auto& enum_names(SyntheticProblem) { return kSyntheticProblemNames; }

// Where a model reads its answer (paper 002 Fig. 2): a logit at every position (a distribution over the
// positions, §5.1), or the first position's state projected to classes (§5.2, §5.3).
enum class SyntheticOutput { every_position, first_position };
inline constexpr EnumName<SyntheticOutput> kSyntheticOutputNames[]{{SyntheticOutput::every_position, "every_position"},
                                                                   {SyntheticOutput::first_position, "first_position"}};
constexpr const auto& enum_names(SyntheticOutput) { return kSyntheticOutputNames; }

// Which rule of case distinction decided a label (paper 002, Fig. 2 pseudo code).
enum class DistinctionCase { argmin, first, argmax };
inline constexpr EnumName<DistinctionCase> kDistinctionCaseNames[]{
    {DistinctionCase::argmin, "argmin"}, {DistinctionCase::first, "first"}, {DistinctionCase::argmax, "argmax"}};
constexpr const auto& enum_names(DistinctionCase) { return kDistinctionCaseNames; }

// The symbols that switch the cases (paper 002 Fig. 2: "chosen arbitrarily").
inline constexpr int32_t kArgminMarker = 64, kFirstMarker = 50;

struct DistinctionLabel {
    int32_t position;
    DistinctionCase rule;
};
// The label of one sequence of symbols under case distinction.
DistinctionLabel case_distinction_label(std::span<const int32_t> symbols);
// The most frequent of `symbol_count` symbols, the smallest among ties.
int32_t mode_label(std::span<const int32_t> symbols, int32_t symbol_count);

struct SyntheticOptions {
    SyntheticProblem problem = SyntheticProblem::case_distinction;
    int32_t symbols = 100;  // S: symbols 0 … S−1
    int64_t length = 128;   // N
    int64_t batch = 32;
    uint64_t seed = 1;
};

struct SyntheticBatch {
    int64_t rows = 0, length = 0;
    std::vector<int32_t> symbols;           // rows × length, row-major
    std::vector<int32_t> labels;            // a position (case distinction) or a symbol (mode) per row
    std::vector<DistinctionCase> rules;     // case distinction only: the rule behind each label
};

// Batch `index` of the stream the options define.
SyntheticBatch synthetic_batch(const SyntheticOptions& options, uint64_t index);

}  // namespace hnas::data
