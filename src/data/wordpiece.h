// BERT's WordPiece tokenization (Devlin et al. 2019), uncased, as Google's tokenization.py defines it:
// the basic tokenizer (drop NUL, U+FFFD and control characters, whitespace becomes a space, spaces
// around CJK ideographs, split on whitespace, lower-case, strip accents by NFD without nonspacing
// marks, split off every punctuation character), then per word the greedy longest-match-first
// segmentation into vocabulary pieces, continuation pieces carrying "##"; a word longer than 100
// characters, or one with no full segmentation, is [UNK]. The Unicode tables come from
// src/data/make_unicode_tables.py (src/data/unicode_tables.h).
//
// hnas fixes the special ids (src/data/tokenizer.h), so a vocab.txt's lines are renumbered: 0 [PAD],
// 1 [UNK], 2 bos, 3 eos, 4 [CLS], 5 [SEP], 6 [MASK], then every other line in file order. BERT has no
// begin and end pieces: bos and eos are the lines [BOS] and [EOS] when the file has them, and two
// added pieces of those names otherwise (bert-base-uncased's 30,522 lines give 30,524 ids).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hnas::data {

// The words of BERT's basic tokenization of UTF-8 text (invalid bytes count as U+FFFD and go).
std::vector<std::string> basic_tokenize(std::string_view text);

class WordPiece {
public:
    // From a vocab.txt's text (one piece per line); `origin` names it in errors: a missing [PAD],
    // [UNK], [CLS], [SEP] or [MASK], a duplicate line (both line numbers), an empty file.
    WordPiece(std::string_view vocab_text, const std::string& origin);

    const std::vector<std::string>& pieces() const { return pieces_; }  // by hnas id
    // The 0-based vocab.txt line of each hnas id; -1 for a piece added because the file lacks it.
    const std::vector<int64_t>& source_rows() const { return source_rows_; }
    int32_t id(std::string_view piece) const;  // kUnkId when the piece is not in the vocabulary
    // Appends the ids of `text`.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    void encode_word(const std::u32string& word, std::vector<int32_t>& out) const;

    std::vector<std::string> pieces_;
    std::vector<int64_t> source_rows_;
    std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace hnas::data
