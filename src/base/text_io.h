// Reading text files line by line without holding them in memory: a block-buffered LineReader that
// can seek to a remembered byte offset (to revisit a region of a corpus) and refuses over-long lines,
// and the checks of a line's bytes (UTF-8, control bytes). Errors name the file and the 1-based line
// number.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/enum_names.h"

namespace hnas {

// Longest line accepted by default. Gigaword articles are under 2 KB and a State of the Union
// address is under 200 KB; anything near a megabyte is a broken file (e.g. no newlines at all).
inline constexpr size_t kDefaultMaxLineBytes = size_t{1} << 20;

// The byte offset of the first invalid UTF-8 sequence in `text`, or std::string_view::npos.
// Invalid: stray continuation bytes, truncated sequences, overlong encodings, UTF-16 surrogates
// and code points above U+10FFFF (RFC 3629, section 4).
size_t find_invalid_utf8(std::string_view text);

// The byte offset of the first control byte in `text` (C0 codes other than tab, and a carriage
// return anywhere but at the end, where CRLF line endings put it), or std::string_view::npos. NUL
// bytes and other control codes are what a crash leaves in a file, never text.
size_t find_control_byte(std::string_view text);

// What the readers do with a damaged line (invalid UTF-8 or a control byte): stop with an error
// naming file and line (the default), or leave it out (config `data.damaged_lines`).
enum class DamagedLines { reject, skip };
inline constexpr EnumName<DamagedLines> kDamagedLinesNames[]{{DamagedLines::reject, "reject"}, {DamagedLines::skip, "skip"}};
constexpr const auto& enum_names(DamagedLines) { return kDamagedLinesNames; }

// True for a good line. A damaged one throws naming path, line number, the byte and the problem
// under `reject`, and returns false under `skip`.
bool accept_line(std::string_view line, const std::string& path, int64_t line_number, DamagedLines policy);

// One pass over a text file, for checking data before a run writes anything.
struct TextFileScan {
    int64_t lines = 0;
    int64_t text_lines = 0;          // good lines that are not blank
    int64_t damaged_lines = 0;       // left out under DamagedLines::skip
    int64_t first_damaged_line = 0;  // 1-based; 0 when none
};
// Throws naming the file when it cannot be read, and on the first damaged line under `reject`.
TextFileScan scan_text_file(const std::string& path, DamagedLines policy);

// True if `text` holds nothing but ASCII whitespace.
bool is_blank(std::string_view text);

class LineReader {
public:
    // Opens `path` for reading; throws naming the file if it cannot be opened.
    LineReader(std::string path, size_t max_line_bytes = kDefaultMaxLineBytes);

    // The next line without its '\n' (a final line without '\n' counts too), valid until the next
    // call; false at the end of the file. Throws naming file and line if the line is longer than
    // max_line_bytes.
    bool next(std::string_view& line);

    // Continues reading at byte `offset`, which must be the start of line `line_number` (1-based).
    void seek(uint64_t offset, int64_t line_number);

    uint64_t offset() const { return file_offset_ - (end_ - begin_); }  // start of the next line
    int64_t line_number() const { return line_number_; }                // of the last line returned
    const std::string& path() const { return path_; }

private:
    bool refill();  // moves the unread tail to the front and reads more; false if nothing was added

    struct FileCloser {
        void operator()(std::FILE* file) const { std::fclose(file); }
    };
    std::string path_;
    size_t max_line_bytes_;
    std::unique_ptr<std::FILE, FileCloser> file_;
    std::unique_ptr<char[]> buffer_;
    size_t capacity_;
    size_t begin_ = 0, end_ = 0;   // unread bytes are buffer_[begin_, end_)
    uint64_t file_offset_ = 0;     // file position just after buffer_[end_ - 1]
    int64_t line_number_ = 0;
    bool eof_ = false;
};

}  // namespace hnas
