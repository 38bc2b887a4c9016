// Reading a whole file into memory, with an error naming what the file is, its path and the reason.
#pragma once

#include <string>

namespace hnas {

// `what` names the file in errors ("config", "the WordPiece vocabulary"): "<what> <path>: cannot open
// the file (<reason>)" or "... cannot read the file".
std::string read_file(const std::string& path, const std::string& what);

}  // namespace hnas
