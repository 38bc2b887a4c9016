// Sentence splitting, ALBERT sequence packing and n-gram masking, and the masked-LM batch pipeline
// (see mlm.h).
#include "data/mlm.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>

#include "base/check.h"
#include "base/hash.h"
#include "data/prefetch.h"

namespace hnas::data {

namespace {

// Purposes of the derived random streams (batching.h).
constexpr uint64_t kSequenceStream = 0x31A'0001;
constexpr uint64_t kMaskStream = 0x31A'0002;

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

namespace {

void check_masking_options(const MaskingOptions& options) {
    HNAS_CHECK(options.mask_prob > 0.0 && options.mask_prob < 1.0, "masking: mask_prob ", options.mask_prob,
               " is not in (0, 1)");
    HNAS_CHECK(options.max_ngram >= 1, "masking: max_ngram must be at least 1");
    HNAS_CHECK(options.mask_token_prob >= 0.0 && options.random_token_prob >= 0.0 &&
                   options.mask_token_prob + options.random_token_prob <= 1.0,
               "masking: mask_token_prob and random_token_prob must be non-negative with a sum of at most 1");
}

// The tokens [begin, end) of a sequence.
struct Word {
    int32_t begin, end;
};

// A sequence's words, and for each the last word of its segment (n-grams stay inside a segment).
struct SequenceWords {
    std::vector<Word> words;
    std::vector<size_t> segment_last;
    int32_t candidates = 0;  // tokens that may be masked: all but [CLS], [SEP] and padding
};

SequenceWords split_words(std::span<const int32_t> ids, const Tokenizer& tokenizer) {
    SequenceWords out;
    bool open_word = false;
    auto close_segment = [&] {
        for (size_t w = out.segment_last.size(); w < out.words.size(); ++w) out.segment_last.push_back(out.words.size() - 1);
        open_word = false;
    };
    for (int32_t t = 0; t < static_cast<int32_t>(ids.size()); ++t) {
        const int32_t id = ids[static_cast<size_t>(t)];
        if (id == kClsId || id == kSepId || id == kPadId) {
            close_segment();
            continue;
        }
        ++out.candidates;
        if (!open_word || tokenizer.starts_word(id)) {
            out.words.push_back({t, t + 1});
            open_word = true;
        } else {
            out.words.back().end = t + 1;
        }
    }
    close_segment();
    return out;
}

// p(n) ∝ 1/n over n = 1..max_ngram (ALBERT, section 4.1).
struct NgramLengths {
    std::vector<double> weights;
    double total = 0.0;

