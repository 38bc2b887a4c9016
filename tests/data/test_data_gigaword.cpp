// Tests for the Gigaword pipeline (src/data/gigaword.*, text_io.*, batching.*, prefetch.h): line
// reading and UTF-8 checks, the reader's errors (each naming file and line), batch contents,
// per-epoch shuffling, token-budget batching, exact resumption from a saved data position, errors
// from the prefetch thread, bounded memory on a generated 4M-line corpus, and the pipeline's
// throughput on the bundled data.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/read_file.h"
#include "base/rng.h"
#include "base/text_io.h"
#include "data/batching.h"
#include "data/gigaword.h"
#include "data/prefetch.h"
#include "data/tokenizer.h"
#include "test_support.h"

#ifdef HNAS_SANITIZE
// AddressSanitizer holds freed memory in a quarantine (256 MB by default) before reusing it; in the
// bounded-memory test that would count as growth. A small quarantine still catches recent
// use-after-free.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }
#endif

namespace {

namespace fs = std::filesystem;
using hnas::testing::error_of;
using hnas::testing::same_tensor;
using hnas::data::BatchOptions;
using hnas::data::DataPosition;
using hnas::data::padded_length;
using hnas::data::LineAlignedCorpus;
using hnas::data::Seq2SeqBatch;
using hnas::data::Seq2SeqBatcher;
using hnas::data::Seq2SeqDataOptions;
using hnas::data::Tokenizer;

const std::string kGigaword = std::string(HNAS_SOURCE_DIR) + "/data/gigaword";
const std::string kTrainArticles = kGigaword + "/train_10k/train.article.txt";
const std::string kTrainTitles = kGigaword + "/train_10k/train.title.txt";

const hnas::testing::ScratchDir& scratch_dir() {
    static const hnas::testing::ScratchDir dir("hnas_test_gigaword_");
    return dir;
}

// A small BPE model of Gigaword articles and titles, trained once per test program.
const Tokenizer& tokenizer() {
    static const Tokenizer model = [] {
        hnas::data::TokenizerTrainOptions options;
        options.inputs = {scratch_dir().head_of(kTrainArticles, 3000, "tok_articles.txt"),
                          scratch_dir().head_of(kTrainTitles, 3000, "tok_titles.txt")};
        options.vocab_size = 1000;
        options.type = hnas::data::TokenizerType::bpe;
        return Tokenizer::load(scratch_dir().train_tokenizer("tok", options));
    }();
    return model;
}

bool same_batch(const Seq2SeqBatch& a, const Seq2SeqBatch& b) {
    return same_tensor(a.source_ids, b.source_ids) && same_tensor(a.source_valid, b.source_valid) &&
           same_tensor(a.target_input, b.target_input) && same_tensor(a.target_output, b.target_output) &&
           same_tensor(a.target_valid, b.target_valid) && a.example_index == b.example_index &&
           a.source_tokens == b.source_tokens && a.target_tokens == b.target_tokens;
}

// 3000 pairs of the bundled training data in 12 regions of 250 lines, 3 windows an epoch.
Seq2SeqDataOptions small_options() {
    Seq2SeqDataOptions options;
    options.article_path = scratch_dir().head_of(kTrainArticles, 3000, "articles.txt");
    options.title_path = scratch_dir().head_of(kTrainTitles, 3000, "titles.txt");
    options.shuffle_buffer = 1000;
    options.shuffle_regions = 4;
    options.batch.max_sentences = 16;
    options.seed = 7;
    return options;
}

std::vector<Seq2SeqBatch> take(Seq2SeqBatcher& batcher, size_t count) {
    std::vector<Seq2SeqBatch> batches;
    while (batches.size() < count) {
        std::optional<Seq2SeqBatch> batch = batcher.next();
        if (!batch) break;
        batches.push_back(std::move(*batch));
    }
    return batches;
}

std::vector<int64_t> example_order(const std::vector<Seq2SeqBatch>& batches) {
    std::vector<int64_t> order;
    for (const Seq2SeqBatch& batch : batches) order.insert(order.end(), batch.example_index.begin(), batch.example_index.end());
    return order;
}

// ---------------------------------------------------------------------------------------------
// Line reading and UTF-8

TEST(LineReader, ReadsLinesAndSeeksToRememberedOffsets) {
    const std::string path = scratch_dir().write("lines.txt", "first\n\nthird line\nlast without newline");
    hnas::LineReader reader(path);
    std::string_view line;
    std::vector<std::string> lines;
    std::vector<uint64_t> offsets;
    offsets.push_back(reader.offset());
    while (reader.next(line)) {
        lines.emplace_back(line);
        offsets.push_back(reader.offset());
    }
    EXPECT_EQ(lines, (std::vector<std::string>{"first", "", "third line", "last without newline"}));
    EXPECT_EQ(reader.line_number(), 4);
    EXPECT_EQ(offsets[2], 7u);
    reader.seek(offsets[2], 3);
    ASSERT_TRUE(reader.next(line));
    EXPECT_EQ(line, "third line");
    EXPECT_EQ(reader.line_number(), 3);
}

TEST(LineReader, RejectsOverlongLinesNamingFileAndLine) {
    const std::string path = scratch_dir().write("long.txt", "short\n" + std::string(150, 'x') + "\nshort\n");
    hnas::LineReader reader(path, 100);
    std::string_view line;
    ASSERT_TRUE(reader.next(line));
    EXPECT_CONTAINS(error_of([&] { reader.next(line); }), path + ":2: line longer than 100 bytes");

    // The default limit is 1 MiB, also for a file that never ends its line.
    const std::string huge = scratch_dir().write("huge.txt", "ok\nok\n" + std::string((1 << 20) + 10, 'y'));
    hnas::LineReader default_reader(huge);
    ASSERT_TRUE(default_reader.next(line));
    ASSERT_TRUE(default_reader.next(line));
    EXPECT_CONTAINS(error_of([&] { default_reader.next(line); }), huge + ":3: line longer than 1048576 bytes");
}

TEST(Utf8, FindsTheFirstInvalidSequence) {
    using hnas::find_invalid_utf8;
    constexpr size_t npos = std::string_view::npos;
    EXPECT_EQ(find_invalid_utf8("plain ascii text that is longer than eight bytes"), npos);
    EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x80\x9Cquoted\xE2\x80\x9D \xF0\x9F\x90\x8B"), npos);
    EXPECT_EQ(find_invalid_utf8("abc\x80"), 3u);                       // stray continuation byte
    EXPECT_EQ(find_invalid_utf8("abcdefghij\xC0\x80"), 10u);           // overlong NUL
    EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);                  // overlong '/'
    EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);                 // UTF-16 surrogate
    EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);              // above U+10FFFF
    EXPECT_EQ(find_invalid_utf8("\xF5\x80\x80\x80"), 0u);              // invalid lead byte
    EXPECT_EQ(find_invalid_utf8("ok \xE2\x80"), 3u);                   // truncated at the end
    EXPECT_EQ(find_invalid_utf8("ok \xE2\x28\xA1 more"), 3u);          // bad continuation
}

