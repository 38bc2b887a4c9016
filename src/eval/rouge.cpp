// ROUGE-1.5.5 reimplemented: tokenization, ROUGE-N, ROUGE-L (union LCS), per-pair rounding,
// `-f A` averaging and bootstrap intervals. Notes on where this follows the Perl script closely:
// - Per pair, recall and precision are printed with "%7.5f" and F is computed from those printed
//   values; averages are taken over the rounded per-pair values.
// - ROUGE-N joins a summary's sentences before counting, so n-grams may span sentences.
// - ROUGE-L takes, for every reference sentence, the union of the positions on one LCS with each
//   hypothesis sentence (the LCS ROUGE's backtracking picks), and counts a position only while
//   the word still has unused occurrences in both summaries. With one sentence each, that is
//   just the LCS length. Recall divides by the reference length, precision by the hypothesis one.
// - ROUGE's printed "Average" is the mean of its 1000 bootstrap means, which depends on Perl's
//   random generator and on the sorted order of its evaluation IDs. score() reports the plain
//   mean; score_rouge155() replays ROUGE's resampling to print what ROUGE prints (the two differ
//   by about 1e-4 on the Gigaword test set).
#include "eval/rouge.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "base/check.h"

namespace hnas::eval {
namespace {

using Sentences = std::vector<std::vector<std::string>>;

// Perl's sprintf("%7.5f", x) read back as a number: ROUGE rounds every per-pair score this way.
double round5(double x) {
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::fixed, 5);
    double rounded = 0.0;
    std::from_chars(buf.data(), end, rounded);
    (void)ec;
    return rounded;
}

RougeScore make_score(size_t hits, size_t hypothesis_count, size_t reference_count, double alpha) {
    RougeScore s;
    s.recall = reference_count == 0 ? 0.0 : round5(static_cast<double>(hits) / static_cast<double>(reference_count));
    s.precision =
        hypothesis_count == 0 ? 0.0 : round5(static_cast<double>(hits) / static_cast<double>(hypothesis_count));
    const double denominator = (1.0 - alpha) * s.precision + alpha * s.recall;
    s.f1 = denominator > 0.0 ? round5(s.precision * s.recall / denominator) : 0.0;
    return s;
}

std::unordered_map<std::string, size_t> count_ngrams(const std::vector<std::string>& tokens, size_t n, size_t& total) {
    std::unordered_map<std::string, size_t> counts;
    total = 0;
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
        std::string gram = tokens[i];
        for (size_t j = i + 1; j < i + n; ++j) {
            gram += ' ';
            gram += tokens[j];
        }
        ++counts[gram];
        ++total;
    }
    return counts;
}

RougeScore rouge_n(const std::vector<std::string>& hypothesis, const std::vector<std::string>& reference, size_t n,
                   double alpha) {
    size_t hypothesis_total = 0;
    size_t reference_total = 0;
    const auto hypothesis_counts = count_ngrams(hypothesis, n, hypothesis_total);
    const auto reference_counts = count_ngrams(reference, n, reference_total);
    size_t hits = 0;
    for (const auto& [gram, count] : reference_counts) {
        auto it = hypothesis_counts.find(gram);
        if (it != hypothesis_counts.end()) hits += std::min(count, it->second);
    }
    return make_score(hits, hypothesis_total, reference_total, alpha);
}

