#include "data/wordpiece.h"

#include <algorithm>

#include "base/check.h"
#include "data/tokenizer.h"
#include "data/unicode_tables.h"

namespace hnas::data {

namespace {

constexpr size_t kMaxWordCharacters = 100;  // tokenization.py's max_input_chars_per_word
constexpr char32_t kReplacement = 0xFFFD;

// UTF-8 to code points; an invalid or truncated sequence becomes U+FFFD, one per byte.
std::u32string decode_utf8(std::string_view text) {
    std::u32string out;
    for (size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
        char32_t code_point = length == 1 ? lead : length == 2 ? lead & 0x1F : length == 3 ? lead & 0x0F : lead & 0x07;
        bool valid = length > 0 && i + length <= text.size();
        for (size_t k = 1; valid && k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            valid = (next & 0xC0) == 0x80;
            code_point = (code_point << 6) | (next & 0x3F);
        }
        out += valid ? code_point : kReplacement;
        i += valid ? length : 1;
    }
    return out;
}

void append_utf8(char32_t c, std::string& out) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// BasicTokenizer.tokenize up to the words, as code points.
std::vector<std::u32string> basic_words(std::string_view text) {
    // _clean_text and _tokenize_chinese_chars
    std::u32string cleaned;
    for (char32_t c : decode_utf8(text)) {
        if (c == 0 || c == kReplacement || unicode::is_control(c)) continue;
        if (unicode::is_whitespace(c)) {
            cleaned += U' ';
        } else if (unicode::is_cjk(c)) {
            cleaned += U' ';
            cleaned += c;
            cleaned += U' ';
        } else {
            cleaned += c;
        }
    }
    // whitespace_tokenize, then per token: lower-case, strip accents, _run_split_on_punc
    std::vector<std::u32string> words;
    std::u32string folded;
    auto flush = [&] {
        if (!folded.empty()) words.push_back(std::move(folded));
        folded.clear();
    };
    for (size_t i = 0; i < cleaned.size();) {
        if (cleaned[i] == U' ') {
            ++i;
            continue;
        }
        std::u32string token;
        while (i < cleaned.size() && cleaned[i] != U' ') unicode::append_folded(cleaned[i++], token);
        for (char32_t c : token) {
            if (unicode::is_punctuation(c)) {
                flush();
                words.push_back(std::u32string(1, c));
            } else {
                folded += c;
            }
        }
        flush();
    }
    return words;
}

std::string to_utf8(std::u32string_view text) {
    std::string out;
    for (char32_t c : text) append_utf8(c, out);
    return out;
}

}  // namespace

std::vector<std::string> basic_tokenize(std::string_view text) {
    std::vector<std::string> words;
    for (const std::u32string& word : basic_words(text)) words.push_back(to_utf8(word));
    return words;
}

WordPiece::WordPiece(std::string_view vocab_text, const std::string& origin) {
    std::vector<std::string> lines;
    std::unordered_map<std::string, int64_t> line_of;
    for (size_t start = 0; start < vocab_text.size();) {
        size_t end = vocab_text.find('\n', start);
        if (end == std::string_view::npos) end = vocab_text.size();
        std::string_view line = vocab_text.substr(start, end - start);
        // load_vocab strips each line
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
        const auto [found, inserted] = line_of.emplace(std::string(line), static_cast<int64_t>(lines.size()));
        HNAS_CHECK(inserted, origin, ": line ", lines.size() + 1, " repeats the piece \"", line, "\" of line ", found->second + 1);
        lines.emplace_back(line);
        start = end + 1;
    }
    HNAS_CHECK(!lines.empty(), origin, ": no pieces");
    // Ids are int32; the specials hnas adds come on top of the file's lines.
    HNAS_CHECK(lines.size() < (size_t{1} << 30), origin, ": ", lines.size(), " pieces are more than hnas's int32 ids hold");
    const char* specials[] = {"[PAD]", "[UNK]", "[BOS]", "[EOS]", "[CLS]", "[SEP]", "[MASK]"};
    static_assert(kPadId == 0 && kUnkId == 1 && kBosId == 2 && kEosId == 3 && kClsId == 4 && kSepId == 5 && kMaskId == 6);
    for (const char* special : specials) {
        const auto found = line_of.find(special);
        const bool optional = std::string_view(special) == "[BOS]" || std::string_view(special) == "[EOS]";
        HNAS_CHECK(found != line_of.end() || optional, origin, ": the vocabulary has no ", special, " piece");
        pieces_.emplace_back(special);
        source_rows_.push_back(found != line_of.end() ? found->second : -1);
    }
    for (size_t row = 0; row < lines.size(); ++row) {
        if (std::find(source_rows_.begin(), source_rows_.end(), static_cast<int64_t>(row)) != source_rows_.end()) continue;
        pieces_.push_back(lines[row]);
        source_rows_.push_back(static_cast<int64_t>(row));
    }
    for (size_t id = 0; id < pieces_.size(); ++id) ids_.emplace(pieces_[id], static_cast<int32_t>(id));
}

int32_t WordPiece::id(std::string_view piece) const {
    const auto found = ids_.find(std::string(piece));
    return found == ids_.end() ? kUnkId : found->second;
}

void WordPiece::encode(std::string_view text, std::vector<int32_t>& out) const {
    for (const std::u32string& word : basic_words(text)) encode_word(word, out);
}

// WordpieceTokenizer.tokenize of one word: the longest piece from the left, then "##" pieces.
void WordPiece::encode_word(const std::u32string& word, std::vector<int32_t>& out) const {
    if (word.size() > kMaxWordCharacters) {
        out.push_back(kUnkId);
        return;
    }
    const size_t first = out.size();
    for (size_t start = 0; start < word.size();) {
        int32_t piece = -1;
        size_t end = word.size();
        for (; end > start; --end) {
            std::string candidate = start > 0 ? "##" : "";
            candidate += to_utf8(std::u32string_view(word).substr(start, end - start));
            const auto found = ids_.find(candidate);
            if (found != ids_.end()) {
                piece = found->second;
                break;
            }
        }
        if (piece < 0) {
            out.resize(first);
            out.push_back(kUnkId);
            return;
        }
        out.push_back(piece);
        start = end;
    }
}

}  // namespace hnas::data
