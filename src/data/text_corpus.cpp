// Sentence splitting, reading text sources into token ids, and the corpus of parts (text_corpus.h).
#include "data/text_corpus.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

#include "base/check.h"

namespace hnas::data {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

// UTF-8 curly quotes: ‘ ’ “ ”.
constexpr std::string_view kLeftSingle = "\xE2\x80\x98", kRightSingle = "\xE2\x80\x99";
constexpr std::string_view kLeftDouble = "\xE2\x80\x9C", kRightDouble = "\xE2\x80\x9D";

bool at(std::string_view text, size_t i, std::string_view what) { return text.compare(i, what.size(), what) == 0; }

// Titles and other abbreviations that are followed by a period and a capitalized word mid-sentence.
constexpr std::array<std::string_view, 24> kAbbreviations = {
    "Mr", "Mrs", "Ms",  "Dr",  "St",  "Jr",  "Sr",  "Mt",  "Messrs", "Prof", "Rev", "Gen",
    "Col", "Capt", "Lt", "Gov", "Sen", "Rep", "Hon", "Esq", "Co",     "Inc",  "No",  "vs"};

// True if the period at text[period] ends an abbreviation rather than a sentence.
bool ends_abbreviation(std::string_view text, size_t sentence_start, size_t period) {
    size_t begin = period;
    while (begin > sentence_start && !is_space(text[begin - 1])) --begin;
    std::string_view word = text.substr(begin, period - begin);
    while (!word.empty() && (word.front() == '"' || word.front() == '\'' || word.front() == '(' || word.front() == '[')) {
        word.remove_prefix(1);
    }
    if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]))) return true;  // an initial
    if (word.find('.') != std::string_view::npos) return true;                              // U.S.
    return std::find(kAbbreviations.begin(), kAbbreviations.end(), word) != kAbbreviations.end();
}

// True if a new sentence may start at text[i].
bool opens_sentence(std::string_view text, size_t i) {
    const char c = text[i];
    if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    if (c == '"' || c == '\'' || c == '(' || c == '[') return true;
    return at(text, i, kLeftSingle) || at(text, i, kLeftDouble);
}

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text) {
    std::vector<std::string_view> sentences;
    auto emit = [&](size_t begin, size_t end) {
        const std::string_view sentence = trimmed(text.substr(begin, end - begin));
        if (!sentence.empty()) sentences.push_back(sentence);
    };
    size_t start = 0, i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c != '.' && c != '!' && c != '?') {
            ++i;
            continue;
        }
        // The terminator run: more terminators and closing quotes or brackets.
        size_t end = i + 1;
        while (end < text.size()) {
            const char d = text[end];
            if (d == '.' || d == '!' || d == '?' || d == '"' || d == '\'' || d == ')' || d == ']') {
                ++end;
            } else if (at(text, end, kRightSingle) || at(text, end, kRightDouble)) {
                end += 3;
            } else {
                break;
            }
        }
        size_t next = end;
        while (next < text.size() && is_space(text[next])) ++next;
        const bool boundary = end == text.size() || (next > end && (next == text.size() || opens_sentence(text, next)));
        if (boundary && !(c == '.' && ends_abbreviation(text, start, i))) {
            emit(start, end);
            start = end;
        }
        i = end;
    }
    emit(start, text.size());
    return sentences;
}

void TokenizedText::clear() {
    ids.clear();
    sentence_ends.clear();
    document_ends.clear();
    damaged_lines = 0;
}

TokenPart TokenizedText::part() const {
    return {ids.data(), 4, ids.size(), sentence_ends, document_ends};
}

namespace {

// Appends a chunk's sentences and documents to a TokenizedText (see the document units in text_corpus.h).
class TextBuilder {
public:
    TextBuilder(const Tokenizer& tokenizer, TokenizedText& out) : tokenizer_(tokenizer), out_(out) {}

    void add_text(std::string_view text) {
        for (std::string_view sentence : split_sentences(text)) {
            const size_t before = out_.ids.size();
            tokenizer_.encode(sentence, out_.ids, cache_);
            if (out_.ids.size() == before) continue;
            HNAS_CHECK(out_.ids.size() <= std::numeric_limits<uint32_t>::max(), "a text source gives more than 2^32 tokens; "
                       "`hnas prepare` it (docs/data.md), which reads it in chunks");
            out_.sentence_ends.push_back(static_cast<uint32_t>(out_.ids.size()));
        }
    }
    void end_document() {
        const uint32_t last = out_.document_ends.empty() ? 0 : out_.document_ends.back();
        if (out_.sentence_ends.size() > last) out_.document_ends.push_back(static_cast<uint32_t>(out_.sentence_ends.size()));
    }

private:
    const Tokenizer& tokenizer_;
    EncodeCache cache_;
    TokenizedText& out_;
};

}  // namespace