    explicit NgramLengths(int max_ngram) {
        for (int n = 1; n <= max_ngram; ++n) {
            weights.push_back(1.0 / n);
            total += 1.0 / n;
        }
    }
    double mean() const { return static_cast<double>(weights.size()) / total; }  // Σ n · (1/n) / Σ 1/n
    size_t draw(Rng& rng) const {
        double draw = rng.uniform() * total;
        size_t n = 1;
        while (n < weights.size() && draw >= weights[n - 1]) {
            draw -= weights[n - 1];
            ++n;
        }
        return n;
    }
};

// The number of n-grams is fixed before any length is drawn (mask_prob × tokens / mean length, the
// fraction rounded up with that probability, at least one), so the lengths taken are distributed as
// p(n) exactly and the expected count of selected tokens is mask_prob × tokens.
int64_t ngram_count(const SequenceWords& sequence, const NgramLengths& lengths, double mask_prob, Rng& rng) {
    // The mean length of an n-gram in tokens, estimated from this sequence's tokens per word.
    const double mean_tokens = lengths.mean() * sequence.candidates / static_cast<double>(sequence.words.size());
    const double target = mask_prob * sequence.candidates;
    const double spans = target / mean_tokens;
    const double whole = std::floor(spans);
    return std::max<int64_t>(1, static_cast<int64_t>(whole) + (rng.uniform() < spans - whole ? 1 : 0));
}

// From order[cursor] on, the first start where n uncovered words of one segment follow; order.size()
// when there is none.
size_t next_fitting_start(const std::vector<uint32_t>& order, size_t cursor, size_t n, const SequenceWords& sequence,
                          const std::vector<uint8_t>& covered) {
    auto fits = [&](uint32_t w) {
        if (w + n - 1 > sequence.segment_last[w]) return false;
        for (size_t k = 0; k < n; ++k) {
            if (covered[w + k]) return false;
        }
        return true;
    };
    while (cursor < order.size() && !fits(order[cursor])) ++cursor;
    return cursor;
}

// Selects the tokens [begin, end) for prediction, (position, original id) into `selected`, and
// replaces each by [MASK], by a random ordinary token, or keeps it, as the options' rates say.
void corrupt_tokens(std::span<int32_t> ids, int32_t begin, int32_t end, const MaskingOptions& options, int32_t vocab_size,
                    Rng& rng, std::vector<std::pair<int32_t, int32_t>>& selected) {
    for (int32_t t = begin; t < end; ++t) {
        int32_t& token = ids[static_cast<size_t>(t)];
        selected.emplace_back(t, token);
        const float u = rng.uniform();
        if (u < options.mask_token_prob) {
            token = kMaskId;
        } else if (u < options.mask_token_prob + options.random_token_prob) {
            token = kNumSpecialIds + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size - kNumSpecialIds)));
        }
    }
}

}  // namespace

MaskingResult mask_sequence(std::span<int32_t> ids, const Tokenizer& tokenizer, const MaskingOptions& options,
                            Rng& rng) {
    check_masking_options(options);
    const SequenceWords sequence = split_words(ids, tokenizer);
    MaskingResult result;
    if (sequence.candidates == 0) return result;

    const NgramLengths lengths(options.max_ngram);
    std::vector<uint32_t> order(sequence.words.size());
    for (uint32_t w = 0; w < order.size(); ++w) order[w] = w;
    shuffle_in_place(order, rng);
    std::vector<uint8_t> covered(sequence.words.size(), 0);
    std::vector<std::pair<int32_t, int32_t>> selected;  // (position, original id)
    const int64_t count = ngram_count(sequence, lengths, options.mask_prob, rng);
    size_t cursor = 0;
    for (int64_t span = 0; span < count; ++span) {
        const size_t n = lengths.draw(rng);
        // Place it at the next start (in random order) where it fits; starts that cannot hold it are passed over.
        cursor = next_fitting_start(order, cursor, n, sequence, covered);
        if (cursor == order.size()) break;  // no room left (only in nearly fully masked sequences)
        const uint32_t w = order[cursor];
        const Word first = sequence.words[w], last = sequence.words[w + n - 1];
        const auto tokens = static_cast<size_t>(last.end - first.begin);
        if (options.max_predictions > 0 && selected.size() + tokens > static_cast<size_t>(options.max_predictions)) continue;
        ++cursor;
        for (size_t k = 0; k < n; ++k) covered[w + k] = 1;
        corrupt_tokens(ids, first.begin, last.end, options, tokenizer.vocab_size(), rng, selected);
        result.ngram_words.push_back(static_cast<int32_t>(n));
    }
    std::sort(selected.begin(), selected.end());
    for (const auto& [position, label] : selected) {
        result.positions.push_back(position);
        result.labels.push_back(label);
    }
    return result;
}

namespace {

// Every sentence of every document as ids, back to back.
struct TokenizedCorpus {
    std::vector<int32_t> tokens;
    std::vector<size_t> sentence_end;   // sentence s is tokens[sentence_end[s-1], sentence_end[s])
    std::vector<size_t> document_end;   // document d is sentences [document_end[d-1], document_end[d])