// ---------------------------------------------------------------------------------------------
// Reader errors: each names the file and the line (or both files and both counts)

TEST(GigawordReader, MismatchedLineCountsNameBothFilesAndCounts) {
    const std::string articles = scratch_dir().write("a5.txt", "a\nb\nc\nd\ne\n");
    const std::string titles = scratch_dir().write("t4.txt", "a\nb\nc\nd\n");
    std::string message = error_of([&] { LineAlignedCorpus(articles, titles, 2); });
    EXPECT_CONTAINS(message, articles + " has 5 lines but " + titles + " has 4");
    EXPECT_CONTAINS(message, titles + " ends at line 4");

    const std::string long_titles = scratch_dir().write("t7.txt", "a\nb\nc\nd\ne\nf\ng");
    message = error_of([&] { LineAlignedCorpus(articles, long_titles, 2); });
    EXPECT_CONTAINS(message, articles + " has 5 lines but " + long_titles + " has 7");
    EXPECT_CONTAINS(message, articles + " ends at line 5");
}

TEST(GigawordReader, EmptyAndMissingFilesAreNamed) {
    const std::string empty = scratch_dir().write("empty.txt", "");
    const std::string full = scratch_dir().write("full.txt", "a\n");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(empty, full, 2); }), empty + " is empty");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(full, empty, 2); }), empty + " is empty");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(scratch_dir().path("nope.txt"), full, 2); }),
                    "cannot open " + scratch_dir().path("nope.txt"));
}

TEST(GigawordReader, InvalidUtf8NamesFileAndLine) {
    const std::string articles = scratch_dir().write("bad_a.txt", "one\ntwo\nthr\xC3\x28" "e\nfour\n");
    const std::string titles = scratch_dir().write("ok_t.txt", "1\n2\n3\n4\n");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(articles, titles, 2); }),
                    articles + ":3: invalid UTF-8 at byte 4");
    const std::string bad_titles = scratch_dir().write("bad_t.txt", "1\n\xFF\n3\n4\n");
    const std::string good_articles = scratch_dir().write("ok_a.txt", "one\ntwo\nthree\nfour\n");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(good_articles, bad_titles, 2); }),
                    bad_titles + ":2: invalid UTF-8 at byte 1");
}

