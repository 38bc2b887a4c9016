// The raw config of a tiny model of either task (headline: encoder-decoder, mlm: BERT-style encoder),
// with dropout off, shared by the model and config tests.
#pragma once

#include <string>

#include "base/json.h"

namespace hnas::testing {

inline Json tiny_config(const std::string& task) {
    Json model = {{"vocab_size", 50}, {"d_model", 32}, {"heads", 4}, {"ffn_dim", 64}, {"encoder_layers", 2},
                  {"dropout", {{"embedding", 0.0}, {"attention", 0.0}, {"residual", 0.0}}}};
    if (task == "headline") {
        model["decoder_layers"] = 2;
        model["max_source_positions"] = 16;
        model["max_target_positions"] = 16;
        model["attention"] = {{"encoder", {{"kind", "hnas"}, {"hybrid_init", 0.3}}}, {"decoder", {{"kind", "lnas"}}}};
    } else {
        model["max_positions"] = 16;
        model["attention"] = {{"encoder", {{"kind", "hnas"}}}};
    }
    return {{"task", task}, {"seed", 7}, {"model", model}};
}

}  // namespace hnas::testing