    size_t sentence_begin(size_t s) const { return s == 0 ? 0 : sentence_end[s - 1]; }
    size_t document_begin(size_t d) const { return d == 0 ? 0 : document_end[d - 1]; }
};

// Reads the sources into a TokenizedCorpus (see the document units in mlm.h).
class CorpusBuilder {
public:
    CorpusBuilder(const Tokenizer& tokenizer, TokenizedCorpus& corpus) : tokenizer_(tokenizer), corpus_(corpus) {}

    void read(const TextSource& source, size_t max_line_bytes, DamagedLines damaged) {
        LineReader reader(source.path, max_line_bytes);
        std::string block;
        std::string_view line;
        auto flush_block = [&] {
            if (block.empty()) return;
            add_text(block);
            block.clear();
            if (source.unit == DocumentUnit::block) end_document();
        };
        while (reader.next(line)) {
            if (!accept_line(line, source.path, reader.line_number(), damaged)) continue;
            if (source.unit == DocumentUnit::line) {
                add_text(line);
                end_document();
            } else if (is_blank(line)) {
                flush_block();
            } else {
                if (!block.empty()) block += ' ';
                block += line;
            }
        }
        flush_block();
        end_document();  // a whole file (or nothing left, for the other units)
    }

private:
    void add_text(std::string_view text) {
        for (std::string_view sentence : split_sentences(text)) {
            const size_t before = corpus_.tokens.size();
            tokenizer_.encode(sentence, corpus_.tokens, cache_);
            if (corpus_.tokens.size() > before) corpus_.sentence_end.push_back(corpus_.tokens.size());
        }
    }

    void end_document() {
        const size_t last = corpus_.document_end.empty() ? 0 : corpus_.document_end.back();
        if (corpus_.sentence_end.size() > last) corpus_.document_end.push_back(corpus_.sentence_end.size());
    }

    const Tokenizer& tokenizer_;
    EncodeCache cache_;
    TokenizedCorpus& corpus_;
};

// One [CLS] first [SEP] second [SEP] sequence, as token ranges of the corpus.
struct Sequence {
    size_t first_begin, first_end, second_begin, second_end;
    bool swapped;
    int64_t length() const { return static_cast<int64_t>(first_end - first_begin + second_end - second_begin + 3); }
};

uint64_t bits(double value) { return std::bit_cast<uint64_t>(value); }

// The synchronous pipeline behind MlmBatcher (driven by PrefetchedPipeline).
class MlmEngine {
public:
    MlmEngine(Tokenizer tokenizer, MlmDataOptions options)
        : tokenizer_(std::move(tokenizer)), options_(validated(std::move(options))) {
        uint64_t hash = tokenizer_.model_hash();
        CorpusBuilder builder(tokenizer_, corpus_);
        for (const TextSource& source : options_.sources) {
            std::error_code error;
            const uint64_t size = std::filesystem::file_size(source.path, error);
            HNAS_CHECK(!error, "cannot open ", source.path, ": ", error.message());
            HNAS_CHECK(size > 0, source.path, " is empty");
            hash = hash_combine(hash_combine(hash, size), static_cast<uint64_t>(source.unit));
            builder.read(source, options_.max_line_bytes, options_.damaged_lines);
        }
        bool usable = false;
        for (size_t d = 0; d < corpus_.document_end.size() && !usable; ++d) {
            usable = corpus_.sentence_end[corpus_.document_end[d] - 1] -
                         corpus_.sentence_begin(corpus_.document_begin(d)) >= 2;
        }
        starts_document_.assign(corpus_.sentence_end.size(), 0);
        for (size_t d = 0; d < corpus_.document_end.size(); ++d) starts_document_[corpus_.document_begin(d)] = 1;
        HNAS_CHECK(usable, "masked-LM data: no document of ", options_.sources.front().path,
                   (options_.sources.size() > 1 ? " and the other sources" : ""),
                   " has the two tokens a sentence pair needs");
        for (uint64_t value : {static_cast<uint64_t>(options_.max_seq), bits(options_.short_seq_prob), bits(options_.swap_prob),
                               bits(options_.masking.mask_prob), static_cast<uint64_t>(options_.masking.max_ngram),
                               bits(options_.masking.mask_token_prob), bits(options_.masking.random_token_prob),
                               static_cast<uint64_t>(options_.shuffle), static_cast<uint64_t>(options_.batch.max_sentences),
                               static_cast<uint64_t>(options_.batch.max_tokens)}) {
            hash = hash_combine(hash, value);
        }
        // Packing enters only when it is not the default, so positions saved before it existed still resume.
        if (options_.packing != Packing::document) hash = hash_combine(hash, static_cast<uint64_t>(options_.packing));
        hash = hash_padding(hash, options_.batch);
        position_.fingerprint = hash_combine(hash, options_.seed);
    }