TEST(GigawordReader, OverlongLinesNameFileAndLine) {
    const std::string articles = scratch_dir().write("ol_a.txt", "one\ntwo\nthree\n");
    const std::string titles = scratch_dir().write("ol_t.txt", "1\n" + std::string(300, 't') + "\n3\n");
    EXPECT_CONTAINS(error_of([&] { LineAlignedCorpus(articles, titles, 2, 256); }),
                    titles + ":2: line longer than 256 bytes");
}

TEST(GigawordReader, BlankPairsAreSkippedButNotAllOfThem) {
    Seq2SeqDataOptions options;
    options.article_path = scratch_dir().write("blank_a.txt", "the police said\n \nofficials said\n");
    options.title_path = scratch_dir().write("blank_t.txt", "police\nnews\n\n");
    options.epochs = 1;
    Seq2SeqBatcher batcher(tokenizer(), options);
    const std::optional<Seq2SeqBatch> batch = batcher.next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->example_index, std::vector<int64_t>{0});  // line 2 has no article, line 3 no title
    EXPECT_FALSE(batcher.next().has_value());

    options.article_path = scratch_dir().write("blank_a2.txt", "\n \n");
    options.title_path = scratch_dir().write("blank_t2.txt", "a\nb\n");
    Seq2SeqBatcher hopeless(tokenizer(), options);
    EXPECT_CONTAINS(error_of([&] { hopeless.next(); }),
                    options.article_path + ", " + options.title_path + ": no line pair has both");
}

// Control bytes mark a file damaged by a crash: NUL and the other C0 codes except tab; a CR only
// ends a CRLF line.
TEST(DamagedLines, ControlBytesAreFoundAndNamed) {
    using namespace std::string_view_literals;
    using hnas::find_control_byte;
    constexpr size_t npos = std::string_view::npos;
    EXPECT_EQ(find_control_byte("tabs\tare text, and so is caf\xC3\xA9"), npos);
    EXPECT_EQ(find_control_byte("a CRLF ending\r"), npos);
    EXPECT_EQ(find_control_byte("nul\0here"sv), 3u);
    EXPECT_EQ(find_control_byte("bell\a"), 4u);
    EXPECT_EQ(find_control_byte("cr\rinside"), 2u);
    EXPECT_EQ(find_control_byte("escape \x1b[0m"), 7u);
    EXPECT_EQ(find_control_byte("delete \x7f is not C0"), npos);

    using hnas::DamagedLines;
    EXPECT_TRUE(hnas::accept_line("fine", "f.txt", 1, DamagedLines::reject));
    EXPECT_FALSE(hnas::accept_line("n\0l"sv, "f.txt", 1, DamagedLines::skip));
    EXPECT_FALSE(hnas::accept_line("bad \xff", "f.txt", 1, DamagedLines::skip));
    EXPECT_CONTAINS(error_of([] { hnas::accept_line("ab\0"sv, "f.txt", 7, DamagedLines::reject); }),
                    "f.txt:7: control byte 0x00 at byte 3 of the line");
    // The first problem in the line is the one named.
    EXPECT_CONTAINS(error_of([] { hnas::accept_line("\xff\x01", "f.txt", 2, DamagedLines::reject); }),
                    "f.txt:2: invalid UTF-8 at byte 1");
}

TEST(DamagedLines, ScanCountsTextAndDamagedLines) {
    using namespace std::string_literals;
    const std::string path = scratch_dir().write("scan.txt", "one\n\n  \nt\0o\nthree\xff\nfour\r\n"s);
    const hnas::TextFileScan scan = hnas::scan_text_file(path, hnas::DamagedLines::skip);
    EXPECT_EQ(scan.lines, 6);
    EXPECT_EQ(scan.text_lines, 2);
    EXPECT_EQ(scan.damaged_lines, 2);
    EXPECT_EQ(scan.first_damaged_line, 4);
    EXPECT_CONTAINS(error_of([&] { hnas::scan_text_file(path, hnas::DamagedLines::reject); }),
                    path + ":4: control byte 0x00 at byte 2");
}

