// Tests for prepared text (src/data/prepared_text.*, `hnas prepare`): the masked-LM pipeline reading
// the memory-mapped shards draws the very batches it draws from the sources read into memory (one
// window or several, document or corpus packing, every document unit, sources cut into many shards);
// an interrupted preparation resumes and a changed one starts over; damaged text is judged as the
// in-memory reader judges it, with the right line number in a later shard; and a damaged prepared
// directory (truncated or corrupted shard, index past its ids, ids outside the vocabulary, another
// tokenizer, other sources, another format version, no manifest, a full disk, a malformed manifest
// entry) is refused naming the file and what is wrong.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/read_file.h"
#include "data/gigaword.h"
#include "data/mlm.h"
#include "data/prepared_pairs.h"
#include "data/prepared_text.h"
#include "data/tokenizer.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using hnas::Json;
using hnas::data::DocumentUnit;
using hnas::data::MlmBatch;
using hnas::data::MlmBatcher;
using hnas::data::MlmDataOptions;
using hnas::data::PrepareOptions;
using hnas::data::TextSource;
using hnas::data::Tokenizer;
using hnas::testing::error_of;
using hnas::testing::same_tensor;

const std::string kMobyDick = std::string(HNAS_SOURCE_DIR) + "/data/corpus/moby_dick.txt";
const std::string kSotu = std::string(HNAS_SOURCE_DIR) + "/data/corpus/sotu.txt";
const std::string kArticles = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/derived/train_all.article.txt";
const std::string kTitles = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/derived/train_all.title.txt";

const hnas::testing::ScratchDir& scratch() {
    static const hnas::testing::ScratchDir dir("hnas_test_prepared_");
    return dir;
}

const Tokenizer& tokenizer() {
    static const Tokenizer model = [] {
        hnas::data::TokenizerTrainOptions options;
        options.inputs = {kMobyDick};
        options.vocab_size = 2000;
        options.type = hnas::data::TokenizerType::bpe;
        return Tokenizer::load(scratch().train_tokenizer("moby", options));
    }();
    return model;
}

// Every document unit, from the bundled corpora.
std::vector<TextSource> sources() {
    return {{scratch().head_of(kArticles, 3000, "articles.txt"), DocumentUnit::line},
            {scratch().head_of(kMobyDick, 4000, "moby_file.txt"), DocumentUnit::file},
            {scratch().head_of(kSotu, 6, "sotu.txt"), DocumentUnit::line},
            {scratch().head_of(kMobyDick, 2500, "moby_blocks.txt"), DocumentUnit::block}};
}

// Small shards, so that every source is cut into several (a whole-file document among them).
PrepareOptions small_shards() {
    PrepareOptions options;
    options.threads = 2;
    options.chunk_bytes = 40000;
    return options;
}

std::string prepared(const std::string& name, const std::vector<TextSource>& from = sources(), PrepareOptions options = small_shards()) {
    const std::string directory = scratch().path(name);
    hnas::data::prepare_text(from, tokenizer(), directory, options, nullptr);
    return directory;
}

bool same_batch(const MlmBatch& a, const MlmBatch& b) {
    return same_tensor(a.input_ids, b.input_ids) && same_tensor(a.segment_ids, b.segment_ids) && same_tensor(a.valid, b.valid) &&
           same_tensor(a.masked_positions, b.masked_positions) && same_tensor(a.masked_labels, b.masked_labels) &&
           same_tensor(a.sentence_order, b.sentence_order) && a.tokens == b.tokens;
}

void expect_same_batches(MlmDataOptions options, const std::string& directory, size_t count) {
    options.sources = sources();
    MlmBatcher in_memory(tokenizer(), options);
    options.prepared = directory;
    MlmBatcher mapped(tokenizer(), options);
    EXPECT_EQ(mapped.documents(), in_memory.documents());
    EXPECT_EQ(mapped.corpus_tokens(), in_memory.corpus_tokens());
    EXPECT_EQ(mapped.position(), in_memory.position());
    for (size_t i = 0; i < count; ++i) {
        const auto a = in_memory.next(), b = mapped.next();
        ASSERT_EQ(a.has_value(), b.has_value()) << "one ends at batch " << i;
        if (!a) return;
        ASSERT_TRUE(same_batch(*a, *b)) << "batch " << i << " differs";
    }
}

