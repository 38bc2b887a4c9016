// Tests for the masked-LM pipeline (src/data/mlm.*): sentence splitting, ALBERT n-gram masking (rate,
// protected specials, 80/10/10, whole words, p(n) ∝ 1/n), sequence layout and sentence-order pairs,
// document units, packing across documents, token budgets, exact resumption from a saved data
// position, and errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/rng.h"
#include "data/batching.h"
#include "data/mlm.h"
#include "data/tokenizer.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using hnas::testing::error_of;
using hnas::testing::same_tensor;
using hnas::data::DataPosition;
using hnas::data::DocumentUnit;
using hnas::data::MlmBatch;
using hnas::data::MlmBatcher;
using hnas::data::MlmDataOptions;
using hnas::data::Tokenizer;
using hnas::data::kClsId;
using hnas::data::kMaskId;
using hnas::data::kPadId;
using hnas::data::kSepId;

const std::string kMobyDick = std::string(HNAS_SOURCE_DIR) + "/data/corpus/moby_dick.txt";
const std::string kSotu = std::string(HNAS_SOURCE_DIR) + "/data/corpus/sotu.txt";

const hnas::testing::ScratchDir& scratch_dir() {
    static const hnas::testing::ScratchDir dir("hnas_test_mlm_");
    return dir;
}

// A BPE model of Moby-Dick (cased, untokenized English), trained once per test program.
const Tokenizer& tokenizer() {
    static const Tokenizer model = [] {
        hnas::data::TokenizerTrainOptions options;
        options.inputs = {kMobyDick};
        options.vocab_size = 2000;
        options.type = hnas::data::TokenizerType::bpe;
        return Tokenizer::load(scratch_dir().train_tokenizer("moby", options));
    }();
    return model;
}

bool same_batch(const MlmBatch& a, const MlmBatch& b) {
    return same_tensor(a.input_ids, b.input_ids) && same_tensor(a.segment_ids, b.segment_ids) &&
           same_tensor(a.valid, b.valid) && same_tensor(a.masked_positions, b.masked_positions) &&
           same_tensor(a.masked_labels, b.masked_labels) && same_tensor(a.sentence_order, b.sentence_order) &&
           a.tokens == b.tokens;
}

std::vector<MlmBatch> take(MlmBatcher& batcher, size_t count) {
    std::vector<MlmBatch> batches;
    while (batches.size() < count) {
        std::optional<MlmBatch> batch = batcher.next();
        if (!batch) break;
        batches.push_back(std::move(*batch));
    }
    return batches;
}

MlmDataOptions moby_options(int lines = 3000) {
    MlmDataOptions options;
    options.sources = {{scratch_dir().head_of(kMobyDick, lines, "moby_" + std::to_string(lines) + ".txt"), DocumentUnit::file}};
    options.batch.max_sentences = 16;
    options.seed = 3;
    return options;
}

// The unmasked ids of row b: the input with every masked position's label put back.
std::vector<int32_t> original_row(const MlmBatch& batch, int64_t b) {
    const int64_t length = batch.input_ids.dim(1);
    std::vector<int32_t> row(batch.input_ids.ints() + b * length, batch.input_ids.ints() + (b + 1) * length);
    for (int64_t k = 0; k < batch.masked_positions.numel(); ++k) {
        const int32_t flat = batch.masked_positions.ints()[k];
        if (flat / length == b) row[static_cast<size_t>(flat % length)] = batch.masked_labels.ints()[k];
    }
    return row;
}

// ---------------------------------------------------------------------------------------------
// Sentence splitting

std::vector<std::string> sentences(std::string_view text) {
    std::vector<std::string> out;
    for (std::string_view s : hnas::data::split_sentences(text)) out.emplace_back(s);
    return out;
}