// Under skip, a pair with a damaged article or title is left out whole; the others keep their line
// numbers (example indices are 0-based lines).
TEST(DamagedLines, GigawordPairsWithADamagedLineAreLeftOutUnderSkip) {
    using namespace std::string_literals;
    Seq2SeqDataOptions options;
    options.article_path = scratch_dir().write("dmg_a.txt", "the police said\nofficials \0said\nthe minister said\nrain fell\n"s);
    options.title_path = scratch_dir().write("dmg_t.txt", "police\nofficials\nminister \x02 quits\nrain\n");
    options.epochs = 1;
    options.shuffle = false;
    EXPECT_CONTAINS(error_of([&] { Seq2SeqBatcher rejecting(tokenizer(), options); }),
                    options.article_path + ":2: control byte 0x00");
    options.damaged_lines = hnas::DamagedLines::skip;
    Seq2SeqBatcher batcher(tokenizer(), options);
    std::vector<int64_t> examples;
    while (const auto batch = batcher.next()) examples.insert(examples.end(), batch->example_index.begin(), batch->example_index.end());
    std::sort(examples.begin(), examples.end());
    EXPECT_EQ(examples, (std::vector<int64_t>{0, 3}));
}

// ---------------------------------------------------------------------------------------------
// Batches

TEST(Seq2SeqBatcher, EveryPairOnceAnEpochWithTeacherForcingLayout) {
    Seq2SeqDataOptions options = small_options();
    options.max_source = 20;  // shorter than many articles: truncation is exercised
    options.max_target = 8;
    options.epochs = 1;
    Seq2SeqBatcher batcher(tokenizer(), options);
    EXPECT_EQ(batcher.pairs(), 3000);
    EXPECT_EQ(batcher.windows_per_epoch(), 3);
    const std::vector<std::string> articles = hnas::read_lines(options.article_path, "articles");
    const std::vector<std::string> titles = hnas::read_lines(options.title_path, "titles");

    std::vector<int> seen(3000, 0);
    int64_t batches = 0, truncated = 0;
    while (std::optional<Seq2SeqBatch> batch = batcher.next()) {
        ++batches;
        const int64_t rows = batch->source_ids.dim(0), source_len = batch->source_ids.dim(1);
        const int64_t target_len = batch->target_input.dim(1);
        ASSERT_LE(rows, 16);
        ASSERT_LE(source_len, 20);
        ASSERT_LE(target_len, 8);
        ASSERT_EQ(batch->target_output.shape(), batch->target_input.shape());
        ASSERT_EQ(static_cast<int64_t>(batch->example_index.size()), rows);
        int64_t source_tokens = 0, target_tokens = 0, longest_source = 0, longest_target = 0;
        for (int64_t b = 0; b < rows; ++b) {
            const int64_t line = batch->example_index[static_cast<size_t>(b)];
            ++seen[static_cast<size_t>(line)];
            std::vector<int32_t> source = tokenizer().encode(articles[static_cast<size_t>(line)]);
            std::vector<int32_t> target = tokenizer().encode(titles[static_cast<size_t>(line)]);
            if (source.size() > 20) ++truncated;
            source.resize(std::min<size_t>(source.size(), 20));
            target.resize(std::min<size_t>(target.size(), 7));
            const int64_t n = static_cast<int64_t>(target.size());
            longest_source = std::max<int64_t>(longest_source, static_cast<int64_t>(source.size()));
            longest_target = std::max(longest_target, n + 1);
            for (int64_t t = 0; t < source_len; ++t) {
                const bool real = t < static_cast<int64_t>(source.size());
                ASSERT_EQ(batch->source_ids.ints()[b * source_len + t], real ? source[static_cast<size_t>(t)] : 0);
                ASSERT_EQ(batch->source_valid.data()[b * source_len + t], real ? 1.0f : 0.0f);
            }
            for (int64_t t = 0; t < target_len; ++t) {
                const int32_t input = batch->target_input.ints()[b * target_len + t];
                const int32_t output = batch->target_output.ints()[b * target_len + t];
                const float valid = batch->target_valid.data()[b * target_len + t];
                const int32_t expected_input =
                    t == 0 ? hnas::data::kBosId : t <= n ? target[static_cast<size_t>(t - 1)] : hnas::data::kPadId;
                const int32_t expected_output =
                    t < n ? target[static_cast<size_t>(t)] : t == n ? hnas::data::kEosId : hnas::data::kPadId;
                ASSERT_EQ(input, expected_input) << "row " << b << " position " << t;
                ASSERT_EQ(output, expected_output) << "row " << b << " position " << t;
                ASSERT_EQ(valid, t <= n ? 1.0f : 0.0f);
            }
            source_tokens += static_cast<int64_t>(source.size());
            target_tokens += n + 1;
        }
        // Padded to the longest row of the batch, not to the maximum.
        EXPECT_EQ(source_len, longest_source);
        EXPECT_EQ(target_len, longest_target);
        EXPECT_EQ(batch->source_tokens, source_tokens);
        EXPECT_EQ(batch->target_tokens, target_tokens);
    }
    for (size_t line = 0; line < seen.size(); ++line) ASSERT_EQ(seen[line], 1) << "line " << line;
    EXPECT_GT(truncated, 100);
    EXPECT_EQ(batcher.position().epoch, 1);
    EXPECT_FALSE(batcher.next().has_value());
    EXPECT_GE(batches, 3000 / 16);
}

