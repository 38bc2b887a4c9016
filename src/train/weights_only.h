// A checkpoint without its optimizer moments: the parameters, the tokenizer and the metadata (the resolved
// config, the step) that init_from, hnas test, eval, decode and export read, at a third of the size of a
// step checkpoint under Adam. Pretrained encoders are shared this way (data/pretrained/); a run cannot
// resume from one, since its moments are gone.
#pragma once

#include <cstdint>
#include <string>

namespace hnas::train {

struct WeightsOnlyReport {
    int64_t entries_kept = 0;
    int64_t moments_dropped = 0;  // checkpoint entries of the optimizer's moments
    uint64_t bytes_written = 0;
};

// Reads and verifies `checkpoint`, then writes `out` atomically with every entry but the moments; the
// metadata gains "weights_only_from" (the source file's name). Throws naming the file on any failure.
WeightsOnlyReport write_weights_only(const std::string& checkpoint, const std::string& out);

}  // namespace hnas::train