TEST(SentenceSplitter, SplitsAtTerminatorsBeforeCapitalizedWords) {
    EXPECT_EQ(sentences("Call me Ishmael. Some years ago I thought I would sail!  Why? Because."),
              (std::vector<std::string>{"Call me Ishmael.", "Some years ago I thought I would sail!", "Why?",
                                        "Because."}));
    // Lowercase after the period, or no space after it: not a boundary.
    EXPECT_EQ(sentences("It rose 3.5 percent. etc. and so on. 1990 was good."),
              (std::vector<std::string>{"It rose 3.5 percent. etc. and so on.", "1990 was good."}));
    // Quotes and brackets after the terminator stay with the sentence; an opening quote starts one.
    EXPECT_EQ(sentences("\"Is it?\" he asked. \"Yes.\" (Then silence.) \xE2\x80\x9CNo.\xE2\x80\x9D Done"),
              (std::vector<std::string>{"\"Is it?\" he asked.", "\"Yes.\"", "(Then silence.)",
                                        "\xE2\x80\x9CNo.\xE2\x80\x9D", "Done"}));
}

TEST(SentenceSplitter, KeepsAbbreviationsAndInitials) {
    EXPECT_EQ(sentences("Mr. Smith met Dr. Jones in the U.S. Senate. They talked. J. R. Tolkien wrote."),
              (std::vector<std::string>{"Mr. Smith met Dr. Jones in the U.S. Senate.", "They talked.",
                                        "J. R. Tolkien wrote."}));
    EXPECT_EQ(sentences("   "), std::vector<std::string>{});
    EXPECT_EQ(sentences("no terminator at all"), std::vector<std::string>{"no terminator at all"});
}

// ---------------------------------------------------------------------------------------------
// Masking

TEST(Masking, RateSpecialsAndReplacementsOverTenThousandSequences) {
    MlmDataOptions options = moby_options(21424);  // the whole book
    options.batch.max_sentences = 32;
    MlmBatcher batcher(tokenizer(), options);
    int64_t sequences = 0, candidates = 0, masked = 0, to_mask = 0, kept = 0, replaced = 0;
    while (sequences < 10000) {
        const MlmBatch batch = *batcher.next();
        const int64_t rows = batch.input_ids.dim(0), length = batch.input_ids.dim(1);
        std::vector<std::vector<int32_t>> originals;
        for (int64_t b = 0; b < rows; ++b) originals.push_back(original_row(batch, b));
        for (int64_t k = 0; k < batch.masked_positions.numel(); ++k) {
            const int32_t flat = batch.masked_positions.ints()[k];
            if (k > 0) {
                ASSERT_GT(flat, batch.masked_positions.ints()[k - 1]) << "positions must ascend";
            }
            const int64_t b = flat / length, t = flat % length;
            ASSERT_EQ(batch.valid.data()[flat], 1.0f) << "masked padding";
            const int32_t label = batch.masked_labels.ints()[k];
            ASSERT_NE(label, kClsId);
            ASSERT_NE(label, kSepId);
            ASSERT_NE(label, kPadId);
            ASSERT_EQ(label, originals[static_cast<size_t>(b)][static_cast<size_t>(t)]);
            const int32_t input = batch.input_ids.ints()[flat];
            if (input == kMaskId) {
                ++to_mask;
            } else if (input == label) {
                ++kept;
            } else {
                ASSERT_GE(input, hnas::data::kNumSpecialIds) << "random replacement by a special id";
                ++replaced;
            }
        }
        for (int64_t b = 0; b < rows; ++b) {
            int64_t real = 0, seps = 0;
            for (int64_t t = 0; t < length; ++t) {
                if (batch.valid.data()[b * length + t] == 0.0f) {
                    ASSERT_EQ(batch.input_ids.ints()[b * length + t], kPadId);
                    continue;
                }
                ++real;
                seps += batch.input_ids.ints()[b * length + t] == kSepId;
            }
            ASSERT_EQ(batch.input_ids.ints()[b * length], kClsId);  // never replaced
            ASSERT_EQ(seps, 2);                                       // neither [SEP]
            candidates += real - 3;
        }
        masked += batch.masked_positions.numel();
        sequences += rows;
    }
    const double rate = static_cast<double>(masked) / static_cast<double>(candidates);
    std::printf("[ masking  ] %lld sequences, %lld tokens: %.4f selected; of those %.3f [MASK], %.3f random, %.3f kept\n",
                static_cast<long long>(sequences), static_cast<long long>(candidates), rate,
                static_cast<double>(to_mask) / static_cast<double>(masked),
                static_cast<double>(replaced) / static_cast<double>(masked), static_cast<double>(kept) / static_cast<double>(masked));
    EXPECT_NEAR(rate, 0.15, 0.01);
    EXPECT_NEAR(static_cast<double>(to_mask) / static_cast<double>(masked), 0.8, 0.01);
    EXPECT_NEAR(static_cast<double>(replaced) / static_cast<double>(masked), 0.1, 0.01);
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(masked), 0.1, 0.01);
}

