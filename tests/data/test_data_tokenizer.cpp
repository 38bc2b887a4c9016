// Tests for the SentencePiece tokenizer wrapper (src/data/tokenizer.*): training on Gigaword text,
// encode/decode round trips, the fixed special ids, Gigaword's unk markers, loading from bytes,
// deterministic training, and the errors for bad inputs and foreign models.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/text_io.h"
#include "data/tokenizer.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using hnas::testing::error_of;
using hnas::data::Tokenizer;
using hnas::data::TokenizerTrainOptions;

const std::string kTrainArticles = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/train_10k/train.article.txt";
const std::string kTestArticles = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/test_1951/input.txt";

// A scratch folder per test, removed when it ends.
class TokenizerTest : public ::testing::Test {
protected:
    TokenizerTrainOptions small_options(const std::string& input, const std::string& prefix) const {
        TokenizerTrainOptions options;
        options.inputs = {input};
        options.model_prefix = scratch_.path(prefix);
        options.vocab_size = 500;
        options.input_sentence_size = 2000;
        return options;
    }

    const hnas::testing::ScratchDir scratch_{std::string("hnas_test_tokenizer_") +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_"};
};

TEST_F(TokenizerTest, TrainsUnigramWithFixedSpecialIdsAndRoundTrips) {
    const std::string input = scratch_.head_of(kTrainArticles, 3000, "articles.txt");
    hnas::data::train_tokenizer(small_options(input, "uni"));
    ASSERT_TRUE(fs::exists(scratch_.path("uni.model")));
    ASSERT_TRUE(fs::exists(scratch_.path("uni.vocab")));
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("uni.model"));
    EXPECT_EQ(tokenizer.vocab_size(), 500);
    EXPECT_EQ(tokenizer.piece(hnas::data::kPadId), "<pad>");
    EXPECT_EQ(tokenizer.piece(hnas::data::kUnkId), "<unk>");
    EXPECT_EQ(tokenizer.piece(hnas::data::kBosId), "<s>");
    EXPECT_EQ(tokenizer.piece(hnas::data::kEosId), "</s>");
    EXPECT_EQ(tokenizer.piece_id("[CLS]"), hnas::data::kClsId);
    EXPECT_EQ(tokenizer.piece_id("[SEP]"), hnas::data::kSepId);
    EXPECT_EQ(tokenizer.piece_id("[MASK]"), hnas::data::kMaskId);

    // Lines without unk markers decode to themselves (Gigaword is single-spaced ASCII).
    int checked = 0;
    for (const std::string& line : hnas::testing::first_lines(kTrainArticles, 200)) {
        if (line.find("<unk>") != std::string::npos) continue;
        const std::vector<int32_t> ids = tokenizer.encode(line);
        ASSERT_FALSE(ids.empty());
        for (int32_t id : ids) {
            ASSERT_GE(id, hnas::data::kNumSpecialIds) << "special id from text: " << line;
        }
        EXPECT_EQ(tokenizer.decode(ids), line);
        ++checked;
    }
    EXPECT_GT(checked, 100);
    // Digit placeholders are text like any other.
    const std::vector<int32_t> ids = tokenizer.encode("a record #.## billion dollars");
    EXPECT_EQ(tokenizer.decode(ids), "a record #.## billion dollars");
}

TEST_F(TokenizerTest, UnkMarkersMapToTheUnkId) {
    const std::string input = scratch_.head_of(kTrainArticles, 3000, "articles.txt");
    hnas::data::train_tokenizer(small_options(input, "m"));
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("m.model"));
    // No piece learned for the markers' characters as a unit.
    EXPECT_EQ(tokenizer.piece_id("▁<unk>"), hnas::data::kUnkId);
    EXPECT_EQ(tokenizer.piece_id("<unk>"), hnas::data::kUnkId);

    const std::vector<int32_t> with_train_marker = tokenizer.encode("the <unk> computer corp.");
    const std::vector<int32_t> with_test_marker = tokenizer.encode("the UNK computer corp.");
    const std::vector<int32_t> pieces_before = tokenizer.encode("the");
    const std::vector<int32_t> pieces_after = tokenizer.encode("computer corp.");
    std::vector<int32_t> expected = pieces_before;
    expected.push_back(hnas::data::kUnkId);
    expected.insert(expected.end(), pieces_after.begin(), pieces_after.end());
    EXPECT_EQ(with_train_marker, expected);
    EXPECT_EQ(with_test_marker, expected);
    EXPECT_EQ(tokenizer.decode(with_test_marker), "the <unk> computer corp.");

    // At the ends of a line and repeated.
    EXPECT_EQ(tokenizer.encode("UNK"), std::vector<int32_t>{hnas::data::kUnkId});
    const std::vector<int32_t> both = tokenizer.encode("<unk> UNK");
    EXPECT_EQ(both, (std::vector<int32_t>{hnas::data::kUnkId, hnas::data::kUnkId}));
    // Only whole words are markers: other words are encoded by SentencePiece as usual.
    const std::vector<int32_t> unknown = tokenizer.encode("unknown");
    EXPECT_EQ(std::count(unknown.begin(), unknown.end(), hnas::data::kUnkId), 0);
    EXPECT_GT(tokenizer.encode("<unk>s").size(), 1u);
    EXPECT_GT(tokenizer.encode("UNKs").size(), 1u);
    // Every marker of the real test set becomes one unk id.
    for (const std::string& line : hnas::testing::first_lines(kTestArticles, 300)) {
        size_t markers = 0;
        for (size_t at = line.find("UNK"); at != std::string::npos; at = line.find("UNK", at + 3)) ++markers;
        const std::vector<int32_t> ids = tokenizer.encode(line);
        EXPECT_EQ(static_cast<size_t>(std::count(ids.begin(), ids.end(), hnas::data::kUnkId)), markers) << line;
    }
}

