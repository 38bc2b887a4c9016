// ROUGE-1, ROUGE-2 and ROUGE-L computed the way the original ROUGE-1.5.5 Perl script does with
// `-n 2 -a -f A -p 0.5` (plus `-m` when stemming), for line-aligned hypothesis/reference lists
// with one reference per hypothesis, and bootstrap confidence intervals for the averages.
//
// Each hypothesis/reference string is one summary; a '\n' inside it separates sentences (ROUGE's
// one-sentence-per-line format). A plain one-line string is a one-sentence summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/porter_stemmer.h"

namespace hnas::eval {

struct RougeScore {
    double precision = 0.0;
    double recall = 0.0;
    double f1 = 0.0;
};

struct RougeInterval {
    double low = 0.0;
    double high = 0.0;
};

struct RougeIntervals {
    RougeInterval precision;
    RougeInterval recall;
    RougeInterval f1;
};

// The three scores of one hypothesis/reference pair.
struct PairScores {
    RougeScore rouge_1;
    RougeScore rouge_2;
    RougeScore rouge_l;
};

struct RougeReport {
    // Averages over pairs of the per-pair precision, recall and F (ROUGE's `-f A`, sentence-level
    // averaging): the average F is not the F of the average precision and recall. From
    // score_rouge155 these are ROUGE's printed averages instead (see there).
    RougeScore rouge_1;
    RougeScore rouge_2;
    RougeScore rouge_l;
    // 95 % bootstrap intervals of the averages; all zero when bootstrap_samples == 0.
    RougeIntervals rouge_1_ci;
    RougeIntervals rouge_2_ci;
    RougeIntervals rouge_l_ci;
    size_t pairs = 0;
    int bootstrap_samples = 0;
};

// Immutable once built, so one scorer may be shared between threads.
class RougeScorer {
public:
    // stem: ROUGE's `-m` (WordNet exception lists, then Porter); it needs `wordnet_dir`, the folder
    // holding adj.exc adv.exc noun.exc verb.exc (this repo's data/wordnet). alpha weighs precision
    // against recall in F = P*R / ((1 - alpha)*P + alpha*R); 0.5 is the harmonic mean.
    // Throws std::invalid_argument for stem without a directory or alpha outside [0, 1], and
    // std::runtime_error naming a WordNet file that cannot be read.
    explicit RougeScorer(bool stem, const std::string& wordnet_dir = "", double alpha = 0.5);

    // The tokens ROUGE counts in `text`: lowercased runs of [a-z0-9]. Every other character
    // separates tokens ('-' too: ROUGE makes it a token of its own, then drops it because only
    // tokens starting with [a-z0-9] count). With stemming, tokens longer than 3 characters go
    // through MorphStemmer::stem.
    std::vector<std::string> tokenize(std::string_view text) const;

    // Scores of one pair. Like ROUGE, each precision and recall is rounded to 5 decimals, F is
    // computed from the rounded values and rounded too; a side without n-grams scores 0.
    PairScores score_pair(std::string_view hypothesis, std::string_view reference) const;

    // Averages over line-aligned lists; with bootstrap_samples > 0 also 95 % intervals from that
    // many resamples of the pairs, drawn from std::mt19937_64 seeded with `seed`. Throws
    // std::runtime_error when the lists differ in length.
    RougeReport score(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                      int bootstrap_samples = 0, uint64_t seed = 0) const;

    // Exactly the numbers ROUGE-1.5.5 prints (`-c 95 -r samples`), rounded to 5 decimals like
    // its output, when its evaluation IDs are "1".."N" for the pairs in list order (a `-z` file
    // list, or a config numbering the pairs from 1). ROUGE's "Average" is the mean of its
    // bootstrap means, not the plain mean: it re-seeds Perl's drand48 with the sample number
    // 0, 1, ... and takes the int(rand(N))-th pair in its string-sorted ID order ("1", "10",
    // "100", ...). That average differs from the plain mean by about 1e-4 on ~2000 pairs, which
    // shows in the fifth decimal; use this to compare with published ROUGE-1.5.5 figures.
    RougeReport score_rouge155(const std::vector<std::string>& hypotheses,
                               const std::vector<std::string>& references, int samples = 1000) const;

private:
    std::vector<std::vector<std::string>> tokenize_sentences(std::string_view summary) const;
    std::vector<PairScores> score_pairs(const std::vector<std::string>& hypotheses,
                                        const std::vector<std::string>& references) const;

    std::optional<MorphStemmer> stemmer_;
    double alpha_;
};

}  // namespace hnas::eval