// [CLS] a [SEP] b [SEP] sequences of 128 tokens cut from the State of the Union addresses.
std::vector<std::vector<int32_t>> text_sequences(size_t count) {
    std::ifstream in(kSotu);
    std::vector<int32_t> stream;
    std::string line;
    while (std::getline(in, line) && stream.size() < count * 125) tokenizer().encode(line, stream);
    std::vector<std::vector<int32_t>> sequences;
    for (size_t start = 0; start + 125 <= stream.size() && sequences.size() < count; start += 125) {
        std::vector<int32_t> sequence = {kClsId};
        sequence.insert(sequence.end(), stream.begin() + static_cast<std::ptrdiff_t>(start),
                        stream.begin() + static_cast<std::ptrdiff_t>(start + 60));
        sequence.push_back(kSepId);
        sequence.insert(sequence.end(), stream.begin() + static_cast<std::ptrdiff_t>(start + 60),
                        stream.begin() + static_cast<std::ptrdiff_t>(start + 125));
        sequence.push_back(kSepId);
        sequences.push_back(std::move(sequence));
    }
    return sequences;
}

TEST(Masking, NgramsAreWholeWordsWithLengthsDistributedAsOneOverN) {
    const std::vector<std::vector<int32_t>> sequences = text_sequences(10000);
    ASSERT_EQ(sequences.size(), 10000u);
    const hnas::data::MaskingOptions options;
    std::array<double, 3> first{}, all{};
    for (size_t i = 0; i < sequences.size(); ++i) {
        std::vector<int32_t> ids = sequences[i];
        hnas::Rng rng(11, i);
        const hnas::data::MaskingResult result = hnas::data::mask_sequence(ids, tokenizer(), options, rng);
        ASSERT_FALSE(result.ngram_words.empty());
        for (int32_t n : result.ngram_words) {
            ASSERT_GE(n, 1);
            ASSERT_LE(n, 3);
            all[static_cast<size_t>(n - 1)] += 1;
        }
        first[static_cast<size_t>(result.ngram_words.front() - 1)] += 1;
        // Whole words: a masked run starts at a word start and the token after it starts a word
        // (or is [SEP]).
        const std::vector<int32_t>& original = sequences[i];
        std::vector<bool> is_masked(ids.size(), false);
        for (int32_t p : result.positions) is_masked[static_cast<size_t>(p)] = true;
        for (size_t t = 1; t + 1 < ids.size(); ++t) {
            if (!is_masked[t]) continue;
            if (!is_masked[t - 1] && original[t - 1] != kClsId && original[t - 1] != kSepId) {
                ASSERT_TRUE(tokenizer().starts_word(original[t])) << "a masked run starts inside a word";
            }
            if (!is_masked[t + 1] && original[t + 1] != kSepId) {
                ASSERT_TRUE(tokenizer().starts_word(original[t + 1])) << "a masked run ends inside a word";
            }
        }
    }
    // Pearson's chi-square against p(n) = (1/n) / (1 + 1/2 + 1/3) = 6/11, 3/11, 2/11, two degrees of
    // freedom: below 13.8 with probability 0.999. Over ~60k n-grams it detects a shift of about one
    // percentage point (ALBERT's quota shortening scores about 2800). The first n-gram of each
    // sequence is checked on its own too: no place in the sequence may favour a length.
    const std::array<double, 3> p = {6.0 / 11.0, 3.0 / 11.0, 2.0 / 11.0};
    auto chi_square = [&](const std::array<double, 3>& counts) {
        const double total = counts[0] + counts[1] + counts[2];
        double sum = 0.0;
        for (size_t n = 0; n < 3; ++n) sum += (counts[n] - p[n] * total) * (counts[n] - p[n] * total) / (p[n] * total);
        return sum;
    };
    const double total = all[0] + all[1] + all[2];
    std::printf("[ n-grams  ] %.0f n-grams: n = 1, 2, 3 with frequencies %.4f %.4f %.4f (p(n) = %.4f %.4f %.4f), "
                "chi-square %.2f; first of each sequence: chi-square %.2f\n",
                total, all[0] / total, all[1] / total, all[2] / total, p[0], p[1], p[2], chi_square(all),
                chi_square(first));
    EXPECT_GT(total, 50000);
    EXPECT_LT(chi_square(all), 13.8);
    EXPECT_LT(chi_square(first), 13.8);
}

