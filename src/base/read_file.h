// Reading a whole file, or its lines, into memory, with an error naming what the file is, its path and the reason.
#pragma once

#include <string>
#include <vector>

namespace hnas {

// `what` names the file in errors ("config", "the WordPiece vocabulary"): "<what> <path>: cannot open
// the file (<reason>)" or "... cannot read the file".
std::string read_file(const std::string& path, const std::string& what);

// The lines of a text file without their '\n' (a last line without one counts too), for line-aligned
// files such as hypotheses and references; errors as read_file's.
std::vector<std::string> read_lines(const std::string& path, const std::string& what);

}  // namespace hnas