TEST_F(TokenizerTest, WordCacheGivesExactlyTheUncachedIds) {
    const std::string input = scratch_.head_of(kTrainArticles, 3000, "articles.txt");
    hnas::data::train_tokenizer(small_options(input, "m"));
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("m.model"));
    hnas::data::EncodeCache cache(1000);  // small: it fills up and starts over many times
    std::vector<int32_t> cached;
    auto expect_same = [&](const std::string& text) {
        cached.clear();
        tokenizer.encode(text, cached, cache);
        ASSERT_EQ(cached, tokenizer.encode(text)) << "text: " << text;
    };
    // Whitespace SentencePiece treats as a boundary (or deletes, like \v), odd spacing, special
    // symbols inside words, non-ASCII spaces and characters outside the training data.
    for (const std::string text :
         {"a\tb", "a\vb", "a\fb", "a\rb", "  leading and trailing  ", "two  spaces", "x[MASK]y [CLS]",
          "non\xC2\xA0" "breaking\xE3\x80\x80" "space", "Caf\xC3\xA9 \xE2\x80\x9C" "quoted\xE2\x80\x9D", "<unk>UNK <unk>",
          "", " "}) {
        expect_same(text);
    }
    const std::string root = std::string(HNAS_SOURCE_DIR) + "/data/";
    for (const std::string& file : {root + "gigaword/train_10k/train.article.txt", root + "gigaword/test_1951/input.txt",
                                    root + "gigaword/valid_small/valid.trg.small.txt", root + "corpus/moby_dick.txt"}) {
        for (const std::string& line : hnas::testing::first_lines(file, 4000)) expect_same(line);
    }
    // A long cased text with digits and punctuation: the start of the State of the Union file.
    std::string sotu = hnas::testing::first_lines(root + "corpus/sotu.txt", 1).front();
    expect_same(sotu);
}

TEST_F(TokenizerTest, LoadsFromSerializedBytes) {
    const std::string input = scratch_.head_of(kTrainArticles, 2000, "articles.txt");
    hnas::data::train_tokenizer(small_options(input, "m"));
    const Tokenizer from_file = Tokenizer::load(scratch_.path("m.model"));
    std::ifstream model_file(scratch_.path("m.model"), std::ios::binary);
    const std::string file_bytes((std::istreambuf_iterator<char>(model_file)), std::istreambuf_iterator<char>());
    EXPECT_EQ(from_file.serialized_model(), file_bytes);

    fs::remove(scratch_.path("m.model"));  // the bytes are all a checkpoint keeps
    const Tokenizer from_bytes = Tokenizer::from_serialized(from_file.serialized_model());
    EXPECT_EQ(from_bytes.model_hash(), from_file.model_hash());
    EXPECT_EQ(from_bytes.vocab_size(), from_file.vocab_size());
    for (const std::string& line : hnas::testing::first_lines(kTrainArticles, 50)) {
        EXPECT_EQ(from_bytes.encode(line), from_file.encode(line));
    }
    EXPECT_NE(error_of([] { Tokenizer::from_serialized("not a model"); }).find("cannot load tokenizer model"),
              std::string::npos);
}

TEST_F(TokenizerTest, TrainingIsDeterministic) {
    const std::string input = scratch_.head_of(kTrainArticles, 4000, "articles.txt");
    TokenizerTrainOptions options = small_options(input, "a");
    options.input_sentence_size = 1500;  // sampling from 4000 lines: the seed matters
    hnas::data::train_tokenizer(options);
    options.model_prefix = scratch_.path("b");
    hnas::data::train_tokenizer(options);
    options.model_prefix = scratch_.path("c");
    options.seed = 1;
    hnas::data::train_tokenizer(options);
    // The models differ only in the model_prefix they record; the vocabularies hold every piece and
    // its score.
    auto vocabulary = [&](const std::string& prefix) {
        std::ifstream in(scratch_.path(prefix + ".vocab"));
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    EXPECT_TRUE(vocabulary("a") == vocabulary("b")) << "same options and seed, different vocabularies";
    EXPECT_FALSE(vocabulary("a") == vocabulary("c")) << "another seed, same sample";
}

TEST_F(TokenizerTest, TrainsBpe) {
    const std::string input = scratch_.head_of(kTrainArticles, 2000, "articles.txt");
    TokenizerTrainOptions options = small_options(input, "bpe");
    options.type = hnas::data::TokenizerType::bpe;
    hnas::data::train_tokenizer(options);
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("bpe.model"));
    EXPECT_EQ(tokenizer.piece_id("[MASK]"), hnas::data::kMaskId);
    const std::string line = hnas::testing::first_lines(kTrainArticles, 1).front();
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(line)), line);
    EXPECT_EQ(tokenizer.encode("UNK"), std::vector<int32_t>{hnas::data::kUnkId});
}