TEST(Masking, UnigramMaskingAndTinySequences) {
    hnas::data::MaskingOptions options;
    options.max_ngram = 1;
    hnas::Rng rng(5);
    double selected = 0.0;
    for (const std::vector<int32_t>& sequence : text_sequences(200)) {
        std::vector<int32_t> ids = sequence;
        const hnas::data::MaskingResult result = hnas::data::mask_sequence(ids, tokenizer(), options, rng);
        for (int32_t n : result.ngram_words) ASSERT_EQ(n, 1);
        ASSERT_GE(result.positions.size(), 1u);
        selected += static_cast<double>(result.positions.size());
    }
    EXPECT_NEAR(selected / 200.0, 0.15 * 125, 1.0);
    // One real token: it is selected (at least one n-gram per sequence); only specials: nothing.
    std::vector<int32_t> tiny = {kClsId, tokenizer().encode("whale").front(), kSepId};
    EXPECT_EQ(hnas::data::mask_sequence(tiny, tokenizer(), options, rng).positions, std::vector<int32_t>{1});
    std::vector<int32_t> specials = {kClsId, kSepId, kSepId, kPadId};
    EXPECT_TRUE(hnas::data::mask_sequence(specials, tokenizer(), options, rng).positions.empty());
    EXPECT_EQ(specials, (std::vector<int32_t>{kClsId, kSepId, kSepId, kPadId}));
}

// BERT's cap: never more than max_predictions tokens selected, and it binds (these sequences of ~125
// tokens select about 19 uncapped); the n-grams kept still cover whole words.
TEST(Masking, MaxPredictionsCapsTheSelectedTokens) {
    hnas::data::MaskingOptions options;
    options.max_predictions = 10;
    hnas::Rng rng(9), uncapped_rng(9);
    size_t at_cap = 0, uncapped_above = 0;
    for (const std::vector<int32_t>& sequence : text_sequences(200)) {
        std::vector<int32_t> ids = sequence, uncapped_ids = sequence;
        const auto result = hnas::data::mask_sequence(ids, tokenizer(), options, rng);
        ASSERT_LE(result.positions.size(), 10u);
        ASSERT_GE(result.positions.size(), 1u);
        int32_t words = 0;
        for (const int32_t n : result.ngram_words) words += n;
        ASSERT_LE(static_cast<size_t>(words), result.positions.size());
        at_cap += result.positions.size() >= 8;
        uncapped_above += hnas::data::mask_sequence(uncapped_ids, tokenizer(), {}, uncapped_rng).positions.size() > 10;
    }
    EXPECT_GT(at_cap, 150u);
    EXPECT_GT(uncapped_above, 150u);
}

// ---------------------------------------------------------------------------------------------
// Sequences

// Whitespace collapsed to single spaces.
std::string squeeze(const std::string& text) {
    std::string out;
    for (char c : text) {
        const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
        if (space && (out.empty() || out.back() == ' ')) continue;
        out += space ? ' ' : c;
    }
    return out;
}

