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
#include <numeric>
#include <system_error>

#include "base/check.h"
#include "base/hash.h"
#include "data/prefetch.h"
#include "data/prepared_text.h"

namespace hnas::data {

namespace {

// Purposes of the derived random streams (batching.h).
constexpr uint64_t kSequenceStream = 0x31A'0001;
constexpr uint64_t kMaskStream = 0x31A'0002;
constexpr uint64_t kRegionStream = 0x31A'0003;


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

// One [CLS] first [SEP] second [SEP] sequence, as token ranges of the corpus.
struct Sequence {
    uint64_t first_begin, first_end, second_begin, second_end;
    bool swapped;
    int64_t length() const { return static_cast<int64_t>(first_end - first_begin + second_end - second_begin + 3); }
};

uint64_t bits(double value) { return std::bit_cast<uint64_t>(value); }

// The corpus the options name, in memory or prepared, with the byte size of each source.
struct OpenedCorpus {
    TokenCorpus corpus;
    std::vector<uint64_t> source_bytes;
};

OpenedCorpus open_corpus(const Tokenizer& tokenizer, const MlmDataOptions& options) {
    if (!options.prepared.empty()) {
        PreparedText prepared = open_prepared_text(options.prepared, options.sources, tokenizer);
        return {std::move(prepared.corpus), std::move(prepared.source_bytes)};
    }
    std::vector<uint64_t> sizes;
    for (const TextSource& source : options.sources) {
        std::error_code error;
        const uint64_t size = std::filesystem::file_size(source.path, error);
        HNAS_CHECK(!error, "cannot open ", source.path, ": ", error.message());
        HNAS_CHECK(size > 0, source.path, " is empty");
        sizes.push_back(size);
    }
    return {read_corpus(options.sources, tokenizer, options.max_line_bytes, options.damaged_lines), std::move(sizes)};
}

// The synchronous pipeline behind MlmBatcher (driven by PrefetchedPipeline).
class MlmEngine {
public:
    MlmEngine(Tokenizer tokenizer, MlmDataOptions options)
        : tokenizer_(std::move(tokenizer)), options_(validated(std::move(options))) {
        OpenedCorpus opened = open_corpus(tokenizer_, options_);
        corpus_ = std::make_unique<TokenCorpus>(std::move(opened.corpus));
        uint64_t hash = tokenizer_.model_hash();
        for (size_t i = 0; i < options_.sources.size(); ++i) {
            hash = hash_combine(hash_combine(hash, opened.source_bytes[i]), static_cast<uint64_t>(options_.sources[i].unit));
        }
        bool usable = false;
        for (uint64_t d = 0; d < corpus_->documents() && !usable; ++d) {
            usable = corpus_->sentence_end(corpus_->document_end(d) - 1) - corpus_->sentence_begin(corpus_->document_begin(d)) >= 2;
        }
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
        // A corpus of one shuffle window is planned whole, as before windows existed (same fingerprint).
        const uint64_t sentences = corpus_->sentences();
        if (sentences > static_cast<uint64_t>(options_.shuffle_sentences)) {
            region_sentences_ = std::max<uint64_t>(1, static_cast<uint64_t>(options_.shuffle_sentences / options_.shuffle_regions));
            regions_ = (sentences + region_sentences_ - 1) / region_sentences_;
            windows_ = (regions_ + static_cast<uint64_t>(options_.shuffle_regions) - 1) / static_cast<uint64_t>(options_.shuffle_regions);
            hash = hash_combine(hash_combine(hash, static_cast<uint64_t>(options_.shuffle_sentences)),
                                static_cast<uint64_t>(options_.shuffle_regions));
        } else {
            region_sentences_ = sentences;
        }
        position_.fingerprint = hash_combine(hash, options_.seed);
    }