TEST(Seq2SeqBatcher, BucketingKeepsPaddingSmall) {
    Seq2SeqDataOptions options = small_options();
    options.epochs = 1;
    Seq2SeqBatcher batcher(tokenizer(), options);
    int64_t real = 0, padded = 0;
    while (std::optional<Seq2SeqBatch> batch = batcher.next()) {
        real += batch->source_tokens;
        padded += batch->source_ids.numel();
    }
    // Within a window of ~1000 examples sorted by length, rows of a batch differ by a token or so.
    EXPECT_GT(static_cast<double>(real) / static_cast<double>(padded), 0.95);
}

// data.pad_multiple: each batch is padded to its longest row rounded up to a multiple,
// never past the longest row allowed; the rows and their real tokens are those of unrounded batches.
TEST(Seq2SeqBatcher, PadMultipleRoundsLengthsUpToTheLimit) {
    EXPECT_EQ(padded_length(13, BatchOptions{16, 0, 8}, 128), 16);
    EXPECT_EQ(padded_length(16, BatchOptions{16, 0, 8}, 128), 16);
    EXPECT_EQ(padded_length(125, BatchOptions{16, 0, 8}, 126), 126);
    EXPECT_EQ(padded_length(13, BatchOptions{16, 0, 1}, 128), 13);
    Seq2SeqDataOptions options = small_options();
    options.max_source = 30;
    options.max_target = 12;
    options.epochs = 1;
    Seq2SeqBatcher exact(tokenizer(), options);
    options.batch.pad_multiple = 8;
    Seq2SeqBatcher rounded(tokenizer(), options);
    int64_t batches = 0;
    while (std::optional<Seq2SeqBatch> a = exact.next()) {
        const std::optional<Seq2SeqBatch> b = rounded.next();
        ASSERT_TRUE(b.has_value());
        ++batches;
        EXPECT_EQ(b->example_index, a->example_index);
        EXPECT_EQ(b->source_tokens, a->source_tokens);
        EXPECT_EQ(b->target_tokens, a->target_tokens);
        const int64_t source = b->source_ids.dim(1), target = b->target_input.dim(1);
        EXPECT_EQ(source, std::min<int64_t>((a->source_ids.dim(1) + 7) / 8 * 8, 30));
        EXPECT_EQ(target, std::min<int64_t>((a->target_input.dim(1) + 7) / 8 * 8, 12));
        for (int64_t r = 0; r < a->source_ids.dim(0); ++r) {
            for (int64_t t = 0; t < source; ++t) {
                const int32_t expected = t < a->source_ids.dim(1) ? a->source_ids.ints()[r * a->source_ids.dim(1) + t] : 0;
                ASSERT_EQ(b->source_ids.ints()[r * source + t], expected) << "row " << r << " position " << t;
            }
        }
    }
    EXPECT_FALSE(rounded.next().has_value());
    EXPECT_GT(batches, 100);
}

TEST(Seq2SeqBatcher, ShufflesEachEpochFromTheSeed) {
    Seq2SeqDataOptions options = small_options();
    options.epochs = 2;
    Seq2SeqBatcher first(tokenizer(), options);
    const std::vector<Seq2SeqBatch> run = take(first, 100000);
    Seq2SeqBatcher again(tokenizer(), options);
    const std::vector<Seq2SeqBatch> rerun = take(again, 100000);
    ASSERT_EQ(run.size(), rerun.size());
    for (size_t i = 0; i < run.size(); ++i) ASSERT_TRUE(same_batch(run[i], rerun[i])) << "batch " << i;

    const std::vector<int64_t> order = example_order(run);
    ASSERT_EQ(order.size(), 6000u);
    const std::vector<int64_t> epoch_0(order.begin(), order.begin() + 3000), epoch_1(order.begin() + 3000, order.end());
    EXPECT_NE(epoch_0, epoch_1);
    // Each window mixes regions from all over the file: the first batches do not come from one place.
    std::set<int64_t> regions;
    for (size_t i = 0; i < 160; ++i) regions.insert(epoch_0[i] / 250);
    EXPECT_GE(regions.size(), 3u);

    options.seed = 8;
    Seq2SeqBatcher other_seed(tokenizer(), options);
    EXPECT_NE(example_order(take(other_seed, 100000)), order);

    // Without shuffling: windows are consecutive regions of the file, batches in length order.
    options.shuffle = false;
    options.epochs = 1;
    Seq2SeqBatcher ordered(tokenizer(), options);
    const std::vector<int64_t> file_order = example_order(take(ordered, 100000));
    ASSERT_EQ(file_order.size(), 3000u);
    EXPECT_LT(*std::max_element(file_order.begin(), file_order.begin() + 1000), 1000);
    EXPECT_GE(*std::min_element(file_order.begin() + 2000, file_order.end()), 2000);
}