TEST(MlmBatcher, SequencesHoldTwoContiguousSegmentsInTheLabelledOrder) {
    MlmDataOptions options = moby_options(2000);
    options.shuffle = false;
    std::ifstream in(options.sources.front().path);
    const std::string book = squeeze(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    for (double swap : {0.0, 0.5, 1.0}) {
        options.swap_prob = swap;
        options.epochs = 1;
        MlmBatcher batcher(tokenizer(), options);
        int64_t rows_total = 0, swapped = 0, short_rows = 0;
        while (std::optional<MlmBatch> batch = batcher.next()) {
            const int64_t rows = batch->input_ids.dim(0), length = batch->input_ids.dim(1);
            ASSERT_LE(length, options.max_seq);
            int64_t tokens = 0;
            for (int64_t b = 0; b < rows; ++b) {
                const std::vector<int32_t> row = original_row(*batch, b);
                const int32_t* segment = batch->segment_ids.ints() + b * length;
                const float* valid = batch->valid.data() + b * length;
                const int64_t real = static_cast<int64_t>(std::count(valid, valid + length, 1.0f));
                tokens += real;
                ASSERT_EQ(row[0], kClsId);
                ASSERT_EQ(row[static_cast<size_t>(real - 1)], kSepId);
                const auto first_sep = std::find(row.begin() + 1, row.end(), kSepId) - row.begin();
                ASSERT_LT(first_sep, real - 2) << "segment B is empty";
                ASSERT_GT(first_sep, 1) << "segment A is empty";
                for (int64_t t = 0; t < length; ++t) {
                    ASSERT_EQ(valid[t], t < real ? 1.0f : 0.0f);
                    ASSERT_EQ(segment[t], t > first_sep && t < real ? 1 : 0) << "position " << t;
                }
                const std::vector<int32_t> a(row.begin() + 1, row.begin() + first_sep);
                const std::vector<int32_t> b_ids(row.begin() + first_sep + 1, row.begin() + real - 1);
                const bool is_swapped = batch->sentence_order.ints()[b] == 1;
                swapped += is_swapped;
                // Each segment is a stretch of the book, and A comes before B unless they were swapped.
                // (Trimming to max_seq may drop tokens between them.)
                const std::string earlier = tokenizer().decode(is_swapped ? b_ids : a);
                const std::string later = tokenizer().decode(is_swapped ? a : b_ids);
                const size_t at = book.find(earlier);
                ASSERT_NE(at, std::string::npos) << "not in the book: " << earlier;
                const size_t next = book.find(later, at + earlier.size());
                ASSERT_NE(next, std::string::npos) << "not after \"" << earlier << "\" in the book: " << later;
                ASSERT_LT(next - at, 20000u) << "segments far apart: " << earlier << " / " << later;
                short_rows += real < options.max_seq / 2;
                ++rows_total;
            }
            EXPECT_EQ(batch->tokens, tokens);
        }
        const double swap_rate = static_cast<double>(swapped) / static_cast<double>(rows_total);
        EXPECT_NEAR(swap_rate, swap, 0.06) << rows_total << " sequences";
        // short_seq_prob 0.1 makes some sequences short on purpose.
        EXPECT_GT(static_cast<double>(short_rows) / static_cast<double>(rows_total), 0.03);
    }
}

TEST(MlmBatcher, DocumentUnits) {
    const std::string text = "Alpha beta gamma. Delta epsilon.\nZeta eta theta.\n\nIota kappa. Lambda mu.\nNu xi.\n";
    const std::string path = scratch_dir().write("units.txt", text);
    int64_t tokens = -1;
    for (const auto& [unit, documents] : {std::pair{DocumentUnit::line, 4}, std::pair{DocumentUnit::block, 2},
                                          std::pair{DocumentUnit::file, 1}}) {
        MlmDataOptions options;
        options.sources = {{path, unit}};
        options.batch.max_sentences = 4;
        MlmBatcher batcher(tokenizer(), options);
        EXPECT_EQ(batcher.documents(), documents);
        if (tokens >= 0) {
            EXPECT_EQ(batcher.corpus_tokens(), tokens);
        }
        tokens = batcher.corpus_tokens();
    }
}

// Segments A and B of row b (the original ids, without [CLS] and [SEP]).
std::pair<std::vector<int32_t>, std::vector<int32_t>> segments(const MlmBatch& batch, int64_t b) {
    const std::vector<int32_t> row = original_row(batch, b);
    const float* valid = batch.valid.data() + b * batch.input_ids.dim(1);
    const auto real = static_cast<int64_t>(std::count(valid, valid + batch.input_ids.dim(1), 1.0f));
    const auto first_sep = std::find(row.begin() + 1, row.end(), kSepId);
    return {std::vector<int32_t>(row.begin() + 1, first_sep), std::vector<int32_t>(first_sep + 1, row.begin() + real - 1)};
}

TEST(MlmBatcher, CorpusPackingFillsRowsWithTheCorpusInOrder) {
    // Moby-Dick one line per document: ALBERT's sequences stay within a line (about 12 pieces), packed
    // ones run on across lines until the row is full.
    MlmDataOptions options = moby_options(2000);
    options.sources.front().unit = DocumentUnit::line;
    options.shuffle = false;
    options.short_seq_prob = 0.0;
    options.epochs = 1;
    std::ifstream in(options.sources.front().path);
    const std::string book = squeeze(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    for (const auto packing : {hnas::data::Packing::document, hnas::data::Packing::corpus}) {
        options.packing = packing;
        MlmBatcher batcher(tokenizer(), options);
        int64_t rows = 0, full_rows = 0, tokens = 0;
        size_t last_at = 0;
        while (std::optional<MlmBatch> batch = batcher.next()) {
            const int64_t length = batch->input_ids.dim(1);
            for (int64_t b = 0; b < batch->input_ids.dim(0); ++b) {
                const float* valid = batch->valid.data() + b * length;
                const auto real = static_cast<int64_t>(std::count(valid, valid + length, 1.0f));
                ASSERT_TRUE(std::all_of(valid, valid + real, [](float v) { return v == 1.0f; })) << "padding inside a row";
                tokens += real;
                full_rows += real == options.max_seq;
                ++rows;
                if (packing == hnas::data::Packing::corpus) {
                    // Each segment is a stretch of the book, the earlier one as the label says.
                    const auto [a, b_ids] = segments(*batch, b);
                    const bool swapped = batch->sentence_order.ints()[b] == 1;
                    const std::string earlier = tokenizer().decode(swapped ? b_ids : a);
                    const std::string later = tokenizer().decode(swapped ? a : b_ids);
                    const size_t at = book.find(earlier);
                    ASSERT_NE(at, std::string::npos) << "not in the book: " << earlier;
                    ASSERT_NE(book.find(later, at + earlier.size()), std::string::npos) << "not after it: " << later;
                    last_at = std::max(last_at, at);
                }
            }
        }
        const double mean = static_cast<double>(tokens) / static_cast<double>(rows);
        if (packing == hnas::data::Packing::document) {
            EXPECT_LT(mean, 0.3 * static_cast<double>(options.max_seq)) << rows << " rows";
        } else {
            EXPECT_GE(full_rows, rows - 1) << "every row but the corpus's last is full";
            EXPECT_GT(last_at, book.size() * 9 / 10) << "the rows reach the end of the book";
            EXPECT_GT(static_cast<double>(tokens), 0.8 * static_cast<double>(batcher.corpus_tokens())) << "most of the corpus is used";
        }
    }
}

TEST(MlmBatcher, CorpusPackingCutsASegmentPairInsideADocument) {
    // Two sentences per document: a packed chunk holds many documents, and its A/B cut must fall between
    // a document's two sentences, never between documents, so that sentence order stays learnable.
    std::string text;
    for (int k = 0; k < 300; ++k) text += "Ahab paced the deck. The whale was far away.\n";
    MlmDataOptions options;
    options.sources = {{scratch_dir().write("pairs.txt", text), DocumentUnit::line}};
    options.packing = hnas::data::Packing::corpus;
    options.swap_prob = 0.0;
    options.short_seq_prob = 0.0;  // a short target may hold a single sentence, cut at a token
    options.max_seq = 64;
    options.epochs = 1;
    const std::vector<int32_t> first = tokenizer().encode("Ahab paced the deck."), second = tokenizer().encode("The whale was far away.");
    MlmBatcher batcher(tokenizer(), options);
    int64_t rows = 0;
    while (std::optional<MlmBatch> batch = batcher.next()) {
        for (int64_t b = 0; b < batch->input_ids.dim(0); ++b) {
            const auto [a, b_ids] = segments(*batch, b);
            // Trimming takes tokens from one side only, so one side of the cut keeps its sentence whole.
            const bool a_ends_first = a.size() >= first.size() && std::equal(first.rbegin(), first.rend(), a.rbegin());
            const bool b_starts_second = b_ids.size() >= second.size() && std::equal(second.begin(), second.end(), b_ids.begin());
            ASSERT_TRUE(a_ends_first || b_starts_second) << "row " << rows << ": cut between documents";
            ++rows;
        }
    }
    EXPECT_GT(rows, 50);
}

TEST(MlmBatcher, ReadsTheStateOfTheUnionOneAddressPerLine) {
    MlmDataOptions options;
    options.sources = {{kSotu, DocumentUnit::line}};
    // Line 101 (the 1890 address) holds a control byte 0x02 where the source had a fraction: an error
    // by default, left out under DamagedLines::skip.
    EXPECT_CONTAINS(error_of([&] { MlmBatcher rejecting(tokenizer(), options); }),
                    kSotu + ":101: control byte 0x02 at byte 21588 of the line");
    options.damaged_lines = hnas::DamagedLines::skip;
    const auto start = std::chrono::steady_clock::now();
    MlmBatcher batcher(tokenizer(), options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ sotu     ] %lld addresses, %lld tokens read in %.2f s\n", static_cast<long long>(batcher.documents()),
                static_cast<long long>(batcher.corpus_tokens()), seconds);
    EXPECT_EQ(batcher.documents(), 232);
    EXPECT_GT(batcher.corpus_tokens(), 1783364);  // more pieces than the words of the 232 addresses (wc -w)
    const MlmBatch batch = *batcher.next();
    EXPECT_EQ(batch.input_ids.dim(0), 32);
}

TEST(MlmBatcher, TokenBudgetBatchesStayWithinMaxTokens) {
    MlmDataOptions options = moby_options();
    options.batch.max_sentences = 0;
    options.batch.max_tokens = 1024;
    options.epochs = 1;
    MlmBatcher batcher(tokenizer(), options);
    int64_t batches = 0;
    while (std::optional<MlmBatch> batch = batcher.next()) {
        ASSERT_LE(batch->input_ids.numel(), 1024);
        ++batches;
    }
    EXPECT_GT(batches, 10);
    options.batch.max_tokens = 64;
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }),
                    "max_tokens 64 is smaller than the longest possible row (128 tokens)");
}

