// Tests for the ROUGE-1.5.5 reimplementation (src/eval/rouge.*) and its stemmer
// (src/eval/porter_stemmer.*): hand-computed scores, tokenization, the Porter vocabulary, the
// WordNet exception table, bootstrap intervals, and the Gigaword reference point measured with
// the original Perl ROUGE-1.5.5.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/read_file.h"
#include "eval/porter_stemmer.h"
#include "eval/rouge.h"
#include "eval/rouge_report.h"

namespace {

using hnas::eval::MorphStemmer;
using hnas::eval::PairScores;
using hnas::eval::porter_stem;
using hnas::read_lines;
using hnas::eval::RougeReport;
using hnas::eval::RougeScore;
using hnas::eval::RougeScorer;
using hnas::eval::WordNetExceptions;

const std::string kWordNetDir = std::string(HNAS_SOURCE_DIR) + "/data/wordnet";
const std::string kGigawordDir = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/test_1951";

using Tokens = std::vector<std::string>;

void expect_score(const RougeScore& s, double precision, double recall, double f1) {
    EXPECT_NEAR(s.precision, precision, 1e-12);
    EXPECT_NEAR(s.recall, recall, 1e-12);
    EXPECT_NEAR(s.f1, f1, 1e-12);
}

void expect_zero_and_finite(const RougeScore& s) {
    EXPECT_TRUE(std::isfinite(s.precision) && std::isfinite(s.recall) && std::isfinite(s.f1));
    expect_score(s, 0.0, 0.0, 0.0);
}

// "First 8 words" baseline: the article's first 8 space-separated tokens.
std::vector<std::string> lead_8(const std::vector<std::string>& articles) {
    std::vector<std::string> out;
    for (const std::string& article : articles) {
        std::istringstream words(article);
        std::string word, lead;
        for (int k = 0; k < 8 && words >> word; ++k) lead += (k == 0 ? "" : " ") + word;
        out.push_back(lead);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Tokenization

TEST(RougeTokenize, LowercasesAndSplitsOnPunctuation) {
    RougeScorer scorer(false);
    EXPECT_EQ(scorer.tokenize("The U.S. Dollar, fell!"), (Tokens{"the", "u", "s", "dollar", "fell"}));
    EXPECT_EQ(scorer.tokenize("japan 's nec corp."), (Tokens{"japan", "s", "nec", "corp"}));
}

TEST(RougeTokenize, HyphenSeparatesAndIsDropped) {
    RougeScorer scorer(false);
    EXPECT_EQ(scorer.tokenize("tie-up"), (Tokens{"tie", "up"}));
    EXPECT_EQ(scorer.tokenize("anti--nuclear - x"), (Tokens{"anti", "nuclear", "x"}));
}

TEST(RougeTokenize, TokensWithoutLettersOrDigitsDoNotCount) {
    RougeScorer scorer(false);
    // Gigaword writes digits as '#': numbers vanish. '$' is a separator, so "$5" counts as "5".
    EXPECT_EQ(scorer.tokenize("# #\\/# month , `` '' -lrb- $5"), (Tokens{"month", "lrb", "5"}));
    // Non-ASCII bytes (here a UTF-8 no-break space) separate like punctuation.
    EXPECT_EQ(scorer.tokenize("high\xc2\xa0yen"), (Tokens{"high", "yen"}));
    EXPECT_TRUE(scorer.tokenize(" \t.,;-- ").empty());
    EXPECT_TRUE(scorer.tokenize("").empty());
}

TEST(RougeTokenize, StemsOnlyTokensLongerThanThree) {
    RougeScorer scorer(true, kWordNetDir);
    // "was" (3 letters) is left alone although WordNet maps it to "be"; "cats" is stemmed.
    EXPECT_EQ(scorer.tokenize("Was cats running BEST ponies"), (Tokens{"was", "cat", "run", "good", "poni"}));
}

// ---------------------------------------------------------------------------------------------
// Hand-computed scores

TEST(RougeScore, Rouge1WithClippedCounts) {
    RougeScorer scorer(false);
    // hyp unigrams: the x3, cat; ref: the, cat, sat. Hits = min(3,1) + 1 = 2.
    const PairScores s = scorer.score_pair("the the the cat", "the cat sat");
    // P = 2/4, R = 2/3 -> 0.66667 (ROUGE rounds to 5 decimals), F = P*R / (0.5 P + 0.5 R).
    expect_score(s.rouge_1, 0.5, 0.66667, 0.57143);
}

TEST(RougeScore, Rouge2WithClippedCounts) {
    RougeScorer scorer(false);
    // hyp bigrams: "a b" x3, "b a" x2 (5); ref: "a b" x2, "b a" x1 (3). Hits = 2 + 1 = 3.
    const PairScores s = scorer.score_pair("a b a b a b", "a b a b");
    expect_score(s.rouge_2, 0.6, 1.0, 0.75);
    // Unigrams: hyp a x3, b x3; ref a x2, b x2 -> hits 4, P = 4/6, R = 1.
    expect_score(s.rouge_1, 0.66667, 1.0, 0.8);
}

TEST(RougeScore, Rouge2SpansSentences) {
    RougeScorer scorer(false);
    // ROUGE-N joins a summary's sentences, so "b c" is a bigram of the hypothesis too.
    const PairScores s = scorer.score_pair("a b\nc d", "b c");
    expect_score(s.rouge_2, 0.33333, 1.0, 0.5);
}

TEST(RougeScore, RougeLSingleSentence) {
    RougeScorer scorer(false);
    // LCS("a b c d e", "a x c y e z") = "a c e": P = 3/5, R = 3/6, F = 0.3 / 0.55.
    const PairScores s = scorer.score_pair("a b c d e", "a x c y e z");
    expect_score(s.rouge_l, 0.6, 0.5, 0.54545);
    // Word order matters for L but not for 1.
    const PairScores reversed = scorer.score_pair("c b a", "a b c");
    expect_score(reversed.rouge_1, 1.0, 1.0, 1.0);
    expect_score(reversed.rouge_l, 0.33333, 0.33333, 0.33333);
}

TEST(RougeScore, RougeLUnionOverSentences) {
    RougeScorer scorer(false);
    // Lin (2004), section 3.2: r = w1..w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5. The union
    // LCS of r with c1 and c2 is w1 w2 w3 w5: R = 4/5; P divides by all 10 hypothesis words.
    const PairScores s = scorer.score_pair("w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5", "w1 w2 w3 w4 w5");
    expect_score(s.rouge_l, 0.4, 0.8, 0.53333);
}

TEST(RougeScore, RougeLClipsRepeatedReferenceSentences) {
    RougeScorer scorer(false);
    // Both reference sentences match the whole hypothesis, but "a" and "b" occur once in it:
    // only 2 hits, not 4.
    const PairScores s = scorer.score_pair("a b", "a b\na b");
    expect_score(s.rouge_l, 1.0, 0.5, 0.66667);
}

TEST(RougeScore, EmptyOrUncountableInputScoresZero) {
    RougeScorer scorer(true, kWordNetDir);
    for (const auto& [hyp, ref] : std::vector<std::pair<std::string, std::string>>{
             {"", "some reference"}, {"-- , .", "some reference"}, {"some hypothesis", ""}, {"", ""}, {"\n\n", "# #"}}) {
        const PairScores s = scorer.score_pair(hyp, ref);
        expect_zero_and_finite(s.rouge_1);
        expect_zero_and_finite(s.rouge_2);
        expect_zero_and_finite(s.rouge_l);
    }
    // A one-word hypothesis has no bigram: R-2 is 0 while R-1 is not.
    const PairScores one = scorer.score_pair("reference", "some reference");
    expect_zero_and_finite(one.rouge_2);
    expect_score(one.rouge_1, 1.0, 0.5, 0.66667);

    const RougeReport none = scorer.score({}, {}, 100, 1);
    EXPECT_EQ(none.pairs, 0u);
    expect_zero_and_finite(none.rouge_1);
    const RougeReport empty = scorer.score({"", ""}, {"", "x"}, 50, 1);
    expect_zero_and_finite(empty.rouge_l);
    EXPECT_EQ(empty.rouge_l_ci.f1.low, 0.0);
    EXPECT_EQ(empty.rouge_l_ci.f1.high, 0.0);
}

TEST(RougeScore, AveragesPerPairScores) {
    RougeScorer scorer(false);
    // Pair 1: R-1 P = 1, R = 1, F = 1. Pair 2: P = 1/4, R = 1, F = 0.4.
    const RougeReport report = scorer.score({"a b", "a x y z"}, {"a b", "a"});
    EXPECT_EQ(report.pairs, 2u);
    expect_score(report.rouge_1, (1.0 + 0.25) / 2, 1.0, (1.0 + 0.4) / 2);
    // The average F is not the F of the average P and R (0.625 and 1 would give 0.76923).
    EXPECT_GT(std::abs(report.rouge_1.f1 - 0.76923), 0.05);
}

TEST(RougeScore, MismatchedLineCountsThrowWithBothCounts) {
    RougeScorer scorer(false);
    try {
        scorer.score({"a", "b", "c"}, {"a", "b"});
        FAIL() << "expected hnas::Error";
    } catch (const hnas::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("3 hypotheses"), std::string::npos) << message;
        EXPECT_NE(message.find("2 references"), std::string::npos) << message;
    }
}

TEST(RougeScore, StemmingNeedsReadableWordNetFiles) {
    EXPECT_THROW(RougeScorer(true), std::invalid_argument);
    EXPECT_THROW(RougeScorer(false, "", 1.5), std::invalid_argument);
    const std::string missing = "/nonexistent/wordnet-dir";
    try {
        RougeScorer scorer(true, missing);
        FAIL() << "expected hnas::Error";
    } catch (const hnas::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(missing + "/"), std::string::npos) << message;
        EXPECT_NE(message.find(".exc"), std::string::npos) << message;
    }
}

TEST(RougeScore, StemmingMatchesInflectedForms) {
    RougeScorer plain(false);
    RougeScorer stemmed(true, kWordNetDir);
    // ponies/pony -> poni (Porter), running (WordNet) / runs (Porter) -> run.
    const std::string hyp = "ponies running";
    const std::string ref = "pony runs";
    EXPECT_EQ(plain.score_pair(hyp, ref).rouge_1.f1, 0.0);
    expect_score(stemmed.score_pair(hyp, ref).rouge_1, 1.0, 1.0, 1.0);
    // A WordNet base form is not Porter-stemmed, but the same word written out is: "mice" ->
    // "mouse" while "mouse" -> "mous", so ROUGE does not match them.
    EXPECT_EQ(stemmed.tokenize("mice mouse"), (Tokens{"mouse", "mous"}));
    EXPECT_EQ(stemmed.score_pair("mice", "mouse").rouge_1.f1, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Porter stemmer and WordNet exceptions

TEST(PorterStemmer, PorterVocabularyExamples) {
    // Words from Porter (1980) with their final stems in Porter's published output.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"caresses", "caress"},     {"ponies", "poni"},       {"ties", "ti"},           {"caress", "caress"},
        {"cats", "cat"},            {"feed", "feed"},         {"agreed", "agre"},       {"plastered", "plaster"},
        {"bled", "bled"},           {"motoring", "motor"},    {"sing", "sing"},         {"conflated", "conflat"},
        {"troubled", "troubl"},     {"sized", "size"},        {"hopping", "hop"},       {"tanned", "tan"},
        {"falling", "fall"},        {"hissing", "hiss"},      {"fizzed", "fizz"},       {"failing", "fail"},
        {"filing", "file"},         {"happy", "happi"},       {"sky", "sky"},           {"relational", "relat"},
        {"conditional", "condit"},  {"rational", "ration"},   {"valenci", "valenc"},    {"hesitanci", "hesit"},
        {"digitizer", "digit"},     {"conformabli", "conform"}, {"radicalli", "radic"}, {"differentli", "differ"},
        {"vileli", "vile"},         {"analogousli", "analog"}, {"vietnamization", "vietnam"},
        {"predication", "predic"},  {"operator", "oper"},     {"feudalism", "feudal"},  {"decisiveness", "decis"},
        {"hopefulness", "hope"},    {"callousness", "callous"}, {"formaliti", "formal"}, {"sensitiviti", "sensit"},
        {"sensibiliti", "sensibl"}, {"triplicate", "triplic"}, {"formative", "form"},   {"formalize", "formal"},
        {"electriciti", "electr"},  {"electrical", "electr"}, {"hopeful", "hope"},      {"goodness", "good"},
        {"revival", "reviv"},       {"allowance", "allow"},   {"inference", "infer"},   {"airliner", "airlin"},
        {"gyroscopic", "gyroscop"}, {"adjustable", "adjust"}, {"defensible", "defens"}, {"irritant", "irrit"},
        {"replacement", "replac"},  {"adjustment", "adjust"}, {"dependent", "depend"},  {"adoption", "adopt"},
        {"homologou", "homolog"},   {"communism", "commun"},  {"activate", "activ"},    {"angulariti", "angular"},
        {"homologous", "homolog"},  {"effective", "effect"},  {"bowdlerize", "bowdler"}, {"probate", "probat"},
        {"rate", "rate"},           {"cease", "ceas"},        {"controll", "control"},  {"roll", "roll"},
        {"generalizations", "gener"}, {"oscillators", "oscil"},
    };
    for (const auto& [word, stem] : cases) EXPECT_EQ(porter_stem(word), stem) << word;
}

TEST(PorterStemmer, RougeVariantAndEdgeCases) {
    // ROUGE's step 4 tries -ment and -ent after the suffix list, so these lose "-ent" where
    // Porter's own implementation keeps "agreement" and "statement".
    EXPECT_EQ(porter_stem("agreement"), "agreem");
    EXPECT_EQ(porter_stem("statement"), "statem");
    EXPECT_EQ(porter_stem("government"), "govern");
    // A leading y is a consonant.
    EXPECT_EQ(porter_stem("yelling"), "yell");
    EXPECT_EQ(porter_stem("youth"), "youth");
    // Short words and digits.
    EXPECT_EQ(porter_stem("as"), "as");
    EXPECT_EQ(porter_stem("1990s"), "1990");
}

TEST(WordNetExceptions, LookupFollowsRougeTable) {
    const WordNetExceptions table(kWordNetDir);
    EXPECT_EQ(table.size(), 5930u);  // 5939 lines, 5930 distinct inflected forms
    auto base = [&](const std::string& word) {
        const std::string* found = table.find(word);
        return found == nullptr ? std::string("<none>") : *found;
    };
    EXPECT_EQ(base("axes"), "ax");           // first base form of "axes ax axis"
    EXPECT_EQ(base("best"), "good");         // adj.exc is read after adv.exc ("best well")
    EXPECT_EQ(base("is"), "be");             // verb.exc after adj.exc ("is is")
    EXPECT_EQ(base("offer"), "offer");       // verb.exc after adj.exc ("offer off")
    EXPECT_EQ(base("involucra"), "involucrum");
    EXPECT_EQ(base("testes"), "testes");
    EXPECT_EQ(base("mice"), "mouse");
    EXPECT_EQ(base("said"), "say");
    EXPECT_EQ(base("ponies"), "<none>");

    const MorphStemmer stemmer(kWordNetDir);
    EXPECT_EQ(stemmer.stem("Geese"), "goose");       // listed: the base form, lowercased lookup
    EXPECT_EQ(stemmer.stem("leaves"), "leaf");       // listed: not Porter-stemmed further
    EXPECT_EQ(stemmer.stem("ponies"), "poni");       // not listed: Porter
}

// ---------------------------------------------------------------------------------------------
// Bootstrap intervals

class RougeBootstrap : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        refs_ = read_lines(kGigawordDir + "/task1_ref0.txt", "references");
        hyps_ = lead_8(read_lines(kGigawordDir + "/input.txt", "articles"));
    }
    static std::vector<std::string> hyps_;
    static std::vector<std::string> refs_;
};
std::vector<std::string> RougeBootstrap::hyps_;
std::vector<std::string> RougeBootstrap::refs_;

