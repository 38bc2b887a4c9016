// BERT's WordPiece tokenization (src/data/wordpiece.h) and its place in hnas::data::Tokenizer. The
// expected pieces are worked out from the algorithm's definition (Google's tokenization.py, uncased):
// on a small vocabulary written here, and on the bundled bert-base-uncased vocab.txt.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/tokenizer.h"
#include "data/wordpiece.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using data::Tokenizer;
using testing::error_of;

const std::string kBertVocab = std::string(HNAS_SOURCE_DIR) + "/data/vocab/vocab.txt";

// vocab.txt lines 0..: [PAD] [UNK] [CLS] [SEP] [MASK] then the pieces; hnas ids 0 [PAD], 1 [UNK],
// 2 [BOS] and 3 [EOS] (added), 4 [CLS], 5 [SEP], 6 [MASK], then line 5 onwards from id 7.
const char* const kSmallVocab[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",  "##aff", "##able", "aff",
                                   "hello", "naive", "cafe",  "don",   "'",      "t",   "u",     ".",      "s",
                                   "a",     "e",     "-",     "mail",  "中",     "国",  "##s",   "the"};

std::string write_vocab(const std::string& name, const std::vector<std::string>& lines) {
    static const testing::ScratchDir scratch("hnas_wordpiece_");
    std::string text;
    for (const std::string& line : lines) text.append(line).append("\n");
    return scratch.write(name, text);
}

const Tokenizer& small() {
    static const Tokenizer tokenizer =
        Tokenizer::load_wordpiece(write_vocab("small.txt", std::vector<std::string>(std::begin(kSmallVocab), std::end(kSmallVocab))));
    return tokenizer;
}

std::vector<std::string> pieces_of(const Tokenizer& tokenizer, const std::string& text) {
    std::vector<std::string> pieces;
    for (int32_t id : tokenizer.encode(text)) pieces.emplace_back(tokenizer.piece(id));
    return pieces;
}

using Pieces = std::vector<std::string>;

TEST(WordPiece, BasicTokenizationAsBertsUncased) {
    EXPECT_EQ(data::basic_tokenize("Héllo  naïve\tCAFÉ\n"), Pieces({"hello", "naive", "cafe"}));
    EXPECT_EQ(data::basic_tokenize("don't U.S.A. e-mail"), Pieces({"don", "'", "t", "u", ".", "s", ".", "a", ".", "e", "-", "mail"}));
    EXPECT_EQ(data::basic_tokenize("中国 hi"), Pieces({"中", "国", "hi"}));                  // CJK ideographs stand alone
    EXPECT_EQ(data::basic_tokenize(std::string("he\x01l\0lo", 7)), Pieces({"hello"}));   // control bytes and NUL go
    EXPECT_EQ(data::basic_tokenize("a\xC2\xA0" "b\xE3\x80\x80" "c"), Pieces({"a", "b", "c"}));  // Zs spaces split
    EXPECT_EQ(data::basic_tokenize("\xE2\x80\x9CQuoted\xE2\x80\x9D"), Pieces({"\xE2\x80\x9C", "quoted", "\xE2\x80\x9D"}));
    EXPECT_EQ(data::basic_tokenize("\xFF" "ok"), Pieces({"ok"}));                           // invalid UTF-8 counts as U+FFFD
    EXPECT_EQ(data::basic_tokenize("\xED\x95\x9C"), Pieces({"\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"}));  // 한 → ᄒ ᅡ ᆫ (NFD)
}

TEST(WordPiece, GreedyLongestMatchFirst) {
    EXPECT_EQ(pieces_of(small(), "unaffable"), Pieces({"un", "##aff", "##able"}));
    EXPECT_EQ(pieces_of(small(), "Héllo naïve CAFÉ"), Pieces({"hello", "naive", "cafe"}));
    EXPECT_EQ(pieces_of(small(), "don't"), Pieces({"don", "'", "t"}));
    EXPECT_EQ(pieces_of(small(), "U.S.A."), Pieces({"u", ".", "s", ".", "a", "."}));
    EXPECT_EQ(pieces_of(small(), "e-mail"), Pieces({"e", "-", "mail"}));
    EXPECT_EQ(pieces_of(small(), "中国"), Pieces({"中", "国"}));
    // A word without a full segmentation is one [UNK], even when it starts well.
    EXPECT_EQ(pieces_of(small(), "unaffablez hello"), Pieces({"[UNK]", "hello"}));
    EXPECT_EQ(pieces_of(small(), "zebra"), Pieces({"[UNK]"}));
    // More than 100 characters: [UNK] (the word "a" × 101 would otherwise not segment either).
    EXPECT_EQ(pieces_of(small(), std::string(101, 'u')), Pieces({"[UNK]"}));
    EXPECT_EQ(pieces_of(small(), "uss"), Pieces({"u", "##s", "##s"}));
    // Gigaword's unknown-word markers are the unk id, before lower-casing could touch them.
    EXPECT_EQ(small().encode("hello <unk> UNK unk"), std::vector<int32_t>({small().piece_id("hello"), data::kUnkId, data::kUnkId, data::kUnkId}));
    data::EncodeCache cache;
    std::vector<int32_t> cached;
    small().encode("unaffable hello <unk> don't", cached, cache);
    EXPECT_EQ(cached, small().encode("unaffable hello <unk> don't"));
}