    std::optional<MlmBatch> produce() {
        if (options_.epochs > 0 && position_.epoch >= options_.epochs) return std::nullopt;
        plan_window();
        MlmBatch batch = build(batches_[static_cast<size_t>(position_.batch)]);
        position_.examples += batch.batch_rows;
        if (++position_.batch == static_cast<int64_t>(batches_.size())) {
            position_.batch = 0;
            if (++position_.window == static_cast<int64_t>(windows_)) {
                position_.window = 0;
                ++position_.epoch;
                position_.examples = 0;
            }
        }
        return batch;
    }

    DataPosition position() const { return position_; }
    void restore(const DataPosition& position) {
        HNAS_CHECK(position.fingerprint == position_.fingerprint,
                   "data position: saved for different masked-LM data or options (fingerprint ", position.fingerprint,
                   ", this pipeline ", position_.fingerprint, ")");
        HNAS_CHECK(position.window >= 0 && static_cast<uint64_t>(position.window) < windows_, "data position: masked-LM data of ",
                   windows_, (windows_ == 1 ? " window" : " windows"), " per epoch has no window ", position.window);
        position_ = position;
        planned_epoch_ = -1;
    }

    int64_t documents() const { return static_cast<int64_t>(corpus_->documents()); }
    int64_t corpus_tokens() const { return static_cast<int64_t>(corpus_->tokens()); }
    int64_t windows_per_epoch() const { return static_cast<int64_t>(windows_); }
    std::pair<int, int> share() const { return {rank_, ranks_}; }
    void set_share(int rank, int ranks) {
        HNAS_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "masked-LM data: rank ", rank, " of ", ranks);
        rank_ = rank;
        ranks_ = ranks;
    }

private:
    static MlmDataOptions validated(MlmDataOptions options) {
        HNAS_CHECK(!options.sources.empty(), "masked-LM data: no text sources");
        HNAS_CHECK(options.max_seq >= 5, "masked-LM data: max_seq ", options.max_seq,
                   " leaves no room for two segments beside [CLS] and two [SEP]");
        HNAS_CHECK(options.short_seq_prob >= 0.0 && options.short_seq_prob <= 1.0,
                   "masked-LM data: short_seq_prob must be in [0, 1]");
        HNAS_CHECK(options.swap_prob >= 0.0 && options.swap_prob <= 1.0, "masked-LM data: swap_prob must be in [0, 1]");
        HNAS_CHECK(options.epochs >= 0 && options.prefetch >= 0, "masked-LM data: epochs and prefetch must not be negative");
        HNAS_CHECK(options.shuffle_sentences >= 1 && options.shuffle_regions >= 1,
                   "masked-LM data: shuffle_sentences and shuffle_regions must be at least 1");
        check_masking_options(options.masking);
        check_batch_options(options.batch, options.max_seq, "masked-LM data");
        return options;
    }

    // Trims a sequence pair to `budget` tokens: tokens go from the longer side, at its front or back
    // at random (truncate_seq_pair in BERT and ALBERT).
    static void truncate_pair(Sequence& s, uint64_t budget, Rng& rng) {
        while ((s.first_end - s.first_begin) + (s.second_end - s.second_begin) > budget) {
            const bool first_longer = s.first_end - s.first_begin > s.second_end - s.second_begin;
            uint64_t& begin = first_longer ? s.first_begin : s.second_begin;
            uint64_t& end = first_longer ? s.first_end : s.second_end;
            if (rng.uniform() < 0.5f) {
                ++begin;
            } else {
                --end;
            }
        }
    }

    // The sentence at which the A/B cut of chunk [first, last] falls (first < cut ≤ last): a random
    // one of those that do not start a document, or of all when every one does.
    uint64_t draw_cut(uint64_t first, uint64_t last, Rng& rng) const {
        uint64_t inside = 0;
        for (uint64_t s = first + 1; s <= last; ++s) inside += !corpus_->starts_document(s);
        if (inside == 0) return first + 1 + rng.below(last - first);
        uint64_t pick = rng.below(inside);
        for (uint64_t s = first + 1;; ++s) {
            if (!corpus_->starts_document(s) && pick-- == 0) return s;
        }
    }