TEST_F(RougeBootstrap, IntervalContainsMeanAndIsReproducible) {
    RougeScorer scorer(false);
    const RougeReport a = scorer.score(hyps_, refs_, 300, 7);
    const RougeReport b = scorer.score(hyps_, refs_, 300, 7);
    const RougeReport c = scorer.score(hyps_, refs_, 300, 8);
    for (const auto& [mean, ci] : {std::pair{a.rouge_1, a.rouge_1_ci}, std::pair{a.rouge_2, a.rouge_2_ci},
                                   std::pair{a.rouge_l, a.rouge_l_ci}}) {
        for (const auto& [value, interval] : {std::pair{mean.precision, ci.precision},
                                              std::pair{mean.recall, ci.recall}, std::pair{mean.f1, ci.f1}}) {
            EXPECT_LT(interval.low, value);
            EXPECT_GT(interval.high, value);
            EXPECT_LT(interval.high - interval.low, 0.05);
        }
    }
    EXPECT_EQ(a.rouge_1_ci.f1.low, b.rouge_1_ci.f1.low);
    EXPECT_EQ(a.rouge_l_ci.recall.high, b.rouge_l_ci.recall.high);
    EXPECT_NE(a.rouge_1_ci.f1.low, c.rouge_1_ci.f1.low);
    // Resampling does not change the averages themselves.
    EXPECT_EQ(a.rouge_1.f1, scorer.score(hyps_, refs_).rouge_1.f1);
}