TEST(Seq2SeqBatcher, TokenBudgetBatchesStayWithinMaxTokens) {
    Seq2SeqDataOptions options = small_options();
    options.batch.max_sentences = 0;
    options.batch.max_tokens = 512;
    options.epochs = 1;
    Seq2SeqBatcher batcher(tokenizer(), options);
    int64_t batches = 0, rows = 0, used = 0;
    while (std::optional<Seq2SeqBatch> batch = batcher.next()) {
        const int64_t b = batch->source_ids.dim(0);
        const int64_t cost = b * std::max(batch->source_ids.dim(1), batch->target_input.dim(1));
        ASSERT_LE(cost, 512);
        ++batches;
        rows += b;
        used += cost;
    }
    EXPECT_EQ(rows, 3000);
    // Greedy filling of length-sorted rows: batches are nearly full (only window tails are not).
    EXPECT_GT(static_cast<double>(used) / static_cast<double>(batches * 512), 0.85);

    options.batch.max_tokens = 100;  // a 128-piece article could never fit
    EXPECT_CONTAINS(error_of([&] { Seq2SeqBatcher(tokenizer(), options); }),
                    "max_tokens 100 is smaller than the longest possible row (128 tokens)");
    options.batch.max_tokens = 0;
    EXPECT_CONTAINS(error_of([&] { Seq2SeqBatcher(tokenizer(), options); }), "set max_sentences or max_tokens");
}

TEST(Seq2SeqBatcher, PrefetchingDoesNotChangeTheBatches) {
    Seq2SeqDataOptions options = small_options();
    options.epochs = 1;
    options.prefetch = 0;
    Seq2SeqBatcher inline_batcher(tokenizer(), options);
    options.prefetch = 3;
    Seq2SeqBatcher prefetching(tokenizer(), options);
    const std::vector<Seq2SeqBatch> a = take(inline_batcher, 100000), b = take(prefetching, 100000);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_batch(a[i], b[i])) << "batch " << i;
}

// ---------------------------------------------------------------------------------------------
// Data position: save and restore

TEST(Seq2SeqBatcher, ResumesExactlyFromASavedPosition) {
    Seq2SeqDataOptions options = small_options();
    options.prefetch = 3;
    Seq2SeqBatcher batcher(tokenizer(), options);
    // Batches 0..N-1 of an uninterrupted run cover one and a half epochs (several windows and an
    // epoch boundary); positions[k] is where batch k starts.
    std::vector<Seq2SeqBatch> batches;
    std::vector<DataPosition> positions;
    size_t epoch_boundary = 0, window_boundary = 0;
    while (batches.size() < 300) {
        positions.push_back(batcher.position());
        batches.push_back(*batcher.next());
        if (positions.back().epoch == 1 && epoch_boundary == 0) epoch_boundary = batches.size() - 1;
        if (positions.back().window == 1 && window_boundary == 0) window_boundary = batches.size() - 1;
    }
    ASSERT_GT(epoch_boundary, 0u);
    ASSERT_GT(window_boundary, 0u);
    EXPECT_EQ(positions[epoch_boundary].batch, 0);
    EXPECT_EQ(positions[epoch_boundary].examples, 0);
    EXPECT_EQ(positions[epoch_boundary - 1].window, 2);

    for (size_t k : {size_t{0}, size_t{1}, size_t{37}, window_boundary, window_boundary + 1, epoch_boundary - 1,
                     epoch_boundary, epoch_boundary + 5, size_t{299}}) {
        // Through JSON, as a checkpoint stores it.
        const nlohmann::json saved = positions[k];
        const DataPosition restored = saved.get<DataPosition>();
        ASSERT_EQ(restored, positions[k]);
        Seq2SeqDataOptions resumed_options = options;
        resumed_options.prefetch = k % 2 == 0 ? 0 : 2;
        Seq2SeqBatcher resumed(tokenizer(), resumed_options);
        resumed.restore(restored);
        EXPECT_EQ(resumed.position(), positions[k]);
        for (size_t i = k; i < batches.size(); ++i) {
            const std::optional<Seq2SeqBatch> batch = resumed.next();
            ASSERT_TRUE(batch.has_value());
            ASSERT_TRUE(same_batch(*batch, batches[i])) << "resumed at " << k << ", batch " << i << " differs";
        }
    }

    // Restoring in the same batcher (its thread is running ahead) works too.
    batcher.restore(positions[10]);
    for (size_t i = 10; i < 20; ++i) ASSERT_TRUE(same_batch(*batcher.next(), batches[i])) << "batch " << i;
}

