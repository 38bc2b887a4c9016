#include "tensor/read_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tensor/check.h"

namespace hnas {

std::string read_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    HNAS_CHECK(in, what, " ", path, ": cannot open the file (", std::strerror(errno), ")");
    std::ostringstream text;
    text << in.rdbuf();
    HNAS_CHECK(!in.bad(), what, " ", path, ": cannot read the file");
    return text.str();
}

}  // namespace hnas