TEST(WordPiece, SpecialIdsAndVocabularyRows) {
    const Tokenizer& tokenizer = small();
    EXPECT_EQ(tokenizer.kind(), data::TokenizerKind::wordpiece);
    EXPECT_EQ(tokenizer.vocab_size(), 28);  // 26 lines + [BOS] + [EOS]
    EXPECT_EQ(tokenizer.piece(data::kPadId), "[PAD]");
    EXPECT_EQ(tokenizer.piece(data::kBosId), "[BOS]");
    EXPECT_EQ(tokenizer.piece(data::kMaskId), "[MASK]");
    EXPECT_EQ(tokenizer.piece(7), "un");
    EXPECT_EQ(tokenizer.source_rows(), std::vector<int64_t>({0, 1, -1, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                                             17, 18, 19, 20, 21, 22, 23, 24, 25}));
    EXPECT_TRUE(tokenizer.starts_word(tokenizer.piece_id("un")));
    EXPECT_FALSE(tokenizer.starts_word(tokenizer.piece_id("##aff")));
    EXPECT_EQ(tokenizer.piece_id("absent"), data::kUnkId);
    // "," is not in this vocabulary: the unk id, decoded as Gigaword's marker
    EXPECT_EQ(tokenizer.decode(tokenizer.encode("Unaffable hello, don't")), "unaffable hello <unk> don ' t");
    const Tokenizer copy = Tokenizer::from_serialized(tokenizer.serialized_model());
    EXPECT_EQ(copy.model_hash(), tokenizer.model_hash());
    EXPECT_EQ(copy.encode("unaffable cafe"), tokenizer.encode("unaffable cafe"));
    EXPECT_TRUE(Tokenizer::from_serialized(copy.serialized_model()).kind() == data::TokenizerKind::wordpiece);
}

TEST(WordPiece, VocabularyErrorsNameTheFile) {
    const std::string missing = write_vocab("missing.txt", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "word"});
    EXPECT_CONTAINS(error_of([&] { Tokenizer::load_wordpiece(missing); }), missing + ": the vocabulary has no [MASK] piece");
    const std::string twice = write_vocab("twice.txt", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "word", "other", "word"});
    EXPECT_CONTAINS(error_of([&] { Tokenizer::load_wordpiece(twice); }), twice + ": line 8 repeats the piece \"word\" of line 6");
    EXPECT_CONTAINS(error_of([] { Tokenizer::load_wordpiece("/nonexistent/vocab.txt"); }),
                    "the WordPiece vocabulary /nonexistent/vocab.txt: cannot open the file (No such file or directory)");
    fs::remove(missing);
    fs::remove(twice);
}

TEST(WordPiece, BertBaseUncasedVocabulary) {
    const Tokenizer bert = Tokenizer::load_wordpiece(kBertVocab);
    EXPECT_EQ(bert.vocab_size(), 30524);
    EXPECT_EQ(bert.source_rows()[data::kClsId], 101);
    EXPECT_EQ(bert.source_rows()[data::kMaskId], 103);
    // "the" is line 1996: five special lines before it move to the front, so it is id 7 + 1996 − 5.
    EXPECT_EQ(bert.piece_id("the"), 1998);
    EXPECT_EQ(pieces_of(bert, "The quick brown fox's unaffable Héllo, naïve café!"),
              Pieces({"the", "quick", "brown", "fox", "'", "s", "una", "##ffa", "##ble", "hello", ",", "naive", "cafe", "!"}));
    EXPECT_EQ(pieces_of(bert, "Tokenization of hnas in 2024: e-mail U.S.A."),
              Pieces({"token", "##ization", "of", "h", "##nas", "in", "202", "##4", ":", "e", "-", "mail", "u", ".", "s", ".", "a", "."}));
    EXPECT_EQ(bert.encode("北京 is the capital"), std::vector<int32_t>({1783, 1757, 2005, 1998, 3009}));
}

}  // namespace
}  // namespace hnas