    std::optional<MlmBatch> produce() {
        if (options_.epochs > 0 && position_.epoch >= options_.epochs) return std::nullopt;
        plan_epoch();
        MlmBatch batch = build(batches_[static_cast<size_t>(position_.batch)]);
        position_.examples += batch.input_ids.dim(0);
        if (++position_.batch == static_cast<int64_t>(batches_.size())) {
            position_.batch = 0;
            ++position_.epoch;
            position_.examples = 0;
        }
        return batch;
    }

    DataPosition position() const { return position_; }

    void restore(const DataPosition& position) {
        HNAS_CHECK(position.fingerprint == position_.fingerprint,
                   "data position: saved for different masked-LM data or options (fingerprint ", position.fingerprint,
                   ", this pipeline ", position_.fingerprint, ")");
        HNAS_CHECK(position.window == 0, "data position: masked-LM data has no window ", position.window);
        position_ = position;
        planned_epoch_ = -1;
    }

    int64_t documents() const { return static_cast<int64_t>(corpus_.document_end.size()); }
    int64_t corpus_tokens() const { return static_cast<int64_t>(corpus_.tokens.size()); }

private:
    static MlmDataOptions validated(MlmDataOptions options) {
        HNAS_CHECK(!options.sources.empty(), "masked-LM data: no text sources");
        HNAS_CHECK(options.max_seq >= 5, "masked-LM data: max_seq ", options.max_seq,
                   " leaves no room for two segments beside [CLS] and two [SEP]");
        HNAS_CHECK(options.short_seq_prob >= 0.0 && options.short_seq_prob <= 1.0,
                   "masked-LM data: short_seq_prob must be in [0, 1]");
        HNAS_CHECK(options.swap_prob >= 0.0 && options.swap_prob <= 1.0, "masked-LM data: swap_prob must be in [0, 1]");
        HNAS_CHECK(options.epochs >= 0 && options.prefetch >= 0, "masked-LM data: epochs and prefetch must not be negative");
        check_masking_options(options.masking);
        check_batch_options(options.batch, options.max_seq, "masked-LM data");
        return options;
    }

    // Trims a sequence pair to `budget` tokens: tokens go from the longer side, at its front or back
    // at random (truncate_seq_pair in BERT and ALBERT).
    static void truncate_pair(Sequence& s, size_t budget, Rng& rng) {
        while ((s.first_end - s.first_begin) + (s.second_end - s.second_begin) > budget) {
            const bool first_longer = s.first_end - s.first_begin > s.second_end - s.second_begin;
            size_t& begin = first_longer ? s.first_begin : s.second_begin;
            size_t& end = first_longer ? s.first_end : s.second_end;
            if (rng.uniform() < 0.5f) {
                ++begin;
            } else {
                --end;
            }
        }
    }

    // The sentence at which the A/B cut of chunk [first, last] falls (first < cut ≤ last): a random
    // one of those that do not start a document, or of all when every one does.
    size_t draw_cut(size_t first, size_t last, Rng& rng) const {
        size_t inside = 0;
        for (size_t s = first + 1; s <= last; ++s) inside += !starts_document_[s];
        if (inside == 0) return first + 1 + static_cast<size_t>(rng.below(last - first));
        size_t pick = static_cast<size_t>(rng.below(inside));
        for (size_t s = first + 1;; ++s) {
            if (!starts_document_[s] && pick-- == 0) return s;
        }
    }