// Marks in `hit_mask` the reference positions of one LCS of (reference, hypothesis), choosing the
// same LCS as ROUGE's table walk: on a tie it moves along the reference ("up") first.
void mark_lcs(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis,
              std::vector<char>& hit_mask) {
    const size_t m = reference.size();
    const size_t n = hypothesis.size();
    if (m == 0 || n == 0) return;
    std::vector<size_t> table((m + 1) * (n + 1), 0);
    auto at = [&](size_t i, size_t j) -> size_t& { return table[i * (n + 1) + j]; };
    for (size_t i = 1; i <= m; ++i)
        for (size_t j = 1; j <= n; ++j)
            at(i, j) = reference[i - 1] == hypothesis[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
    size_t i = m;
    size_t j = n;
    while (i > 0 && j > 0) {
        if (reference[i - 1] == hypothesis[j - 1]) {
            --i;
            --j;
            hit_mask[i] = 1;
        } else if (at(i - 1, j) >= at(i, j - 1)) {
            --i;
        } else {
            --j;
        }
    }
}

RougeScore rouge_l(const Sentences& hypothesis, const Sentences& reference, double alpha) {
    std::unordered_map<std::string, size_t> hypothesis_left;
    std::unordered_map<std::string, size_t> reference_left;
    size_t hypothesis_total = 0;
    for (const auto& sentence : hypothesis)
        for (const auto& token : sentence) ++hypothesis_left[token], ++hypothesis_total;
    for (const auto& sentence : reference)
        for (const auto& token : sentence) ++reference_left[token];

    size_t hits = 0;
    size_t reference_total = 0;
    for (const auto& ref_sentence : reference) {
        reference_total += ref_sentence.size();
        std::vector<char> hit_mask(ref_sentence.size(), 0);
        for (const auto& hyp_sentence : hypothesis) mark_lcs(ref_sentence, hyp_sentence, hit_mask);
        for (size_t k = 0; k < ref_sentence.size(); ++k) {
            if (!hit_mask[k]) continue;
            // Clipping keeps a word from being credited more often than it occurs on either side.
            size_t& ref_left = reference_left[ref_sentence[k]];
            size_t& hyp_left = hypothesis_left[ref_sentence[k]];
            if (ref_left > 0 && hyp_left > 0) {
                ++hits;
                --ref_left;
                --hyp_left;
            }
        }
    }
    return make_score(hits, hypothesis_total, reference_total, alpha);
}

std::vector<std::string> flatten(const Sentences& sentences) {
    std::vector<std::string> tokens;
    for (const auto& sentence : sentences) tokens.insert(tokens.end(), sentence.begin(), sentence.end());
    return tokens;
}

// ROUGE's interval rule for `samples` sorted values at 95 %: delta = samples * 2.5 / 100, the
// lower end interpolates between sorted[floor(delta)] and the next value, the upper end between
// sorted[floor(samples - delta - 1)] and the next, both with the fraction of the upper index.
// For 1000 samples that is sorted[25] and sorted[974].
RougeInterval percentile_interval(std::vector<double>& values) {
    std::sort(values.begin(), values.end());
    const size_t count = values.size();
    const double delta = static_cast<double>(count) * ((100.0 - 95.0) / 2.0) / 100.0;
    const auto lower_a = static_cast<size_t>(delta);
    const auto upper_a = static_cast<size_t>(static_cast<double>(count) - delta - 1.0);
    const double fraction = static_cast<double>(count) - delta - 1.0 - static_cast<double>(upper_a);
    auto interpolate = [&](size_t a) {
        const size_t b = std::min(a + 1, count - 1);
        return values[a] + (values[b] - values[a]) * fraction;
    };
    return {interpolate(std::min(lower_a, count - 1)), interpolate(std::min(upper_a, count - 1))};
}

// The nine values averaged per pair, in a fixed order: (R-1, R-2, R-L) x (P, R, F).
constexpr size_t kValues = 9;
using Values = std::array<double, kValues>;

std::vector<Values> to_values(const std::vector<PairScores>& per_pair) {
    std::vector<Values> values;
    values.reserve(per_pair.size());
    for (const PairScores& p : per_pair)
        values.push_back({p.rouge_1.precision, p.rouge_1.recall, p.rouge_1.f1, p.rouge_2.precision, p.rouge_2.recall,
                          p.rouge_2.f1, p.rouge_l.precision, p.rouge_l.recall, p.rouge_l.f1});
    return values;
}

void set_scores(RougeReport& report, const Values& v) {
    report.rouge_1 = {v[0], v[1], v[2]};
    report.rouge_2 = {v[3], v[4], v[5]};
    report.rouge_l = {v[6], v[7], v[8]};
}

// `samples` bootstrap means of each value; draw(b) gives the next pair index of sample b. As in
// ROUGE, one resample of pair indices serves all nine values.
template <class Draw>
std::array<std::vector<double>, kValues> resample_means(const std::vector<Values>& values, int samples, Draw&& draw) {
    std::array<std::vector<double>, kValues> means;
    for (auto& m : means) m.reserve(static_cast<size_t>(samples));
    const auto n = static_cast<double>(values.size());
    for (int b = 0; b < samples; ++b) {
        Values sum{};
        for (size_t i = 0; i < values.size(); ++i) {
            const Values& v = values[draw(b)];
            for (size_t k = 0; k < kValues; ++k) sum[k] += v[k];
        }
        for (size_t k = 0; k < kValues; ++k) means[k].push_back(sum[k] / n);
    }
    return means;
}

void set_intervals(RougeReport& report, std::array<std::vector<double>, kValues>& means) {
    std::array<RougeInterval, kValues> ci;
    for (size_t k = 0; k < kValues; ++k) ci[k] = percentile_interval(means[k]);
    report.rouge_1_ci = {ci[0], ci[1], ci[2]};
    report.rouge_2_ci = {ci[3], ci[4], ci[5]};
    report.rouge_l_ci = {ci[6], ci[7], ci[8]};
}

// Perl's rand() since 5.20 on every platform: drand48, with srand(s) setting the state to
// (s << 16) + 0x330E.
class PerlDrand48 {
public:
    explicit PerlDrand48(uint32_t seed) : state_((static_cast<uint64_t>(seed) << 16) + 0x330E) {}
    double next() {  // [0, 1)
        state_ = (state_ * 0x5DEECE66Dull + 0xB) & ((uint64_t{1} << 48) - 1);
        return static_cast<double>(state_) * 0x1.0p-48;
    }

private:
    uint64_t state_;
};

}  // namespace