// A corpus's documents across parts, one of which ends none (a document continuing through it) and
// the last leaving a sentence outside any: each sentence's document and whether it starts one, as
// counting the document ends before it gives them.
TEST(TokenCorpus, DocumentsOfSentencesAcrossParts) {
    const std::vector<int32_t> ids(8, 5);
    const std::vector<uint32_t> a_sentences{1, 2, 3}, a_documents{1, 3}, b_sentences{1, 2}, c_sentences{1, 2, 3}, c_documents{1, 2};
    hnas::data::TokenCorpus corpus({{ids.data(), 4, 3, a_sentences, a_documents},
                                    {ids.data(), 4, 2, b_sentences, {}},
                                    {ids.data(), 4, 3, c_sentences, c_documents}},
                                   nullptr);
    const std::vector<uint64_t> document_ends{1, 3, 6, 7};  // global sentence counts
    ASSERT_EQ(corpus.sentences(), 8u);
    ASSERT_EQ(corpus.documents(), document_ends.size());
    for (uint64_t s = 0; s < 8; ++s) {
        const auto ended = static_cast<uint64_t>(std::count_if(document_ends.begin(), document_ends.end(), [&](uint64_t e) { return e <= s; }));
        EXPECT_EQ(corpus.document_of(s), ended) << "sentence " << s;
        EXPECT_EQ(corpus.starts_document(s), s == 0 || std::count(document_ends.begin(), document_ends.end(), s) == 1) << "sentence " << s;
    }
    EXPECT_EQ(corpus.document_of(8), 4u);
}

TEST(PreparedText, GivesTheBatchesOfTheSourcesReadIntoMemory) {
    const std::string directory = prepared("same");
    const Json manifest = hnas::parse_json(hnas::read_file(directory + "/manifest.json", "manifest"), "manifest");
    ASSERT_GT(manifest.at("shards").size(), 8u) << "the sources should be cut into many shards";
    MlmDataOptions options;
    options.batch.max_sentences = 16;
    options.seed = 5;
    options.prefetch = 0;
    expect_same_batches(options, directory, 60);
    options.packing = hnas::data::Packing::corpus;
    expect_same_batches(options, directory, 60);
}

TEST(PreparedText, GivesTheBatchesOfTheSourcesReadIntoMemoryWindowByWindow) {
    const std::string directory = prepared("windows");
    MlmDataOptions options;
    options.batch.max_sentences = 16;
    options.seed = 7;
    options.shuffle_sentences = 1500;
    options.shuffle_regions = 3;
    options.epochs = 2;
    options.sources = sources();
    MlmBatcher probe(tokenizer(), options);
    ASSERT_GT(probe.windows_per_epoch(), 2);
    for (auto packing : {hnas::data::Packing::document, hnas::data::Packing::corpus}) {
        options.packing = packing;
        expect_same_batches(options, directory, 100000);
    }
}

TEST(PreparedText, ShardsCutOnlyWhereTheWholeFileReaderEndsADocument) {
    // The whole-file document continues across shards: one document, as read whole.
    const std::vector<TextSource> whole = {{scratch().head_of(kMobyDick, 4000, "moby_whole.txt"), DocumentUnit::file}};
    MlmDataOptions options;
    options.sources = whole;
    options.prepared = prepared("whole", whole);
    EXPECT_EQ(MlmBatcher(tokenizer(), options).documents(), 1);
}