TEST_F(RougeBootstrap, IntervalShrinksWithMorePairs) {
    RougeScorer scorer(false);
    const std::vector<std::string> few_hyps(hyps_.begin(), hyps_.begin() + 100);
    const std::vector<std::string> few_refs(refs_.begin(), refs_.begin() + 100);
    const RougeReport few = scorer.score(few_hyps, few_refs, 500, 3);
    const RougeReport all = scorer.score(hyps_, refs_, 500, 3);
    const double few_width = few.rouge_1_ci.f1.high - few.rouge_1_ci.f1.low;
    const double all_width = all.rouge_1_ci.f1.high - all.rouge_1_ci.f1.low;
    // The width goes as 1/sqrt(pairs): about sqrt(1951 / 100) = 4.4 times narrower.
    EXPECT_LT(all_width * 2.5, few_width);
}

TEST(RougeBootstrapRule, PercentilesFollowRouge) {
    RougeScorer scorer(false);
    // Identical pairs: every resample has the same mean, so the interval collapses onto it.
    const std::vector<std::string> hyps(20, "a b c");
    const std::vector<std::string> refs(20, "a b d e");
    const RougeReport r = scorer.score(hyps, refs, 1000, 5);
    EXPECT_DOUBLE_EQ(r.rouge_1_ci.f1.low, r.rouge_1.f1);
    EXPECT_DOUBLE_EQ(r.rouge_1_ci.f1.high, r.rouge_1.f1);
    // Two pairs with F 1 and 0: a resample mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4.
    // With 1000 samples ROUGE's rule takes sorted[25] and sorted[974]: 0 and 1.
    const RougeReport half = scorer.score({"a", "b"}, {"a", "c"}, 1000, 5);
    EXPECT_DOUBLE_EQ(half.rouge_1.f1, 0.5);
    EXPECT_EQ(half.rouge_1_ci.f1.low, 0.0);
    EXPECT_EQ(half.rouge_1_ci.f1.high, 1.0);
}

