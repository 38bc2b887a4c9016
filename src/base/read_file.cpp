#include "base/read_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/check.h"

namespace hnas {

std::string read_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    HNAS_CHECK(in, what, " ", path, ": cannot open the file (", std::strerror(errno), ")");
    std::ostringstream text;
    text << in.rdbuf();
    HNAS_CHECK(!in.bad(), what, " ", path, ": cannot read the file");
    return text.str();
}

std::vector<std::string> read_lines(const std::string& path, const std::string& what) {
    const std::string text = read_file(path, what);
    std::vector<std::string> lines;
    for (size_t start = 0; start < text.size();) {
        const size_t end = std::min(text.find('\n', start), text.size());
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

}  // namespace hnas