TEST(PreparedText, ResumesAnInterruptedPreparationAndStartsOverAChangedOne) {
    const std::string directory = prepared("resume");
    const std::string manifest_text = hnas::read_file(directory + "/manifest.json", "manifest");
    Json plan = hnas::parse_json(manifest_text, "manifest");
    plan.erase("counts");
    plan.erase("shards");
    // As a preparation stopped after some shards: a plan, no manifest, shard 2 missing and shard 3 half-written.
    fs::remove(directory + "/manifest.json");
    hnas::testing::write_file(directory + "/plan.json", plan.dump(1) + "\n");
    fs::remove(directory + "/shard-000002.idx");
    fs::resize_file(directory + "/shard-000003.ids", 10);
    EXPECT_CONTAINS(error_of([&] { hnas::data::open_prepared_text(directory, sources(), tokenizer()); }), "did not finish");
    const auto resumed = hnas::data::prepare_text(sources(), tokenizer(), directory, small_shards(), nullptr);
    EXPECT_EQ(resumed.reused_shards, resumed.shards - 2);
    EXPECT_EQ(hnas::read_file(directory + "/manifest.json", "manifest"), manifest_text);
    EXPECT_FALSE(fs::exists(directory + "/plan.json"));
    // Done already: nothing is redone.
    EXPECT_EQ(hnas::data::prepare_text(sources(), tokenizer(), directory, small_shards(), nullptr).reused_shards, resumed.shards);
    // Other settings: it starts over, leaving no shard of the old plan.
    PrepareOptions larger = small_shards();
    larger.chunk_bytes = 1 << 20;
    const auto redone = hnas::data::prepare_text(sources(), tokenizer(), directory, larger, nullptr);
    EXPECT_EQ(redone.reused_shards, 0);
    EXPECT_FALSE(fs::exists(directory + "/shard-" + std::string("000010") + ".ids"));
    EXPECT_EQ(redone.tokens, resumed.tokens);
}

TEST(PreparedText, DamagedTextIsJudgedAsInMemoryWithItsLineNumber) {
    std::string text;
    for (int i = 1; i <= 4000; ++i) text += "Line number " + std::to_string(i) + " of the file.\n";
    const std::string bad = text.substr(0, text.find("Line number 3001 ")) + "Line number 3001 has a \xff byte.\n" +
                            text.substr(text.find("Line number 3002 "));
    const std::vector<TextSource> damaged = {{scratch().write("damaged.txt", bad), DocumentUnit::line}};
    const std::string error = error_of([&] { prepared("damaged", damaged); });
    EXPECT_CONTAINS(error, "damaged.txt:3001:");
    EXPECT_FALSE(fs::exists(scratch().path("damaged") + "/manifest.json"));
    PrepareOptions skip = small_shards();
    skip.damaged_lines = hnas::DamagedLines::skip;
    EXPECT_EQ(hnas::data::prepare_text(damaged, tokenizer(), scratch().path("skipped"), skip, nullptr).damaged_lines, 1);
}

// A copy of a prepared directory with one file changed by `damage`, and with the manifest's checksum
// of that file made right again when `fix_checksum` (so that the check behind it is the one that speaks).
std::string damaged_copy(const std::string& name, const std::string& file, void (*damage)(std::string&), bool fix_checksum) {
    static const std::string original = prepared("original");
    const std::string directory = scratch().path(name);
    fs::remove_all(directory);
    fs::copy(original, directory);
    std::string bytes = hnas::read_file(directory + "/" + file, "shard");
    damage(bytes);
    hnas::testing::write_file(directory + "/" + file, bytes);
    if (fix_checksum) {
        Json manifest = hnas::parse_json(hnas::read_file(directory + "/manifest.json", "manifest"), "manifest");
        const bool ids = file.ends_with(".ids");
        char hex[9];
        std::snprintf(hex, sizeof hex, "%08x", hnas::crc32c(bytes.data(), bytes.size()));
        manifest["shards"][1][ids ? "ids_crc32c" : "index_crc32c"] = hex;
        hnas::testing::write_file(directory + "/manifest.json", manifest.dump(1));
    }
    return directory;
}

std::string open_error(const std::string& directory, const std::vector<TextSource>& from = sources(),
                       const Tokenizer& with = tokenizer()) {
    return error_of([&] { hnas::data::open_prepared_text(directory, from, with); });
}