RougeScorer::RougeScorer(bool stem, const std::string& wordnet_dir, double alpha) : alpha_(alpha) {
    if (!(alpha >= 0.0 && alpha <= 1.0)) throw std::invalid_argument("ROUGE alpha must be in [0, 1]");
    if (stem) {
        if (wordnet_dir.empty())
            throw std::invalid_argument("ROUGE stemming needs the WordNet exception directory (data/wordnet)");
        stemmer_.emplace(wordnet_dir);
    }
}

std::vector<std::string> RougeScorer::tokenize(std::string_view text) const {
    // ROUGE lowercases, makes '-' a token of its own, blanks every other character outside
    // [A-Za-z0-9-], and then counts only tokens matching /^[a-z0-9\$]/. The hyphen tokens fail
    // that test ('$' can no longer occur), so in effect every non-alphanumeric byte separates.
    std::vector<std::string> tokens;
    std::string current;
    auto finish = [&] {
        if (current.empty()) return;
        if (stemmer_ && current.size() > 3) current = stemmer_->stem(current);
        tokens.push_back(std::move(current));
        current.clear();
    };
    for (char c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            current += c;
        } else {
            finish();
        }
    }
    finish();
    return tokens;
}

std::vector<std::vector<std::string>> RougeScorer::tokenize_sentences(std::string_view summary) const {
    Sentences sentences;
    size_t start = 0;
    while (start <= summary.size()) {
        size_t end = summary.find('\n', start);
        if (end == std::string_view::npos) end = summary.size();
        // ROUGE skips empty lines; a line of blanks is a sentence without tokens, which scores
        // the same.
        if (end > start) sentences.push_back(tokenize(summary.substr(start, end - start)));
        start = end + 1;
    }
    return sentences;
}

PairScores RougeScorer::score_pair(std::string_view hypothesis, std::string_view reference) const {
    const Sentences hyp_sentences = tokenize_sentences(hypothesis);
    const Sentences ref_sentences = tokenize_sentences(reference);
    const std::vector<std::string> hyp_tokens = flatten(hyp_sentences);
    const std::vector<std::string> ref_tokens = flatten(ref_sentences);
    PairScores scores;
    scores.rouge_1 = rouge_n(hyp_tokens, ref_tokens, 1, alpha_);
    scores.rouge_2 = rouge_n(hyp_tokens, ref_tokens, 2, alpha_);
    scores.rouge_l = rouge_l(hyp_sentences, ref_sentences, alpha_);
    return scores;
}