    // The epoch's sequences (create_instances_from_document, see mlm.h) and their batches. A stream is
    // one document, or the whole corpus with Packing::corpus.
    void plan_epoch() {
        if (planned_epoch_ == position_.epoch) return;
        Rng rng = derive_rng(options_.seed, kSequenceStream, static_cast<uint64_t>(position_.epoch));
        const size_t budget = static_cast<size_t>(options_.max_seq - 3);
        auto draw_target = [&] {
            if (rng.uniform() < options_.short_seq_prob) return 2 + static_cast<size_t>(rng.below(budget - 1));
            return budget;
        };
        const bool packed = options_.packing == Packing::corpus;
        const size_t streams = packed ? 1 : corpus_.document_end.size();
        sequences_.clear();
        for (size_t d = 0; d < streams; ++d) {
            const size_t first_sentence = packed ? 0 : corpus_.document_begin(d);
            const size_t end_sentence = packed ? corpus_.sentence_end.size() : corpus_.document_end[d];
            size_t chunk_first = first_sentence;
            size_t target = draw_target();
            for (size_t s = first_sentence; s < end_sentence; ++s) {
                const size_t chunk_begin = corpus_.sentence_begin(chunk_first), chunk_end = corpus_.sentence_end[s];
                if (s + 1 < end_sentence && chunk_end - chunk_begin < target) continue;
                const size_t sentences = s + 1 - chunk_first;
                size_t split;
                if (sentences >= 2) {
                    split = corpus_.sentence_begin(draw_cut(chunk_first, s, rng));
                } else {
                    split = chunk_end - chunk_begin >= 2 ? chunk_begin + 1 + static_cast<size_t>(rng.below(chunk_end - chunk_begin - 1))
                                                         : chunk_begin;  // one token: no pair
                }
                if (split > chunk_begin) {
                    Sequence sequence{chunk_begin, split, split, chunk_end, false};
                    if (rng.uniform() < options_.swap_prob) {
                        sequence = {split, chunk_end, chunk_begin, split, true};
                    }
                    truncate_pair(sequence, budget, rng);
                    sequences_.push_back(sequence);
                }
                chunk_first = s + 1;
                target = draw_target();
            }
        }
        if (options_.shuffle) shuffle_in_place(sequences_, rng);
        std::vector<uint64_t> keys(sequences_.size());
        std::vector<int64_t> sizes(sequences_.size());
        for (size_t i = 0; i < sequences_.size(); ++i) {
            sizes[i] = sequences_[i].length();
            keys[i] = static_cast<uint64_t>(sizes[i]);
        }
        batches_ = plan_batches(keys, sizes, options_.batch, options_.shuffle ? &rng : nullptr);
        HNAS_CHECK(position_.batch < static_cast<int64_t>(batches_.size()), "data position: batch ", position_.batch,
                   " of epoch ", position_.epoch, " does not exist (it has ", batches_.size(), " batches)");
        planned_epoch_ = position_.epoch;
    }