// ---------------------------------------------------------------------------------------------
// Reproducibility and the data position

TEST(MlmBatcher, SameSeedSameBatchesWithOrWithoutPrefetch) {
    MlmDataOptions options = moby_options();
    options.epochs = 2;
    options.prefetch = 0;
    MlmBatcher inline_batcher(tokenizer(), options);
    options.prefetch = 3;
    MlmBatcher prefetching(tokenizer(), options);
    const std::vector<MlmBatch> a = take(inline_batcher, 100000), b = take(prefetching, 100000);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_batch(a[i], b[i])) << "batch " << i;
    // The second epoch draws new sequences and masks.
    const size_t per_epoch = a.size() / 2;
    EXPECT_FALSE(same_batch(a[0], a[per_epoch]));
    options.seed = 4;
    MlmBatcher other_seed(tokenizer(), options);
    EXPECT_FALSE(same_batch(*other_seed.next(), a[0]));
}

void expect_exact_resumption(const MlmDataOptions& options) {
    MlmBatcher batcher(tokenizer(), options);
    std::vector<MlmBatch> batches;
    std::vector<DataPosition> positions;
    size_t epoch_boundary = 0;
    while (epoch_boundary == 0 || batches.size() < epoch_boundary * 3 / 2) {
        positions.push_back(batcher.position());
        batches.push_back(*batcher.next());
        if (positions.back().epoch == 1 && epoch_boundary == 0) epoch_boundary = batches.size() - 1;
    }
    for (size_t k : {size_t{0}, size_t{3}, epoch_boundary / 2, epoch_boundary - 1, epoch_boundary, epoch_boundary + 2, batches.size() - 1}) {
        const nlohmann::json saved = positions[k];
        MlmDataOptions resumed_options = options;
        resumed_options.prefetch = k % 2 == 0 ? 0 : 3;
        MlmBatcher resumed(tokenizer(), resumed_options);
        resumed.restore(saved.get<DataPosition>());
        EXPECT_EQ(resumed.position(), positions[k]);
        for (size_t i = k; i < batches.size(); ++i) {
            ASSERT_TRUE(same_batch(*resumed.next(), batches[i])) << "resumed at " << k << ", batch " << i << " differs";
        }
    }
    MlmDataOptions other_options = options;
    other_options.masking.mask_prob = 0.2;
    MlmBatcher other(tokenizer(), other_options);
    EXPECT_CONTAINS(error_of([&] { other.restore(positions[3]); }), "saved for different masked-LM data or options");
    other_options = options;
    other_options.packing = options.packing == hnas::data::Packing::corpus ? hnas::data::Packing::document : hnas::data::Packing::corpus;
    MlmBatcher other_packing(tokenizer(), other_options);
    EXPECT_CONTAINS(error_of([&] { other_packing.restore(positions[3]); }), "saved for different masked-LM data or options");
    DataPosition windowed = positions[3];
    windowed.window = 1000;
    EXPECT_CONTAINS(error_of([&] { batcher.restore(windowed); }), "has no window 1000");
}