void read_text(const TextSource& source, const SourceChunk& chunk, const Tokenizer& tokenizer, size_t max_line_bytes,
               DamagedLines damaged, TokenizedText& out) {
    LineReader reader(source.path, max_line_bytes);
    if (chunk.begin > 0) reader.seek(chunk.begin, chunk.first_line);
    TextBuilder builder(tokenizer, out);
    std::string block;
    std::string_view line;
    auto flush_block = [&] {
        if (block.empty()) return;
        builder.add_text(block);
        block.clear();
        if (source.unit == DocumentUnit::block) builder.end_document();
    };
    while ((chunk.end == 0 || reader.offset() < chunk.end) && reader.next(line)) {
        if (!accept_line(line, source.path, reader.line_number(), damaged)) {
            ++out.damaged_lines;
            continue;
        }
        if (source.unit == DocumentUnit::line) {
            builder.add_text(line);
            builder.end_document();
        } else if (is_blank(line)) {
            flush_block();
        } else {
            if (!block.empty()) block += ' ';
            block += line;
        }
    }
    flush_block();
    if (chunk.ends_file) builder.end_document();  // a whole file (or nothing left, for the other units)
}

TokenCorpus::TokenCorpus(std::vector<TokenPart> parts, std::shared_ptr<const void> owners) : owners_(std::move(owners)) {
    for (const TokenPart& part : parts) {
        if (part.sentence_ends.empty()) continue;
        parts_.push_back({part, tokens_, sentences_, documents_});
        tokens_ += part.tokens;
        sentences_ += part.sentence_ends.size();
        documents_ += part.document_ends.size();
    }
}

const TokenCorpus::Placed& TokenCorpus::part_of_sentence(uint64_t s) const {
    HNAS_CHECK(s < sentences_, "corpus: sentence ", s, " of ", sentences_);
    const auto after = std::upper_bound(parts_.begin(), parts_.end(), s,
                                        [](uint64_t value, const Placed& p) { return value < p.first_sentence; });
    return *(after - 1);
}

uint64_t TokenCorpus::sentence_end(uint64_t s) const {
    const Placed& p = part_of_sentence(s);
    return p.first_token + p.part.sentence_ends[s - p.first_sentence];
}

uint64_t TokenCorpus::document_end(uint64_t d) const {
    HNAS_CHECK(d < documents_, "corpus: document ", d, " of ", documents_);
    const auto after = std::upper_bound(parts_.begin(), parts_.end(), d,
                                        [](uint64_t value, const Placed& p) { return value < p.first_document; });
    // Parts without a document end share their first_document with the next one: the last of equals holds d.
    const Placed& p = *(after - 1);
    return p.first_sentence + p.part.document_ends[d - p.first_document];
}

uint64_t TokenCorpus::document_of(uint64_t s) const {
    if (s >= sentences_) return documents_;
    // Every document of an earlier part ends at or before this part's first sentence; of this part's,
    // those ending at or before s come first. (Planning asks this of every sentence it visits.)
    const Placed& p = part_of_sentence(s);
    const std::span<const uint32_t> ends = p.part.document_ends;
    return p.first_document + static_cast<uint64_t>(std::upper_bound(ends.begin(), ends.end(), s - p.first_sentence) - ends.begin());
}

bool TokenCorpus::starts_document(uint64_t s) const {
    const uint64_t d = document_of(s);
    return d == 0 ? s == 0 : document_end(d - 1) == s;
}

void TokenCorpus::append_tokens(uint64_t begin, uint64_t end, std::vector<int32_t>& out) const {
    HNAS_CHECK(begin <= end && end <= tokens_, "corpus: tokens [", begin, ", ", end, ") of ", tokens_);
    auto part = std::upper_bound(parts_.begin(), parts_.end(), begin,
                                 [](uint64_t value, const Placed& p) { return value < p.first_token; }) - 1;
    while (begin < end) {
        const uint64_t local = begin - part->first_token;
        const uint64_t take = std::min(end - begin, part->part.tokens - local);
        if (part->part.id_bytes == 2) {
            const auto* ids = static_cast<const uint16_t*>(part->part.ids) + local;
            out.insert(out.end(), ids, ids + take);
        } else {
            const auto* ids = static_cast<const int32_t*>(part->part.ids) + local;
            out.insert(out.end(), ids, ids + take);
        }
        begin += take;
        ++part;
    }
}

TokenCorpus read_corpus(const std::vector<TextSource>& sources, const Tokenizer& tokenizer, size_t max_line_bytes,
                        DamagedLines damaged) {
    auto texts = std::make_shared<std::vector<TokenizedText>>(sources.size());
    std::vector<TokenPart> parts;
    for (size_t i = 0; i < sources.size(); ++i) {
        read_text(sources[i], SourceChunk{}, tokenizer, max_line_bytes, damaged, (*texts)[i]);
        parts.push_back((*texts)[i].part());
    }
    return TokenCorpus(std::move(parts), texts);
}

}  // namespace hnas::data
