// A headline checkpoint's articles decoded with beam search, as `hnas decode` and `hnas eval` run it: the
// checkpoint's test decoding settings with the caller's on top, and the headlines as the files hold them.
#pragma once

#include <string>
#include <vector>

#include "decode/headlines.h"
#include "tasks/task.h"

namespace hnas::tasks::headline {

struct DecodeRun {
    decode::BeamOptions beam;
    std::vector<std::vector<decode::DecodedHeadline>> headlines;  // per article, best first
    double seconds = 0;
};

// Decodes every line of `articles_path`; an Error naming the checkpoint when it holds another task's model.
DecodeRun decode_file(const TrainedCheckpoint& trained, const decode::DecodeSettings& settings, const std::string& articles_path);

// The best headline per article ("" where none finished).
std::vector<std::string> best_headlines(const std::vector<std::vector<decode::DecodedHeadline>>& headlines);

// The beam search's settings as reports list them.
Json decoding_json(const decode::BeamOptions& beam);

// One headline per line, or with nbest > 1 the n-best form `id ||| text ||| score` (id from 0).
std::string format_headlines(const DecodeRun& run);

// hnas eval: the articles of request.input decoded, written to request.predictions, and scored with
// ROUGE against request.references.
Evaluation evaluate(const TrainedCheckpoint& trained, const EvaluationRequest& request);

}  // namespace hnas::tasks::headline
