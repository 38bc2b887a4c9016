#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "base/check.h"

namespace hnas::train {

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc) {
    HNAS_CHECK(out_.is_open(), "train: cannot open ", path.string(), ": ", std::strerror(errno));
}

void MetricsLog::write(const Json& record) {
    if (out_.is_open()) out_ << record.dump() << "\n" << std::flush;
}

}  // namespace hnas::train