    // The sequences of one stream, sentences [first_sentence, end_sentence) (create_instances_from_document,
    // see mlm.h), appended to sequences_.
    void plan_stream(uint64_t first_sentence, uint64_t end_sentence, Rng& rng) {
        const uint64_t budget = static_cast<uint64_t>(options_.max_seq - 3);
        auto draw_target = [&] {
            if (rng.uniform() < options_.short_seq_prob) return 2 + rng.below(budget - 1);
            return budget;
        };
        uint64_t chunk_first = first_sentence;
        uint64_t target = draw_target();
        for (uint64_t s = first_sentence; s < end_sentence; ++s) {
            const uint64_t chunk_begin = corpus_->sentence_begin(chunk_first), chunk_end = corpus_->sentence_end(s);
            if (s + 1 < end_sentence && chunk_end - chunk_begin < target) continue;
            const uint64_t sentences = s + 1 - chunk_first;
            uint64_t split;
            if (sentences >= 2) {
                split = corpus_->sentence_begin(draw_cut(chunk_first, s, rng));
            } else {
                split = chunk_end - chunk_begin >= 2 ? chunk_begin + 1 + rng.below(chunk_end - chunk_begin - 1)
                                                     : chunk_begin;  // one token: no pair
            }
            if (split > chunk_begin) {
                Sequence sequence{chunk_begin, split, split, chunk_end, false};
                if (rng.uniform() < options_.swap_prob) sequence = {split, chunk_end, chunk_begin, split, true};
                truncate_pair(sequence, budget, rng);
                sequences_.push_back(sequence);
            }
            chunk_first = s + 1;
            target = draw_target();
        }
    }

    // The sentences [begin, end) of the regions the current window visits, in visiting order: every
    // region once per epoch, in an order drawn per epoch (only the first region when there is one).
    std::vector<std::pair<uint64_t, uint64_t>> window_regions() const {
        std::vector<uint64_t> order(regions_);
        std::iota(order.begin(), order.end(), uint64_t{0});
        if (options_.shuffle && regions_ > 1) {
            Rng rng = derive_rng(options_.seed, kRegionStream, static_cast<uint64_t>(position_.epoch));
            shuffle_in_place(order, rng);
        }
        const uint64_t per_window = regions_ > 1 ? static_cast<uint64_t>(options_.shuffle_regions) : 1;
        const uint64_t first = static_cast<uint64_t>(position_.window) * per_window;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;
        for (uint64_t r = first; r < std::min(regions_, first + per_window); ++r) {
            const uint64_t begin = order[r] * region_sentences_;
            ranges.emplace_back(begin, std::min(corpus_->sentences(), begin + region_sentences_));
        }
        return ranges;
    }