// ---------------------------------------------------------------------------------------------
// The reference point: "first 8 words" on the Gigaword test set, against ROUGE-1.5.5's output
// (`-n 2 -a -c 95 -r 1000 -f A -p 0.5 -t 0`, with and without -m, one sentence per file).

class RougeReferencePoint : public RougeBootstrap {};

TEST_F(RougeReferencePoint, MatchesRouge155WithStemming) {
    ASSERT_EQ(hyps_.size(), 1951u);
    ASSERT_EQ(refs_.size(), 1951u);
    RougeScorer scorer(true, kWordNetDir);
    const RougeReport r = scorer.score_rouge155(hyps_, refs_);
    EXPECT_NEAR(r.rouge_1.f1, 0.21386, 5e-6);
    EXPECT_NEAR(r.rouge_2.f1, 0.07415, 5e-6);
    EXPECT_NEAR(r.rouge_l.f1, 0.20032, 5e-6);
    // Precision and recall from the same run (values of this implementation; the F values above
    // are the independent check).
    expect_score(r.rouge_1, 0.22933, 0.21391, 0.21386);
    expect_score(r.rouge_2, 0.07930, 0.07468, 0.07415);
    expect_score(r.rouge_l, 0.21480, 0.20043, 0.20032);
    // The plain mean over pairs differs from ROUGE's resampled average in the fifth decimal.
    const RougeReport plain = scorer.score(hyps_, refs_);
    EXPECT_NEAR(plain.rouge_1.f1, r.rouge_1.f1, 3e-4);
    EXPECT_GT(std::abs(plain.rouge_1.f1 - r.rouge_1.f1), 5e-6);
    // ROUGE's 95 % interval brackets its average.
    EXPECT_LT(r.rouge_1_ci.f1.low, r.rouge_1.f1);
    EXPECT_GT(r.rouge_1_ci.f1.high, r.rouge_1.f1);
}

