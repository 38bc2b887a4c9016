// The registry of attention normalizations: one line per kind. Each kind's file defines its
// `<name>_kind()`: the kind's name, description, flags, settings and normalization.
#include <sstream>

#include "nn/attention_norm.h"

// Every kind, in the order configs and tables list them; the first is the default kind.
#define HNAS_ATTENTION_KINDS(KIND) \
    KIND(lnas)                     \
    KIND(dnas)                     \
    KIND(hnas)                     \
    KIND(sinkhorn)                 \
    KIND(dnas_causal)              \
    KIND(nap)                      \
    KIND(non)                      \
    KIND(ot)

namespace hnas::nn {

#define HNAS_DECLARE_KIND(name) const AttentionKind& name##_kind();
HNAS_ATTENTION_KINDS(HNAS_DECLARE_KIND)
#undef HNAS_DECLARE_KIND

// A leak of the future breaks causal training and step-by-step decoding alike.
const char* const kLeaksOverQueries =
    "it normalizes over all queries, so the weights of target position i would depend on later positions (a leak of "
    "the future) and training would not match step-by-step decoding";

KindSettingsPtr no_settings(config::ConfigNode& /*stack*/) {
    static const KindSettingsPtr none = std::make_shared<KindSettings>();
    return none;
}

const std::vector<const AttentionKind*>& attention_kinds() {
#define HNAS_KIND_ENTRY(name) &name##_kind(),
    static const std::vector<const AttentionKind*> kinds{HNAS_ATTENTION_KINDS(HNAS_KIND_ENTRY)};
#undef HNAS_KIND_ENTRY
    return kinds;
}

std::vector<std::string> attention_kind_names() {
    std::vector<std::string> names;
    for (const AttentionKind* kind : attention_kinds()) names.push_back(kind->name);
    return names;
}

const std::string& default_attention_kind() { return attention_kinds().front()->name; }

const AttentionKind& find_attention_kind(const std::string& name) {
    std::ostringstream known;
    for (const AttentionKind* kind : attention_kinds()) {
        if (kind->name == name) return *kind;
        known << (known.tellp() > 0 ? ", " : "") << kind->name;
    }
    throw Error("unknown attention kind '" + name + "'; known kinds: " + known.str());
}

void check_attention_kind_allowed(const std::string& name, AttentionRole role) {
    const AttentionKind& kind = find_attention_kind(name);
    HNAS_CHECK(kind.future_leak.empty() || role == AttentionRole::bidirectional, "attention kind '", name,
               "' cannot be used in ", name_of(role), ": ", kind.future_leak,
               "; use 'dnas_causal' (doubly-normalized over queries up to i) or 'lnas'");
}

KindSettingsByName read_kind_settings(config::ConfigNode& stack) {
    KindSettingsByName settings;
    for (const AttentionKind* kind : attention_kinds()) settings[kind->name] = kind->read_settings(stack);
    return settings;
}

KindSettingsPtr kind_settings(const std::string& kind, const Json& keys) {
    config::ConfigNode node(keys, kind);
    KindSettingsPtr settings = find_attention_kind(kind).read_settings(node);
    node.finish();
    return settings;
}

}  // namespace hnas::nn