TEST_F(TokenizerTest, LongLinesAreTrainedOnInPieces) {
    // One 40 KB line (like an address of sotu.txt) is ten times SentencePiece's sentence limit.
    std::ofstream(scratch_.path("long.txt")) << [] {
        std::string text;
        for (int i = 0; i < 4000; ++i) text += (i % 3 == 0 ? "whale " : i % 3 == 1 ? "ship " : "sea ");
        return text;
    }() << '\n';
    TokenizerTrainOptions options = small_options(scratch_.path("long.txt"), "long");
    options.vocab_size = 30;
    options.type = hnas::data::TokenizerType::bpe;
    hnas::data::train_tokenizer(options);
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("long.model"));
    EXPECT_EQ(tokenizer.encode("whale ship sea").size(), 3u);
}

TEST_F(TokenizerTest, DecodeDropsControlIdsAndChecksRange) {
    const std::string input = scratch_.head_of(kTrainArticles, 2000, "articles.txt");
    TokenizerTrainOptions options = small_options(input, "m");
    options.type = hnas::data::TokenizerType::bpe;
    hnas::data::train_tokenizer(options);
    const Tokenizer tokenizer = Tokenizer::load(scratch_.path("m.model"));
    std::vector<int32_t> ids = {hnas::data::kBosId};
    for (int32_t id : tokenizer.encode("the police said")) ids.push_back(id);
    ids.push_back(hnas::data::kEosId);
    ids.push_back(hnas::data::kPadId);
    EXPECT_EQ(tokenizer.decode(ids), "the police said");
    EXPECT_NE(error_of([&] { tokenizer.decode(std::vector<int32_t>{500}); }).find("outside the vocabulary"),
              std::string::npos);
}

TEST_F(TokenizerTest, RejectsModelsWithOtherSpecialIds) {
    const std::string input = scratch_.head_of(kTrainArticles, 1000, "articles.txt");
    // SentencePiece's defaults: unk 0, bos 1, eos 2, no pad.
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        {{"input", input}, {"model_prefix", scratch_.path("foreign")}, {"vocab_size", "300"}, {"model_type", "bpe"},
         {"minloglevel", "1"}});
    ASSERT_TRUE(status.ok()) << status.ToString();
    const std::string message = error_of([&] { Tokenizer::load(scratch_.path("foreign.model")); });
    EXPECT_NE(message.find(scratch_.path("foreign.model")), std::string::npos) << message;
    EXPECT_NE(message.find("pad id is -1, hnas needs 0"), std::string::npos) << message;
}

TEST_F(TokenizerTest, TrainingErrorsNameTheProblem) {
    TokenizerTrainOptions options = small_options(scratch_.path("missing.txt"), "m");
    EXPECT_NE(error_of([&] { hnas::data::train_tokenizer(options); }).find("cannot open " + scratch_.path("missing.txt")),
              std::string::npos);
    std::ofstream(scratch_.path("bad.txt")) << "fine line\nbad \xC3\x28 byte\n";
    options.inputs = {scratch_.path("bad.txt")};
    EXPECT_NE(error_of([&] { hnas::data::train_tokenizer(options); }).find(scratch_.path("bad.txt") + ":2: invalid UTF-8"),
              std::string::npos);
    std::ofstream(scratch_.path("blank.txt")) << "\n  \n<unk> UNK\n";
    options.inputs = {scratch_.path("blank.txt")};
    EXPECT_NE(error_of([&] { hnas::data::train_tokenizer(options); }).find("hold no text"), std::string::npos);
    options.inputs = {scratch_.head_of(kTrainArticles, 100, "few.txt")};
    options.type = hnas::data::TokenizerType::wordpiece;
    EXPECT_NE(error_of([&] { hnas::data::train_tokenizer(options); }).find("WordPiece vocabulary is loaded, not trained"),
              std::string::npos);
    options.type = hnas::data::TokenizerType::unigram;
    options.vocab_size = 30522;  // a paper config's vocabulary asked of 100 lines
    const std::string too_many = error_of([&] { hnas::data::train_tokenizer(options); });
    EXPECT_CONTAINS(too_many, "tokenizer training: the text of " + options.inputs[0] + " makes at most ");
    EXPECT_CONTAINS(too_many, " pieces, not the 30522 of vocab_size: lower it, or train on the text the config was made for");
}

}  // namespace
