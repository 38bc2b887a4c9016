// A sweep's prediction, provably stated before its runs: a markdown file committed to git
// (conventionally under docs/experiments/predictions/), recorded in sweep.json with its text, its path
// in the repository and the commit that last changed it. A file git does not track, or one with
// uncommitted changes, is refused: nothing would then show when its text was written.
#pragma once

#include <string>

namespace hnas::experiments {

struct Prediction {
    std::string text;    // the file's contents
    std::string file;    // its path from the repository's top folder
    std::string commit;  // the full hash of the commit that last changed it
};

// The prediction in the file at `path` (hnas sweep --prediction); errors name the file and say why it
// is refused: no such file, git not on PATH, outside a repository, not tracked, never committed, or
// changed since its last commit.
Prediction read_committed_prediction(const std::string& path);

}  // namespace hnas::experiments