    // The window's sequences and their batches. A stream is one document (cut at the region's ends), or
    // with Packing::corpus the whole region.
    void plan_window() {
        if (planned_epoch_ == position_.epoch && planned_window_ == position_.window) return;
        Rng rng = derive_rng(options_.seed, kSequenceStream, static_cast<uint64_t>(position_.epoch),
                             static_cast<uint64_t>(position_.window));
        sequences_.clear();
        for (const auto& [begin, end] : window_regions()) {
            if (options_.packing == Packing::corpus) {
                plan_stream(begin, end, rng);
                continue;
            }
            for (uint64_t d = corpus_->document_of(begin); d < corpus_->documents() && corpus_->document_begin(d) < end; ++d) {
                plan_stream(std::max(begin, corpus_->document_begin(d)), std::min(end, corpus_->document_end(d)), rng);
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
                   " of window ", position_.window, " of epoch ", position_.epoch, " does not exist (it has ",
                   batches_.size(), " batches)");
        planned_epoch_ = position_.epoch;
        planned_window_ = position_.window;
    }

    // Sequence `index` of the window as [CLS] A [SEP] B [SEP] ids; returns where B starts.
    size_t sequence_ids(const Sequence& s, std::vector<int32_t>& ids) const {
        ids.clear();
        ids.push_back(kClsId);
        corpus_->append_tokens(s.first_begin, s.first_end, ids);
        ids.push_back(kSepId);
        const size_t second_start = ids.size();
        corpus_->append_tokens(s.second_begin, s.second_end, ids);
        ids.push_back(kSepId);
        return second_start;
    }

    // The rows of this rank's share of a batch, padded to the whole batch's length.
    MlmBatch build(const std::vector<uint32_t>& batch_rows) const {
        int64_t length = 0;
        for (uint32_t row : batch_rows) length = std::max(length, sequences_[row].length());
        length = padded_length(length, options_.batch, options_.max_seq);
        const auto [first, last] = shard_rows(static_cast<int64_t>(batch_rows.size()), rank_, ranks_);
        const std::span<const uint32_t> rows(batch_rows.data() + first, static_cast<size_t>(last - first));
        const int64_t batch_size = static_cast<int64_t>(rows.size());
        // Masked positions are int32 indices into the flattened batch.
        HNAS_CHECK(batch_size * length <= std::numeric_limits<int32_t>::max(), "masked LM: a batch of ", batch_size, " rows of ", length,
                   " tokens has more positions than int32 indices reach; lower data.batch_sentences or data.batch_tokens");
        MlmBatch batch;
        batch.batch_rows = static_cast<int64_t>(batch_rows.size());
        batch.input_ids = Tensor::zeros({batch_size, length}, DType::i32);
        batch.segment_ids = Tensor::zeros({batch_size, length}, DType::i32);
        batch.valid = Tensor::zeros({batch_size, length});
        batch.sentence_order = Tensor::zeros({batch_size}, DType::i32);
        std::vector<int32_t> positions, labels, ids;
        for (int64_t b = 0; b < batch_size; ++b) {
            const uint32_t index = rows[static_cast<size_t>(b)];
            const Sequence& s = sequences_[index];
            const size_t second_start = sequence_ids(s, ids);
            check_ids(ids);
            // A stream per sequence: masks do not depend on batch composition or prefetching. The window
            // rides in the high bits, so a corpus of one window keeps the streams it had before windows.
            Rng rng = derive_rng(options_.seed, kMaskStream, static_cast<uint64_t>(position_.epoch),
                                 (static_cast<uint64_t>(position_.window) << 32) | index);
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

    // Prepared ids come from files: one outside the vocabulary is refused before the model reads it.
    void check_ids(const std::vector<int32_t>& ids) const {
        for (const int32_t id : ids) {
            HNAS_CHECK(id >= 0 && id < tokenizer_.vocab_size(), "masked-LM data: token id ", id, " is outside the vocabulary of ",
                       tokenizer_.vocab_size(), (options_.prepared.empty() ? "" : " (prepared data in "), options_.prepared,
                       (options_.prepared.empty() ? "" : ")"));
        }
    }

    Tokenizer tokenizer_;
    MlmDataOptions options_;
    std::unique_ptr<TokenCorpus> corpus_;
    uint64_t region_sentences_ = 0, regions_ = 1, windows_ = 1;
    int rank_ = 0, ranks_ = 1;  // the share of each batch built (MlmBatcher::share)
    DataPosition position_;
    int64_t planned_epoch_ = -1, planned_window_ = -1;
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
void MlmBatcher::share(int rank, int ranks) {
    if (impl_->pipeline.engine().share() != std::pair{rank, ranks}) impl_->pipeline.engine_before_start().set_share(rank, ranks);
}
int64_t MlmBatcher::windows_per_epoch() const { return impl_->pipeline.engine().windows_per_epoch(); }

}  // namespace hnas::data