TEST(MlmBatcher, ResumesExactlyFromASavedPosition) {
    MlmDataOptions options = moby_options(1500);
    options.prefetch = 2;
    expect_exact_resumption(options);
}

// A rank's share of each batch is exactly the whole batch's rows first..last (data::shard_rows), with
// the masks and masked positions they have in the whole batch; the rows it leaves are never built.
TEST(MlmBatcher, ShareIsTheSliceOfTheWholeBatch) {
    MlmDataOptions options = moby_options(1500);
    options.prefetch = 2;
    MlmBatcher whole(tokenizer(), options);
    const std::vector<MlmBatch> batches = take(whole, 20);
    for (int ranks : {2, 3, 40}) {
        for (int rank = 0; rank < ranks; ++rank) {
            MlmBatcher part(tokenizer(), options);
            part.share(rank, ranks);
            for (size_t i = 0; i < batches.size(); ++i) {
                const MlmBatch shard = *part.next();
                const auto [first, last] = hnas::data::shard_rows(batches[i].input_ids.dim(0), rank, ranks);
                ASSERT_EQ(shard.batch_rows, batches[i].input_ids.dim(0));
                ASSERT_EQ(shard.input_ids.dim(0), last - first);
                if (first == last) continue;
                ASSERT_TRUE(same_batch(shard, hnas::data::slice_rows(batches[i], first, last)))
                    << "rank " << rank << " of " << ranks << ", batch " << i;
            }
            EXPECT_EQ(part.position(), whole.position());
        }
    }
    MlmBatcher started(tokenizer(), options);
    started.next();
    EXPECT_CONTAINS(error_of([&] { started.share(1, 2); }), "set it up before the first batch");
}