TEST(PreparedText, RefusesDamagedShardsNamingTheFile) {
    const std::string truncated = open_error(damaged_copy("truncated", "shard-000001.ids", [](std::string& b) { b.resize(b.size() - 2); }, false));
    EXPECT_CONTAINS(truncated, "shard-000001.ids");
    EXPECT_CONTAINS(truncated, "truncated");
    const std::string corrupted = open_error(damaged_copy("corrupted", "shard-000001.ids", [](std::string& b) { b[100] ^= 1; }, false));
    EXPECT_CONTAINS(corrupted, "shard-000001.ids: checksum");
    // An index whose last sentence ends past the shard's ids, its checksum made to match.
    const std::string past = open_error(damaged_copy("past", "shard-000001.idx", [](std::string& b) {
        uint32_t end;
        std::memcpy(&end, b.data() + 16, 4);
        const size_t sentences_start = 32;
        end += 5;
        std::memcpy(b.data() + sentences_start, &end, 4);
    }, true));
    EXPECT_CONTAINS(past, "shard-000001.idx: sentence 0 ends at");
    // An id outside the vocabulary, its checksum made to match.
    const std::string outside = open_error(damaged_copy("outside", "shard-000001.ids", [](std::string& b) { b[0] = b[1] = '\xff'; }, true));
    EXPECT_CONTAINS(outside, "shard-000001.ids: token id 65535 is outside the tokenizer's 2000 pieces");
}

TEST(PreparedText, RefusesAnotherTokenizerOtherSourcesAndAnotherVersion) {
    const std::string directory = prepared("checked");
    hnas::data::TokenizerTrainOptions options;
    options.inputs = {kMobyDick};
    options.vocab_size = 1500;
    const Tokenizer other = Tokenizer::load(scratch().train_tokenizer("other", options));
    EXPECT_CONTAINS(open_error(directory, sources(), other), "prepared with tokenizer");
    std::vector<TextSource> fewer = sources();
    fewer.pop_back();
    EXPECT_CONTAINS(open_error(directory, fewer), "prepared from 4 sources, the config names 3");
    std::vector<TextSource> swapped = sources();
    swapped[0].unit = DocumentUnit::block;
    EXPECT_CONTAINS(open_error(directory, swapped), "source 0 is");
    const std::string changed_source = scratch().head_of(kArticles, 3000, "changed.txt");
    const std::vector<TextSource> from_changed = {{changed_source, DocumentUnit::line}};
    const std::string of_changed = prepared("changed", from_changed);
    std::ofstream(changed_source, std::ios::app) << "One more line.\n";
    EXPECT_CONTAINS(open_error(of_changed, from_changed), "it changed; run `hnas prepare` again");
    Json manifest = hnas::parse_json(hnas::read_file(directory + "/manifest.json", "manifest"), "manifest");
    manifest["version"] = 2;
    hnas::testing::write_file(directory + "/manifest.json", manifest.dump());
    EXPECT_CONTAINS(open_error(directory), "format version 2, this hnas reads 1");
    fs::remove(directory + "/manifest.json");
    EXPECT_CONTAINS(open_error(directory), "not a directory `hnas prepare` wrote");
}

// Found by tests/fuzz/fuzz_prepared_text.cpp: a source entry that is no object, or a unit that is no
// string, let nlohmann's type_error escape instead of naming the manifest.
TEST(PreparedText, RefusesAMalformedSourceEntryNamingTheManifest) {
    const std::string directory = prepared("malformed");
    const Json manifest = hnas::parse_json(hnas::read_file(directory + "/manifest.json", "manifest"), "manifest");
    for (const Json& entry : {Json("not an entry"), Json{{"path", sources()[0].path}, {"unit", 3}}}) {
        Json changed = manifest;
        changed["sources"][0] = entry;
        hnas::testing::write_file(directory + "/manifest.json", changed.dump());
        const std::string error = open_error(directory);
        EXPECT_CONTAINS(error, "manifest.json: a source entry");
        EXPECT_CONTAINS(error, "is malformed");
    }
}

