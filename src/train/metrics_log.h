// metrics.jsonl: one JSON object per line, per progress report and per validation, flushed as it is
// written so that a crash loses nothing already reported. Rank 0 alone writes it.
#pragma once

#include <filesystem>
#include <fstream>

#include "base/json.h"

namespace hnas::train {

class MetricsLog {
public:
    MetricsLog() = default;  // writes nothing (ranks other than 0)
    // A resumed run appends; a new one replaces a log left by a start that wrote no checkpoint.
    MetricsLog(const std::filesystem::path& path, bool append);
    void write(const Json& record);

private:
    std::ofstream out_;
};

}  // namespace hnas::train