TEST(Seq2SeqBatcher, RejectsPositionsOfOtherDataOrOptions) {
    Seq2SeqDataOptions options = small_options();
    Seq2SeqBatcher batcher(tokenizer(), options);
    batcher.next();
    const DataPosition position = batcher.position();
    options.seed = 99;
    Seq2SeqBatcher other(tokenizer(), options);
    EXPECT_CONTAINS(error_of([&] { other.restore(position); }), "saved for different Gigaword data or options");
    options.seed = 7;
    options.batch.max_sentences = 8;
    Seq2SeqBatcher other_batch(tokenizer(), options);
    EXPECT_CONTAINS(error_of([&] { other_batch.restore(position); }), "saved for different Gigaword data or options");
    options.batch.max_sentences = 16;
    options.batch.pad_multiple = 8;  // other padding, other batches; pad_multiple 1 (the default here) keeps old fingerprints
    Seq2SeqBatcher other_padding(tokenizer(), options);
    EXPECT_CONTAINS(error_of([&] { other_padding.restore(position); }), "saved for different Gigaword data or options");
    EXPECT_EQ(hnas::data::hash_padding(12345, BatchOptions{16, 0, 1}), 12345u);

    DataPosition beyond = position;
    beyond.window = 3;
    EXPECT_CONTAINS(error_of([&] { batcher.restore(beyond); }), "window 3 does not exist");
    beyond.window = 0;
    beyond.batch = 100000;
    batcher.restore(beyond);
    EXPECT_CONTAINS(error_of([&] { batcher.next(); }), "batch 100000 of window 0 does not exist");

    nlohmann::json json = position;
    json.erase("batch");
    EXPECT_CONTAINS(error_of([&] { json.get<DataPosition>(); }), "missing key 'batch'");
    json = position;
    json["epoch"] = -1;
    EXPECT_CONTAINS(error_of([&] { json.get<DataPosition>(); }), "'epoch' must be a non-negative integer");
    json = position;
    json["fingerprint"] = 12;
    EXPECT_CONTAINS(error_of([&] { json.get<DataPosition>(); }), "'fingerprint' must be 16 lowercase hex digits");
}

// ---------------------------------------------------------------------------------------------
// The prefetch thread

TEST(Prefetcher, DeliversItemsThenTheProducersError) {
    int produced = 0;
    hnas::data::Prefetcher<int> prefetcher(
        [&]() -> std::optional<int> {
            if (produced == 5) throw hnas::Error("disk on fire at item 5");
            return produced++;
        },
        2);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(prefetcher.next(), i);
    EXPECT_CONTAINS(error_of([&] { prefetcher.next(); }), "disk on fire at item 5");
    EXPECT_CONTAINS(error_of([&] { prefetcher.next(); }), "disk on fire at item 5");  // and stays failed
}

TEST(Prefetcher, EndsAndStopsCleanly) {
    int produced = 0;
    hnas::data::Prefetcher<int> finite([&]() -> std::optional<int> {
        if (produced == 3) return std::nullopt;
        return produced++;
    }, 8);
    EXPECT_EQ(finite.next(), 0);
    EXPECT_EQ(finite.next(), 1);
    EXPECT_EQ(finite.next(), 2);
    EXPECT_FALSE(finite.next().has_value());
    EXPECT_FALSE(finite.next().has_value());
    // An endless producer blocked on a full queue is stopped by the destructor.
    hnas::data::Prefetcher<int> endless([] { return std::optional<int>(1); }, 1);
    EXPECT_EQ(endless.next(), 1);
}