// A disk that fills up mid-way (a file size limit here): the error says so and no manifest is written,
// so training refuses the directory.
TEST(PreparedText, AFullDiskLeavesNothingTrainingWouldAccept) {
    const std::string directory = scratch().path("full");
    const std::vector<TextSource> from = sources();
    (void)tokenizer();  // trained here, not in the child under the size limit
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{20000, 20000};
        setrlimit(RLIMIT_FSIZE, &limit);
        const std::string error = error_of([&] { hnas::data::prepare_text(from, tokenizer(), directory, small_shards(), nullptr); });
        _exit(error.find("cannot write") != std::string::npos ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the preparation should stop with a write error";
    EXPECT_FALSE(fs::exists(directory + "/manifest.json"));
    EXPECT_CONTAINS(open_error(directory), "did not finish");
}

// Headline pairs: the prepared shards give the very batches the files give, window by window, with a
// damaged pair left out (and its line number kept) and blank pairs skipped alike.
TEST(PreparedPairs, GiveTheBatchesOfTheFiles) {
    std::vector<std::string> articles = hnas::read_lines(kArticles, "articles"), titles = hnas::read_lines(kTitles, "titles");
    articles.resize(3000);
    titles.resize(3000);
    articles[1234] = "a damaged \x01 line";
    titles[77] = "";
    std::string article_text, title_text;
    for (size_t i = 0; i < articles.size(); ++i) {
        article_text += articles[i] + "\n";
        title_text += titles[i] + "\n";
    }
    hnas::data::Seq2SeqDataOptions options;
    options.article_path = scratch().write("pairs.article.txt", article_text);
    options.title_path = scratch().write("pairs.title.txt", title_text);
    options.damaged_lines = hnas::DamagedLines::skip;
    options.shuffle_buffer = 600;
    options.shuffle_regions = 3;
    options.seed = 9;
    options.epochs = 2;
    options.prefetch = 0;
    PrepareOptions prepare = small_shards();
    prepare.damaged_lines = hnas::DamagedLines::skip;
    const std::string directory = scratch().path("pairs");
    const auto summary = hnas::data::prepare_pairs(options.article_path, options.title_path, tokenizer(), directory, prepare, nullptr);
    EXPECT_GT(summary.shards, 3);
    EXPECT_EQ(summary.damaged_lines, 1);
    hnas::data::Seq2SeqBatcher files(tokenizer(), options);
    options.prepared = directory;
    hnas::data::Seq2SeqBatcher mapped(tokenizer(), options);
    EXPECT_EQ(mapped.pairs(), 3000);
    EXPECT_EQ(mapped.position(), files.position());
    for (int64_t i = 0;; ++i) {
        const auto a = files.next(), b = mapped.next();
        ASSERT_EQ(a.has_value(), b.has_value()) << "one ends at batch " << i;
        if (!a) break;
        ASSERT_TRUE(same_tensor(a->source_ids, b->source_ids) && same_tensor(a->target_input, b->target_input) &&
                    same_tensor(a->target_output, b->target_output) && same_tensor(a->target_valid, b->target_valid) &&
                    a->example_index == b->example_index)
            << "batch " << i << " differs";
    }
    EXPECT_CONTAINS(error_of([&] { hnas::data::PreparedPairs(directory, options.title_path, options.article_path, tokenizer()); }),
                    "prepared from");
}

// Found by tests/fuzz/fuzz_prepared_text.cpp: counts that are no object let nlohmann's type_error escape.
TEST(PreparedPairs, RefuseCountsThatAreNoObject) {
    const std::string article = scratch().head_of(kArticles, 50, "few.article.txt"), title = scratch().head_of(kTitles, 50, "few.title.txt");
    const std::string directory = scratch().path("pairs_counts");
    hnas::data::prepare_pairs(article, title, tokenizer(), directory, small_shards(), nullptr);
    EXPECT_EQ(hnas::data::PreparedPairs(directory, article, title, tokenizer()).pairs(), 50);
    Json manifest = hnas::parse_json(hnas::read_file(directory + "/manifest.json", "manifest"), "manifest");
    manifest["counts"] = 5;
    hnas::testing::write_file(directory + "/manifest.json", manifest.dump());
    EXPECT_CONTAINS(error_of([&] { (void)hnas::data::PreparedPairs(directory, article, title, tokenizer()); }),
                    "manifest.json: counts must be an object, got 5");
}

}  // namespace