    MlmBatch build(const std::vector<uint32_t>& rows) const {
        int64_t length = 0;
        for (uint32_t row : rows) length = std::max(length, sequences_[row].length());
        length = padded_length(length, options_.batch, options_.max_seq);
        const int64_t batch_size = static_cast<int64_t>(rows.size());
        // Masked positions are int32 indices into the flattened batch.
        HNAS_CHECK(batch_size * length <= std::numeric_limits<int32_t>::max(), "masked LM: a batch of ", batch_size, " rows of ", length,
                   " tokens has more positions than int32 indices reach; lower data.batch_sentences or data.batch_tokens");
        MlmBatch batch;
        batch.input_ids = Tensor::zeros({batch_size, length}, DType::i32);
        batch.segment_ids = Tensor::zeros({batch_size, length}, DType::i32);
        batch.valid = Tensor::zeros({batch_size, length});
        batch.sentence_order = Tensor::zeros({batch_size}, DType::i32);
        std::vector<int32_t> positions, labels, ids;
        for (int64_t b = 0; b < batch_size; ++b) {
            const uint32_t index = rows[static_cast<size_t>(b)];
            const Sequence& s = sequences_[index];
            ids.clear();
            ids.push_back(kClsId);
            ids.insert(ids.end(), corpus_.tokens.begin() + static_cast<std::ptrdiff_t>(s.first_begin),
                       corpus_.tokens.begin() + static_cast<std::ptrdiff_t>(s.first_end));
            ids.push_back(kSepId);
            const size_t second_start = ids.size();
            ids.insert(ids.end(), corpus_.tokens.begin() + static_cast<std::ptrdiff_t>(s.second_begin),
                       corpus_.tokens.begin() + static_cast<std::ptrdiff_t>(s.second_end));
            ids.push_back(kSepId);
            // A stream per sequence: masks do not depend on batch composition or prefetching.
            Rng rng = derive_rng(options_.seed, kMaskStream, static_cast<uint64_t>(position_.epoch), index);
            const MaskingResult masked = mask_sequence(ids, tokenizer_, options_.masking, rng);
            std::copy(ids.begin(), ids.end(), batch.input_ids.ints() + b * length);
            std::fill(batch.segment_ids.ints() + b * length + static_cast<int64_t>(second_start),
                      batch.segment_ids.ints() + b * length + static_cast<int64_t>(ids.size()), 1);
            std::fill(batch.valid.data() + b * length, batch.valid.data() + b * length + static_cast<int64_t>(ids.size()),
                      1.0f);
            for (size_t k = 0; k < masked.positions.size(); ++k) {
                positions.push_back(static_cast<int32_t>(b * length + masked.positions[k]));
                labels.push_back(masked.labels[k]);
            }
            batch.sentence_order.ints()[b] = s.swapped ? 1 : 0;
            batch.tokens += static_cast<int64_t>(ids.size());
        }
        const int64_t count = static_cast<int64_t>(positions.size());
        batch.masked_positions = Tensor::from_ints({count}, positions);
        batch.masked_labels = Tensor::from_ints({count}, labels);
        return batch;
    }

    Tokenizer tokenizer_;
    MlmDataOptions options_;
    TokenizedCorpus corpus_;
    std::vector<uint8_t> starts_document_;  // per sentence: 1 if it begins its document
    DataPosition position_;
    int64_t planned_epoch_ = -1;
    std::vector<Sequence> sequences_;
    std::vector<std::vector<uint32_t>> batches_;
};

}  // namespace

struct MlmBatcher::Impl {
    Impl(MlmEngine engine, size_t prefetch) : pipeline(std::move(engine), prefetch) {}
    PrefetchedPipeline<MlmEngine, MlmBatch> pipeline;
};

MlmBatcher::MlmBatcher(Tokenizer tokenizer, MlmDataOptions options) {
    const size_t prefetch = static_cast<size_t>(std::max<int64_t>(0, options.prefetch));
    impl_ = std::make_unique<Impl>(MlmEngine(std::move(tokenizer), std::move(options)), prefetch);
}

MlmBatcher::~MlmBatcher() = default;

std::optional<MlmBatch> MlmBatcher::next() { return impl_->pipeline.next(); }
DataPosition MlmBatcher::position() const { return impl_->pipeline.position(); }
void MlmBatcher::restore(const DataPosition& position) { impl_->pipeline.restore(position); }
int64_t MlmBatcher::documents() const { return impl_->pipeline.engine().documents(); }
int64_t MlmBatcher::corpus_tokens() const { return impl_->pipeline.engine().corpus_tokens(); }

}  // namespace hnas::data