TEST(Seq2SeqBatcher, ErrorsOnTheBackgroundThreadReachTheCaller) {
    Seq2SeqDataOptions options = small_options();
    options.article_path = scratch_dir().head_of(kTrainArticles, 3000, "changing_articles.txt");
    options.prefetch = 2;
    Seq2SeqBatcher batcher(tokenizer(), options);
    // The file shrinks after it was checked: the thread's read of a window fails.
    fs::resize_file(options.article_path, 1000);
    EXPECT_CONTAINS(error_of([&] { take(batcher, 100000); }), options.article_path + " ends at line");
    EXPECT_CONTAINS(error_of([&] { batcher.next(); }), "the file changed");
}

// ---------------------------------------------------------------------------------------------
// Bounded memory on a corpus the size of the real training split

int64_t status_kb(const char* key) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::string(key).size()));
    }
    return -1;
}

TEST(Seq2SeqBatcher, StreamsA4MillionLineCorpusInBoundedMemory) {
    // HNAS_TEST_STREAM_LINES makes a quicker run possible; the default is the real 4M-line test.
    const char* env = std::getenv("HNAS_TEST_STREAM_LINES");
    const int64_t lines = env != nullptr ? std::atoll(env) : 4'000'000;
    ASSERT_GT(lines, 0);
    constexpr int64_t kBoundMb = 64;

    // Short Gigaword-like pairs from frequent words, written in large blocks.
    const std::vector<std::string> words = {"the",   "police", "said",   "government", "president", "on",
                                            "killed", "people", "minister", "world",    "new",       "year",
                                            "first", "two",    "state",  "officials",  "percent",   "market",
                                            "shares", "prices", "china", "talks",      "##",        "<unk>"};
    const std::string articles = scratch_dir().path("big.article.txt"), titles = scratch_dir().path("big.title.txt");
    {
        std::FILE* article_file = std::fopen(articles.c_str(), "wb");
        std::FILE* title_file = std::fopen(titles.c_str(), "wb");
        ASSERT_NE(article_file, nullptr);
        ASSERT_NE(title_file, nullptr);
        hnas::Rng rng(2024);
        std::string article_block, title_block;
        for (int64_t i = 0; i < lines; ++i) {
            for (int w = 0; w < 5; ++w) (article_block += words[rng.below(words.size())]) += (w < 4 ? ' ' : '\n');
            for (int w = 0; w < 2; ++w) (title_block += words[rng.below(words.size())]) += (w < 1 ? ' ' : '\n');
            if (article_block.size() > (1u << 20) || i + 1 == lines) {
                std::fwrite(article_block.data(), 1, article_block.size(), article_file);
                std::fwrite(title_block.data(), 1, title_block.size(), title_file);
                article_block.clear();
                title_block.clear();
            }
        }
        std::fclose(article_file);
        std::fclose(title_file);
    }
    const double file_mb = static_cast<double>(fs::file_size(articles) + fs::file_size(titles)) / (1 << 20);
    tokenizer();  // trained before the measurement starts

    // Writing "5" to clear_refs resets the peak (VmHWM) to the current resident size (Linux 4.0+).
    // Growth is measured from the resident size, so a kernel without the reset can only overstate it.
    std::ofstream("/proc/self/clear_refs") << "5";
    const int64_t before_kb = status_kb("VmRSS:");
    ASSERT_GT(before_kb, 0);

    const auto start = std::chrono::steady_clock::now();
    int64_t rows = 0, tokens = 0;
    {
        Seq2SeqDataOptions options;
        options.article_path = articles;
        options.title_path = titles;
        options.batch.max_sentences = 64;
        options.epochs = 1;
        Seq2SeqBatcher batcher(tokenizer(), options);
        ASSERT_EQ(batcher.pairs(), lines);
        while (std::optional<Seq2SeqBatch> batch = batcher.next()) {
            rows += batch->source_ids.dim(0);
            tokens += batch->source_tokens + batch->target_tokens;
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t growth_kb = status_kb("VmHWM:") - before_kb;
    std::printf("[ stream   ] %lld pairs (%.0f MB of text), %.1f s, %.0f tokens/s, peak RSS growth %.1f MB\n",
                static_cast<long long>(rows), file_mb, seconds, static_cast<double>(tokens) / seconds,
                static_cast<double>(growth_kb) / 1024.0);
    EXPECT_EQ(rows, lines);
    EXPECT_LT(growth_kb, kBoundMb * 1024) << "peak RSS grew by " << growth_kb / 1024 << " MB streaming "
                                          << file_mb << " MB of text";
    fs::remove(articles);
    fs::remove(titles);
}

}  // namespace