// A corpus larger than one shuffle window: positions inside later windows resume exactly too.
TEST(MlmBatcher, ResumesExactlyFromASavedPositionAcrossShuffleWindows) {
    MlmDataOptions options = moby_options(1500);
    options.sources.front().unit = DocumentUnit::block;
    options.shuffle_sentences = 200;
    options.shuffle_regions = 2;
    options.prefetch = 2;
    ASSERT_GT(MlmBatcher(tokenizer(), options).windows_per_epoch(), 2);
    expect_exact_resumption(options);
}

TEST(MlmBatcher, ResumesExactlyFromASavedPositionWithCorpusPacking) {
    MlmDataOptions options = moby_options(1500);
    options.sources.front().unit = DocumentUnit::block;
    options.packing = hnas::data::Packing::corpus;
    options.prefetch = 2;
    expect_exact_resumption(options);
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(MlmBatcher, ErrorsNameFilesLinesAndOptions) {
    MlmDataOptions options;
    options.sources = {{scratch_dir().write("bad.txt", "Fine first line.\nBroken \xE9 byte.\n"), DocumentUnit::block}};
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), scratch_dir().path("bad.txt") + ":2: invalid UTF-8 at byte 8");
    options.sources = {{scratch_dir().write("long.txt", "ok\n" + std::string(200, 'w') + "\n"), DocumentUnit::line}};
    options.max_line_bytes = 100;
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), scratch_dir().path("long.txt") + ":2: line longer than 100 bytes");
    options.max_line_bytes = hnas::kDefaultMaxLineBytes;
    options.sources = {{scratch_dir().write("empty.txt", ""), DocumentUnit::file}};
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), scratch_dir().path("empty.txt") + " is empty");
    options.sources = {{scratch_dir().write("blank.txt", "\n \n"), DocumentUnit::file}};
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), "has the two tokens a sentence pair needs");
    options.sources = {{kMobyDick, DocumentUnit::file}};
    options.max_seq = 4;
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), "max_seq 4 leaves no room");
    options.max_seq = 128;
    options.masking.mask_prob = 1.5;
    EXPECT_CONTAINS(error_of([&] { MlmBatcher(tokenizer(), options); }), "mask_prob 1.5 is not in (0, 1)");
}

}  // namespace
