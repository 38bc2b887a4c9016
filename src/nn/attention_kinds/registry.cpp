// The registry of attention normalizations: one line per kind.
#include <sstream>

#include "nn/attention_norm.h"

namespace hnas::nn {

std::unique_ptr<AttentionNorm> make_lnas(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_dnas(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_hnas(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_sinkhorn(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_dnas_causal(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_nap(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_non(const AttentionNormOptions&);
std::unique_ptr<AttentionNorm> make_ot(const AttentionNormOptions&);

const std::vector<AttentionKind>& attention_kinds() {
    // A leak of the future breaks causal training and step-by-step decoding alike.
    static const std::string over_queries =
        "it normalizes over all queries, so the weights of target position i would depend on later positions (a leak of "
        "the future) and training would not match step-by-step decoding";
    static const std::string over_templates =
        "each query's weights spread over every template, later positions included (a leak of the future)";
    static const std::vector<AttentionKind> kinds{
        {"lnas", "softmax over keys for each query (the standard Transformer)", "", true, false, make_lnas},
        {"dnas", "normalize exp(S) over queries for each key, then over keys (paper 000, Eq. 6-8)", over_queries, true, false, make_dnas},
        {"hnas", "u·DNAS + (1−u)·LNAS with a trainable u per head (paper 004)", over_queries, true, false, make_hnas},
        {"sinkhorn", "k alternations of query- and key-axis normalization (k = 1 is dnas)", over_queries, true, false, make_sinkhorn},
        {"dnas_causal", "DNAS whose query-axis normalizer of query i runs over queries ≤ i only", "", true, false, make_dnas_causal},
        {"nap", "logits standardized per query with a gain and bias per head, no softmax (paper 002)", "", false, false, make_nap},
        {"non", "the scores as weights, times 1/√(allowed keys): no normalization (paper 002, NON)", "", false, false, make_non},
        {"ot", "optimal-transport attention over the template set, each template weighted through its similarity to the "
               "input's (paper 003, Eq. 25)", over_templates, true, true, make_ot},
    };
    return kinds;
}

std::vector<std::string> attention_kind_names() {
    std::vector<std::string> names;
    for (const AttentionKind& kind : attention_kinds()) names.push_back(kind.name);
    return names;
}

const AttentionKind& find_attention_kind(const std::string& name) {
    std::ostringstream known;
    for (const AttentionKind& kind : attention_kinds()) {
        if (kind.name == name) return kind;
        known << (known.tellp() > 0 ? ", " : "") << kind.name;
    }
    throw Error("unknown attention kind '" + name + "'; known kinds: " + known.str());
}

void check_attention_kind_allowed(const std::string& name, AttentionRole role) {
    const AttentionKind& kind = find_attention_kind(name);
    HNAS_CHECK(kind.future_leak.empty() || role == AttentionRole::bidirectional, "attention kind '", name,
               "' cannot be used in ", name_of(role), ": ", kind.future_leak,
               "; use 'dnas_causal' (doubly-normalized over queries up to i) or 'lnas'");
}

}  // namespace hnas::nn
