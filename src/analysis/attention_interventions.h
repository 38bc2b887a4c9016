// Test-time interventions on attention weights (nn/attention_intervention.h): did the keys softmax
// explained away carry information the trained model used? Each intervention takes a bidirectional
// attention's weights π (B, H, Lq, Lk) and returns new ones; `hnas test RUN --intervention NAME` scores a
// trained run under one. Paper 004 Definition 1 calls key j explained away when its weight sum
// s_j = Σ_i π_ij over the real queries is (near) 0; paper 000 Lemma 1 gives DNAS the floor s_j ≥ 1/L_k.
#pragma once

#include "base/enum_names.h"
#include "nn/attention_intervention.h"

namespace hnas::analysis {

enum class Intervention {
    drop_explained_away,  // per head, keys with s_j < ε get no weight; each query renormalized over the rest
    floor_key_sums,       // per head, a key with s_j < 1/L_k gets 1/L_k − s_j spread over the real queries;
                          // each query then renormalized
    dnas_weights,         // the same scores normalized by DNAS (paper 000 Eq. 6–8)
};
inline constexpr EnumName<Intervention> kInterventionNames[]{{Intervention::drop_explained_away, "drop_explained_away"},
                                                             {Intervention::floor_key_sums, "floor_key_sums"},
                                                             {Intervention::dnas_weights, "dnas_weights"}};
constexpr const auto& enum_names(Intervention) { return kInterventionNames; }

// The change an nn::AttentionIntervention applies; `epsilon` is drop_explained_away's threshold.
nn::AttentionIntervention::Change intervention_change(Intervention intervention, double epsilon = 1e-3);

}  // namespace hnas::analysis