TEST_F(RougeReferencePoint, MatchesRouge155WithoutStemming) {
    RougeScorer scorer(false);
    const RougeReport r = scorer.score_rouge155(hyps_, refs_);
    EXPECT_NEAR(r.rouge_1.f1, 0.19220, 5e-6);
    EXPECT_NEAR(r.rouge_2.f1, 0.06038, 5e-6);
    EXPECT_NEAR(r.rouge_l.f1, 0.18078, 5e-6);
    expect_score(r.rouge_1, 0.20655, 0.19201, 0.19220);
    expect_score(r.rouge_2, 0.06507, 0.06010, 0.06038);
    expect_score(r.rouge_l, 0.19432, 0.18060, 0.18078);
}

// hnas eval hands a task its ROUGE options as JSON: every field survives the round trip.
TEST(RougeOptions, JsonRoundTripKeepsEveryField) {
    hnas::eval::RougeOptions given;
    given.stem = true;
    given.wordnet = "/some/wordnet";
    given.bootstrap = 250;
    given.seed = 99;
    const hnas::eval::RougeOptions back = hnas::eval::rouge_options(hnas::eval::options_json(given));
    EXPECT_EQ(back.stem, given.stem);
    EXPECT_EQ(back.wordnet, given.wordnet);
    EXPECT_EQ(back.bootstrap, given.bootstrap);
    EXPECT_EQ(back.seed, given.seed);
}

}  // namespace
