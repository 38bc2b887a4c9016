// Masked-LM pretraining data (BERT, Devlin et al. 2019; ALBERT, Lan et al. 2020): documents are read
// from text files, split into sentences, tokenized, packed into [CLS] A [SEP] B [SEP] sequences with
// ALBERT's sentence-order labels, masked with ALBERT's n-gram masking, and batched.
//
// Documents, sentences and their token ids come from a TokenCorpus (text_corpus.h): the sources read
// into memory, or the shards `hnas prepare` wrote (prepared_text.h), which give the very same batches.
//
// Sequences (ALBERT's create_instances_from_document): consecutive sentences of a document are
// gathered until they reach a target length — max_seq - 3, or with probability short_seq_prob a
// length drawn uniformly from [2, max_seq - 3] (drawn per sequence, not per document as in the
// original code, because these corpora have few, long documents) — and cut at a random sentence
// boundary into A and B (a chunk of one sentence is cut at a random token). Sentence-order
// prediction: with probability swap_prob A and B are swapped and the label is 1. The pair is
// trimmed to max_seq - 3 tokens by dropping tokens from the longer side, at its front or back at
// random. Every epoch draws new sequences, orders and masks from the seed.
//
// Packing. ALBERT's sequences never leave their document, so a corpus of one-sentence documents
// (Gigaword's article leads, one per line: about 43 pieces) fills a third of a 128-piece row. With
// Packing::corpus the sentences run on across document boundaries, in corpus order, until the target
// length (RoBERTa's FULL-SENTENCES): every row but the last and the short_seq_prob ones is full.
// Sentences stay whole (only the trim to max_seq - 3 cuts one), and the A/B cut is at a sentence
// boundary inside a document when the chunk has one, so that sentence order is learnable there.
//
// Shuffle windows. A corpus of at most shuffle_sentences sentences is planned whole each epoch. A larger
// one is cut into regions of shuffle_sentences / shuffle_regions consecutive sentences; each epoch
// visits the regions in a seeded order, shuffle_regions at a time, and such a window's sequences are
// drawn, shuffled and batched as one corpus (a region is a stream of its own under Packing::corpus, and
// cuts a document that crosses its ends). So the memory the plan takes is bounded by the window, not
// the corpus (as the Gigaword pipeline's, gigaword.h), while each window mixes regions from all of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/rng.h"
#include "base/text_io.h"
#include "data/batch.h"
#include "data/batching.h"
#include "data/text_corpus.h"
#include "data/tokenizer.h"

namespace hnas::data {

struct MaskingOptions {
    double mask_prob = 0.15;         // fraction of the non-special tokens selected for prediction
    int max_ngram = 3;               // n-gram lengths n = 1..max_ngram words, p(n) ∝ 1/n (ALBERT)
    int64_t max_predictions = 0;     // a cap on the selected tokens per sequence (BERT's, 20 at 128 tokens); 0: none
    double mask_token_prob = 0.8;    // selected token → [MASK]
    double random_token_prob = 0.1;  // selected token → a random ordinary piece; the rest stay unchanged
};

struct MaskingResult {
    std::vector<int32_t> positions;    // ascending indices into the sequence
    std::vector<int32_t> labels;       // the original ids at those positions
    std::vector<int32_t> ngram_words;  // words in each masked n-gram, in the order they were chosen
};

// ALBERT's n-gram masking of one sequence, in place. Words are a word-start piece
// (Tokenizer::starts_word) with the continuation pieces after it; [CLS], [SEP] and pad are never
// selected and no n-gram crosses them. The number of n-grams is set first: mask_prob × tokens
// divided by the mean n-gram length in tokens (p(n)'s mean in words × this sequence's tokens per
// word), its fraction rounded up with that probability, at least one. Then each n-gram's length n
// (in words) is drawn with p(n) ∝ 1/n and placed at the next word, in a random order, where n
// uncovered words of one segment follow. So the selected tokens average mask_prob × tokens and the
// masked lengths follow p(n) exactly. (ALBERT's reference code fills a fixed quota of
// round(mask_prob × tokens) and shortens an n-gram that would overshoot it, which moves about a
// third of the 3-grams to shorter lengths: 0.64 / 0.24 / 0.12 for n = 1, 2, 3 measured on sotu.txt
// against 6/11, 3/11, 2/11.) With max_predictions, an n-gram that would take the selected tokens past
// it is left out, as BERT's create_pretraining_data.py leaves out a word that would. Each selected token
// independently becomes [MASK] (80 %), a random ordinary piece (10 %) or stays (10 %).
MaskingResult mask_sequence(std::span<int32_t> ids, const Tokenizer& tokenizer, const MaskingOptions& options,
                            Rng& rng);

enum class Packing { document, corpus };
inline constexpr EnumName<Packing> kPackingNames[]{{Packing::document, "document"}, {Packing::corpus, "corpus"}};
constexpr const auto& enum_names(Packing) { return kPackingNames; }

struct MlmDataOptions {
    std::vector<TextSource> sources;
    std::string prepared;  // a directory `hnas prepare` made of `sources`, read in place of them; empty: read the sources
    int64_t shuffle_sentences = int64_t{1} << 22;  // sentences planned at once (one window; see "Shuffle windows")
    int64_t shuffle_regions = 16;                  // regions of the corpus mixed in one window
    Packing packing = Packing::document;  // what a sequence's sentences may span (see "Packing" above)
    int64_t max_seq = 128;         // tokens per sequence, [CLS] and both [SEP] included
    double short_seq_prob = 0.1;
    double swap_prob = 0.5;        // sentence-order prediction: probability of swapping A and B
    MaskingOptions masking;
    size_t max_line_bytes = kDefaultMaxLineBytes;
    DamagedLines damaged_lines = DamagedLines::reject;
    bool shuffle = true;           // false: sequences in document order, batches in length order
    uint64_t seed = 0;
    BatchOptions batch;
    int64_t epochs = 0;    // next() ends after this many epochs; 0 = never
    int64_t prefetch = 4;  // batches prepared ahead on a background thread; 0 = on the caller's thread
};

class MlmBatcher {
public:
    // Reads, splits and tokenizes every source (throws naming file and line on invalid UTF-8 or
    // over-long lines, and if the sources give no sequence at all).
    MlmBatcher(Tokenizer tokenizer, MlmDataOptions options);
    ~MlmBatcher();
    MlmBatcher(const MlmBatcher&) = delete;
    MlmBatcher& operator=(const MlmBatcher&) = delete;

    // The next batch, crossing epoch boundaries; std::nullopt after `epochs` epochs. Errors of the
    // background thread are rethrown here.
    std::optional<MlmBatch> next();

    // From now on, only rank `rank`'s rows of each batch (data::shard_rows of ranks), padded to the whole
    // batch's length: the same rows, masks and positions as the whole batch's, and no other row is read.
    // Call it before the first next() (again with the same share is a no-op); positions are unchanged,
    // so a run resumes on another number of ranks.
    void share(int rank, int ranks);

    DataPosition position() const;
    // Continue from a saved position (see Seq2SeqBatcher::restore).
    void restore(const DataPosition& position);

    int64_t documents() const;
    int64_t corpus_tokens() const;
    int64_t windows_per_epoch() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace hnas::data
