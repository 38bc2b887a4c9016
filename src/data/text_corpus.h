// Text corpora as token ids: documents read from text files, split into sentences and tokenized
// (the masked-LM data's input, mlm.h), held either in memory or in the memory-mapped shards that
// `hnas prepare` writes once (prepared_text.h). Both give the same TokenCorpus, so the pipeline
// above draws the very same batches from either.
//
// Documents and sentences. A TextSource says what a document is: a whole file (Moby-Dick), each
// blank-line-separated block (paragraphs), or each line (sotu.txt: one address per line). Lines of a
// block are joined with spaces (hard-wrapped prose), and a blank line always ends a sentence.
// split_sentences() is rule-based (see there).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/text_io.h"
#include "data/tokenizer.h"

namespace hnas::data {

// Splits text into sentences with simple rules: a sentence ends after '.', '!' or '?' (plus any
// closing quotes or brackets right after it) when whitespace follows and the next word starts with
// an uppercase letter, a digit or an opening quote or bracket — unless the terminator is a period
// after a known abbreviation (Mr., Dr., St., ...), a single letter (an initial) or a word holding
// another period (U.S.). The end of the text ends the last sentence. Returns trimmed, non-empty
// views into `text`.
std::vector<std::string_view> split_sentences(std::string_view text);

enum class DocumentUnit { file, block, line };
inline constexpr EnumName<DocumentUnit> kDocumentUnitNames[]{{DocumentUnit::file, "file"}, {DocumentUnit::block, "block"}, {DocumentUnit::line, "line"}};
constexpr const auto& enum_names(DocumentUnit) { return kDocumentUnitNames; }

struct TextSource {
    std::string path;
    DocumentUnit unit = DocumentUnit::line;
};

// One stretch of a corpus: its token ids back to back, the end of each sentence (a token offset
// within the part) and the end of each document that ends in it (a sentence count within the part). A
// document may begin in an earlier part (a whole-file document read in chunks).
struct TokenPart {
    const void* ids = nullptr;  // id_bytes each: 2 (uint16) or 4 (int32)
    int id_bytes = 4;
    uint64_t tokens = 0;
    std::span<const uint32_t> sentence_ends;  // strictly increasing, the last equal to tokens
    std::span<const uint32_t> document_ends;  // strictly increasing, at most sentence_ends.size()
};

// Token ids of one part being read, which a TokenPart then views.
struct TokenizedText {
    std::vector<int32_t> ids;
    std::vector<uint32_t> sentence_ends, document_ends;
    int64_t damaged_lines = 0;  // left out under DamagedLines::skip
    TokenPart part() const;
    void clear();
};

// Where to read a source: its bytes [begin, end) (end 0: to the end of the file), starting at line
// first_line (1-based). A chunk ends a document only at the end of the file or, for line and block
// units, where its own text ends one (prepared_text.cpp cuts chunks only there).
struct SourceChunk {
    uint64_t begin = 0, end = 0;
    int64_t first_line = 1;
    bool ends_file = true;
};

// Reads a chunk of a text source into `out` (see the document units above). Throws naming the file
// and line on invalid UTF-8 or control bytes under DamagedLines::reject and on over-long lines.
void read_text(const TextSource& source, const SourceChunk& chunk, const Tokenizer& tokenizer, size_t max_line_bytes,
               DamagedLines damaged, TokenizedText& out);

// A corpus as a sequence of parts, addressed by global sentence, document and token indices.
class TokenCorpus {
public:
    // `owners` keeps alive whatever the parts point into (vectors, mapped files).
    TokenCorpus(std::vector<TokenPart> parts, std::shared_ptr<const void> owners);

    uint64_t tokens() const { return tokens_; }
    uint64_t sentences() const { return sentences_; }
    uint64_t documents() const { return documents_; }
    // Token offsets of sentence s: [sentence_begin(s), sentence_end(s)).
    uint64_t sentence_begin(uint64_t s) const { return s == 0 ? 0 : sentence_end(s - 1); }
    uint64_t sentence_end(uint64_t s) const;
    // Sentence indices of document d: [document_begin(d), document_end(d)).
    uint64_t document_begin(uint64_t d) const { return d == 0 ? 0 : document_end(d - 1); }
    uint64_t document_end(uint64_t d) const;
    // The document holding sentence s: the number of documents that end at or before it.
    uint64_t document_of(uint64_t s) const;
    // True if sentence s is the first of its document.
    bool starts_document(uint64_t s) const;
    // Appends the ids of tokens [begin, end) to `out`.
    void append_tokens(uint64_t begin, uint64_t end, std::vector<int32_t>& out) const;

private:
    struct Placed {
        TokenPart part;
        uint64_t first_token, first_sentence, first_document;
    };
    const Placed& part_of_sentence(uint64_t s) const;

    std::vector<Placed> parts_;
    std::shared_ptr<const void> owners_;
    uint64_t tokens_ = 0, sentences_ = 0, documents_ = 0;
};

// Reads, splits and tokenizes every source into memory (throws as read_text does).
TokenCorpus read_corpus(const std::vector<TextSource>& sources, const Tokenizer& tokenizer, size_t max_line_bytes,
                        DamagedLines damaged);

}  // namespace hnas::data