std::vector<PairScores> RougeScorer::score_pairs(const std::vector<std::string>& hypotheses,
                                              const std::vector<std::string>& references) const {
    HNAS_CHECK(hypotheses.size() == references.size(), "ROUGE needs line-aligned lists: ", hypotheses.size(),
               " hypotheses vs ", references.size(), " references");
    std::vector<PairScores> per_pair(hypotheses.size());
    for (size_t i = 0; i < hypotheses.size(); ++i) per_pair[i] = score_pair(hypotheses[i], references[i]);
    return per_pair;
}

RougeReport RougeScorer::score(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                               int bootstrap_samples, uint64_t seed) const {
    if (bootstrap_samples < 0) throw std::invalid_argument("bootstrap_samples must be >= 0");
    const std::vector<Values> values = to_values(score_pairs(hypotheses, references));
    const size_t n = values.size();
    RougeReport report;
    report.pairs = n;
    report.bootstrap_samples = bootstrap_samples;
    if (n == 0) return report;

    Values mean{};
    for (const Values& v : values)
        for (size_t k = 0; k < kValues; ++k) mean[k] += v[k];
    for (double& m : mean) m /= static_cast<double>(n);
    set_scores(report, mean);
    if (bootstrap_samples == 0) return report;

    std::mt19937_64 rng(seed);
    auto draw = [&](int /*sample*/) {
        // 53 random bits scaled to [0, n): the same indices on every platform, unlike
        // std::uniform_int_distribution.
        const auto pick = static_cast<size_t>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * static_cast<double>(n));
        return std::min(pick, n - 1);
    };
    auto samples = resample_means(values, bootstrap_samples, draw);
    set_intervals(report, samples);
    return report;
}

RougeReport RougeScorer::score_rouge155(const std::vector<std::string>& hypotheses,
                                        const std::vector<std::string>& references, int samples) const {
    if (samples <= 0) throw std::invalid_argument("score_rouge155 needs samples > 0");
    const std::vector<Values> values = to_values(score_pairs(hypotheses, references));
    const size_t n = values.size();
    RougeReport report;
    report.pairs = n;
    report.bootstrap_samples = samples;
    if (n == 0) return report;

    // ROUGE sorts its "ID.peer" keys as strings; with IDs 1..N that is the order of the decimal
    // strings, a shorter prefix first ('.' sorts before the digits).
    std::vector<size_t> sorted_ids(n);
    std::iota(sorted_ids.begin(), sorted_ids.end(), size_t{0});
    std::vector<std::string> id_text(n);
    for (size_t i = 0; i < n; ++i) id_text[i] = std::to_string(i + 1);
    std::sort(sorted_ids.begin(), sorted_ids.end(), [&](size_t a, size_t b) { return id_text[a] < id_text[b]; });

    PerlDrand48 rng(0);
    int current_sample = -1;
    auto draw = [&](int sample) {
        if (sample != current_sample) {  // srand(sample) before each resample
            rng = PerlDrand48(static_cast<uint32_t>(sample));
            current_sample = sample;
        }
        const auto pick = static_cast<size_t>(rng.next() * static_cast<double>(n));  // int(rand(N))
        return sorted_ids[std::min(pick, n - 1)];
    };
    auto means = resample_means(values, samples, draw);

    Values average{};
    for (size_t k = 0; k < kValues; ++k) {
        std::sort(means[k].begin(), means[k].end());  // ROUGE sums its sorted samples
        double sum = 0.0;
        for (double m : means[k]) sum += m;
        average[k] = round5(sum / static_cast<double>(samples));
    }
    set_scores(report, average);
    set_intervals(report, means);
    for (RougeIntervals* ci : {&report.rouge_1_ci, &report.rouge_2_ci, &report.rouge_l_ci})
        for (RougeInterval* interval : {&ci->precision, &ci->recall, &ci->f1}) {
            interval->low = round5(interval->low);
            interval->high = round5(interval->high);
        }
    return report;
}

}  // namespace hnas::eval
