// LineReader and the UTF-8 validator (see text_io.h).
#include "base/text_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"

namespace hnas {

namespace {

constexpr size_t kReadBlock = size_t{1} << 20;

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const size_t size = text.size();
    size_t i = 0;
    while (i < size) {
        // Corpora are almost all ASCII: skip eight ASCII bytes at a time.
        if (i + 8 <= size) {
            uint64_t word;
            std::memcpy(&word, bytes + i, 8);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        const unsigned char lead = bytes[i];
        if (lead < 0x80) {
            ++i;
            continue;
        }
        // Table 3-7 of the Unicode standard: the allowed range of the second byte depends on the
        // lead byte (this excludes overlong forms, surrogates and values above U+10FFFF).
        size_t length;
        unsigned char low = 0x80, high = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            if (lead == 0xE0) low = 0xA0;
            if (lead == 0xED) high = 0x9F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            if (lead == 0xF0) low = 0x90;
            if (lead == 0xF4) high = 0x8F;
        } else {
            return i;
        }
        if (i + length > size) return i;
        if (bytes[i + 1] < low || bytes[i + 1] > high) return i;
        for (size_t k = 2; k < length; ++k) {
            if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return i;
        }
        i += length;
    }
    return std::string_view::npos;
}

size_t find_control_byte(std::string_view text) {
    const size_t size = text.size();
    for (size_t i = 0; i < size; ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte >= 0x20 || byte == '\t' || (byte == '\r' && i + 1 == size)) continue;
        return i;
    }
    return std::string_view::npos;
}

bool accept_line(std::string_view line, const std::string& path, int64_t line_number, DamagedLines policy) {
    const size_t bad_utf8 = find_invalid_utf8(line);
    const size_t control = find_control_byte(line);
    if (bad_utf8 == std::string_view::npos && control == std::string_view::npos) return true;
    if (policy == DamagedLines::skip) return false;
    std::string problem;
    if (control < bad_utf8) {
        char code[8];
        std::snprintf(code, sizeof code, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(line[control])));
        problem = concat_message("control byte ", code, " at byte ", control + 1);
    } else {
        problem = concat_message("invalid UTF-8 at byte ", bad_utf8 + 1);
    }
    throw Error(concat_message(path, ":", line_number, ": ", problem,
                               " of the line (a damaged file? data.damaged_lines \"skip\" leaves such lines out)"));
}

TextFileScan scan_text_file(const std::string& path, DamagedLines policy) {
    TextFileScan scan;
    LineReader reader(path);
    std::string_view line;
    while (reader.next(line)) {
        ++scan.lines;
        if (!accept_line(line, path, reader.line_number(), policy)) {
            if (scan.damaged_lines++ == 0) scan.first_damaged_line = reader.line_number();
        } else if (!is_blank(line)) {
            ++scan.text_lines;
        }
    }
    return scan;
}

bool is_blank(std::string_view text) {
    for (char c : text) {
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\v' && c != '\f') return false;
    }
    return true;
}

LineReader::LineReader(std::string path, size_t max_line_bytes)
    : path_(std::move(path)), max_line_bytes_(max_line_bytes), capacity_(max_line_bytes + 1 + kReadBlock) {
    HNAS_CHECK(max_line_bytes_ > 0, path_, ": the line length limit must be positive");
    file_.reset(std::fopen(path_.c_str(), "rb"));
    HNAS_CHECK(file_ != nullptr, "cannot open ", path_, ": ", std::strerror(errno));
    buffer_ = std::make_unique<char[]>(capacity_);
}

bool LineReader::refill() {
    if (eof_) return false;
    const size_t unread = end_ - begin_;
    if (begin_ > 0) {
        std::memmove(buffer_.get(), buffer_.get() + begin_, unread);
        begin_ = 0;
        end_ = unread;
    }
    const size_t got = std::fread(buffer_.get() + end_, 1, capacity_ - end_, file_.get());
    HNAS_CHECK(!std::ferror(file_.get()), "error reading ", path_, " after line ", line_number_, ": ",
               std::strerror(errno));
    if (got == 0) {
        eof_ = true;
        return false;
    }
    end_ += got;
    file_offset_ += got;
    return true;
}

bool LineReader::next(std::string_view& line) {
    size_t scanned = 0;  // bytes after begin_ already known to hold no '\n'
    while (true) {
        const char* start = buffer_.get() + begin_;
        const auto* newline =
            static_cast<const char*>(std::memchr(start + scanned, '\n', end_ - begin_ - scanned));
        if (newline != nullptr) {
            const size_t length = static_cast<size_t>(newline - start);
            HNAS_CHECK(length <= max_line_bytes_, path_, ":", line_number_ + 1, ": line longer than ",
                       max_line_bytes_, " bytes");
            line = std::string_view(start, length);
            begin_ += length + 1;
            ++line_number_;
            return true;
        }
        scanned = end_ - begin_;
        HNAS_CHECK(scanned <= max_line_bytes_, path_, ":", line_number_ + 1, ": line longer than ", max_line_bytes_,
                   " bytes");
        if (!refill()) {
            if (begin_ == end_) return false;
            line = std::string_view(buffer_.get() + begin_, end_ - begin_);
            begin_ = end_;
            ++line_number_;
            return true;
        }
    }
}

void LineReader::seek(uint64_t offset, int64_t line_number) {
    HNAS_CHECK(std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) == 0, "cannot seek to byte ", offset,
               " of ", path_, ": ", std::strerror(errno));
    begin_ = end_ = 0;
    file_offset_ = offset;
    line_number_ = line_number - 1;
    eof_ = false;
}

}  // namespace hnas
