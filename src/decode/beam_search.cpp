#include "decode/beam_search.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/kernels.h"

namespace hnas::decode {

namespace {

constexpr double kImpossible = -std::numeric_limits<double>::infinity();

struct Candidate {
    double log_probability;  // of the extended hypothesis
    int64_t beam;            // row within the source's beams
    int32_t token;
};

// Log-softmax of one row of logits, in double so the order of the logits is kept exactly.
void log_softmax_row(const float* logits, int64_t vocabulary, std::vector<double>& out) {
    const double top = kernels::max_value(logits, vocabulary);
    double total = 0.0;
#pragma omp simd reduction(+ : total)
    for (int64_t v = 0; v < vocabulary; ++v) total += kernels::exp_double(static_cast<double>(logits[v]) - top);
    const double normalizer = top + std::log(total);
    for (int64_t v = 0; v < vocabulary; ++v) out[static_cast<size_t>(v)] = logits[v] - normalizer;
}

// Bans every token that would complete an n-gram already present in `tokens`.
void ban_repeated_ngrams(const std::vector<int32_t>& tokens, int64_t n, std::vector<double>& log_probabilities) {
    const auto length = static_cast<int64_t>(tokens.size());
    if (n <= 0 || length < n - 1) return;
    const auto suffix = tokens.end() - (n - 1);
    for (int64_t start = 0; start + n <= length; ++start) {
        const auto ngram = tokens.begin() + start;
        if (std::equal(ngram, ngram + (n - 1), suffix)) {
            log_probabilities[static_cast<size_t>(ngram[n - 1])] = kImpossible;
        }
    }
}

// A row's best extensions, best first: (token, log-probability) after the bans of `step` (eos before
// the minimum length; only eos at the last step; repeated n-grams), impossible ones left out.
struct Extension {
    int32_t token;
    double log_probability;
};

struct RowScratch {
    std::vector<double> log_probabilities;
    std::vector<int32_t> order;
};

void best_extensions(const float* logits, const std::vector<int32_t>& tokens, const BeamOptions& options,
                     int64_t step, int64_t limit, int32_t eos_id, size_t keep, RowScratch& scratch,
                     std::vector<Extension>& best) {
    std::vector<double>& log_probabilities = scratch.log_probabilities;
    log_softmax_row(logits, static_cast<int64_t>(log_probabilities.size()), log_probabilities);
    if (step < options.min_length) log_probabilities[static_cast<size_t>(eos_id)] = kImpossible;
    if (step == limit) {  // out of room: only eos remains
        const double eos = log_probabilities[static_cast<size_t>(eos_id)];
        std::fill(log_probabilities.begin(), log_probabilities.end(), kImpossible);
        log_probabilities[static_cast<size_t>(eos_id)] = eos;
    }
    ban_repeated_ngrams(tokens, options.no_repeat_ngram, log_probabilities);
    std::iota(scratch.order.begin(), scratch.order.end(), 0);
    std::partial_sort(scratch.order.begin(), scratch.order.begin() + static_cast<std::ptrdiff_t>(keep),
                      scratch.order.end(), [&](int32_t x, int32_t y) {
                          return log_probabilities[static_cast<size_t>(x)] > log_probabilities[static_cast<size_t>(y)];
                      });
    best.clear();
    for (size_t i = 0; i < keep; ++i) {
        const double lp = log_probabilities[static_cast<size_t>(scratch.order[i])];
        if (lp != kImpossible) best.push_back({scratch.order[i], lp});
    }
}

// What stays fixed during one search.
struct Search {
    const BeamOptions& options;
    int64_t beam, vocabulary;
    int64_t limit;  // the most tokens before eos
    int32_t eos_id;
    size_t keep;  // extensions kept per row

    double length_normalized(double log_probability, size_t tokens) const {
        return log_probability / std::pow(static_cast<double>(tokens + 1), options.length_penalty);
    }
};

// The hypotheses still growing: `beam` rows for each source that is not finished.
struct Beams {
    std::vector<int64_t> sources;  // the source of each block of `beam` rows
    std::vector<double> log_probabilities;
    std::vector<std::vector<int32_t>> tokens;
};

// Every source starts with `beam` rows of which only the first is alive, so the first step expands
// one hypothesis instead of `beam` copies of it.
Beams start_beams(int64_t sources, int64_t beam) {
    Beams beams;
    beams.sources.resize(static_cast<size_t>(sources));
    std::iota(beams.sources.begin(), beams.sources.end(), 0);
    beams.log_probabilities.assign(static_cast<size_t>(sources * beam), kImpossible);
    for (int64_t s = 0; s < sources; ++s) beams.log_probabilities[static_cast<size_t>(s * beam)] = 0.0;
    beams.tokens.resize(static_cast<size_t>(sources * beam));
    return beams;
}

// Each live row's best extensions, row r's from row r / rows_a_logits_row of `logits`. The rows are
// independent of each other: the threads share them out.
void extend_rows(const Search& search, const Tensor& logits, int64_t rows_a_logits_row, const Beams& beams, int64_t step,
                 std::vector<RowScratch>& scratches, std::vector<std::vector<Extension>>& extensions) {
    const auto live_rows = static_cast<int64_t>(beams.tokens.size());
    extensions.resize(static_cast<size_t>(live_rows));
#pragma omp parallel
    {
        RowScratch& scratch = scratches[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic)
        for (int64_t row = 0; row < live_rows; ++row) {
            auto& best = extensions[static_cast<size_t>(row)];
            best.clear();
            if (beams.log_probabilities[static_cast<size_t>(row)] == kImpossible) continue;
            const float* row_logits = logits.data() + row / rows_a_logits_row * search.vocabulary;
            best_extensions(row_logits, beams.tokens[static_cast<size_t>(row)], search.options, step, search.limit,
                            search.eos_id, search.keep, scratch, best);
        }
    }
}

// The best 2·beam extensions of each of a source's beams, best first: at most `beam` of all of them
// end in eos, so at least `beam` can continue.
std::vector<Candidate> ranked_candidates(const Search& search, const Beams& beams,
                                         const std::vector<std::vector<Extension>>& extensions, int64_t first_row) {
    std::vector<Candidate> candidates;
    for (int64_t k = 0; k < search.beam; ++k) {
        const double prefix = beams.log_probabilities[static_cast<size_t>(first_row + k)];
        for (const Extension& e : extensions[static_cast<size_t>(first_row + k)]) {
            candidates.push_back({prefix + e.log_probability, k, e.token});
        }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& x, const Candidate& y) { return x.log_probability > y.log_probability; });
    return candidates;
}

// Moves a source's candidates that end in eos into `done` and returns the best `beam` that continue.
std::vector<Candidate> finish_or_continue(const Search& search, const std::vector<Candidate>& candidates, const Beams& beams,
                                          int64_t first_row, std::vector<Hypothesis>& done) {
    const auto beam = static_cast<size_t>(search.beam);
    std::vector<Candidate> continuing;
    for (size_t rank = 0; rank < candidates.size() && continuing.size() < beam; ++rank) {
        const Candidate& c = candidates[rank];
        if (c.token != search.eos_id) {
            continuing.push_back(c);
        } else if (rank < beam && done.size() < beam) {
            // As in fairseq, eos ends a hypothesis only when it ranks among the best `beam`.
            const auto& tokens = beams.tokens[static_cast<size_t>(first_row + c.beam)];
            done.push_back({tokens, c.log_probability, search.length_normalized(c.log_probability, tokens.size())});
        }
    }
    return continuing;
}

// One step of every source: hypotheses that end go to `finished`, the others become the next beams;
// `next_rows` says which of this step's rows each next row continues.
Beams advance(const Search& search, const Beams& beams, const std::vector<std::vector<Extension>>& extensions, int64_t step,
              std::vector<std::vector<Hypothesis>>& finished, std::vector<int64_t>& next_rows) {
    const auto beam = static_cast<size_t>(search.beam);
    Beams next;
    next_rows.clear();
    for (size_t a = 0; a < beams.sources.size(); ++a) {
        const auto first_row = static_cast<int64_t>(a) * search.beam;
        auto& done = finished[static_cast<size_t>(beams.sources[a])];
        const std::vector<Candidate> continuing =
            finish_or_continue(search, ranked_candidates(search, beams, extensions, first_row), beams, first_row, done);
        if (done.size() >= beam || step == search.limit || continuing.empty()) continue;
        next.sources.push_back(beams.sources[a]);
        for (size_t k = 0; k < beam; ++k) {
            // Fewer continuations than beams (tiny vocabularies, bans): the remaining rows stay dead.
            const Candidate c = k < continuing.size() ? continuing[k] : Candidate{kImpossible, 0, search.eos_id};
            next_rows.push_back(first_row + c.beam);
            next.log_probabilities.push_back(c.log_probability);
            auto tokens = beams.tokens[static_cast<size_t>(first_row + c.beam)];
            tokens.push_back(c.token);
            next.tokens.push_back(std::move(tokens));
        }
    }
    return next;
}

}  // namespace

void check_beam_options(const BeamOptions& options) {
    HNAS_CHECK(options.beam >= 1, "beam search: --beam must be at least 1, got ", options.beam);
    HNAS_CHECK(options.nbest >= 1 && options.nbest <= options.beam, "beam search: --nbest must be in 1..beam (",
               options.beam, "), got ", options.nbest);
    HNAS_CHECK(options.min_length >= 0, "beam search: --min-len must be >= 0, got ", options.min_length);
    HNAS_CHECK(options.max_length >= 1 && options.max_length >= options.min_length, "beam search: --max-len (",
               options.max_length, ") must be >= 1 and >= --min-len (", options.min_length, ")");
    HNAS_CHECK(options.no_repeat_ngram >= 0, "beam search: --no-repeat-ngram must be >= 0, got ",
               options.no_repeat_ngram);
    HNAS_CHECK(std::isfinite(options.length_penalty), "beam search: the length penalty must be finite");
}

std::vector<std::vector<Hypothesis>> beam_search(const models::Seq2SeqModel& model, const Tensor& source_ids,
                                                 const Tensor& source_valid, const BeamOptions& options,
                                                 int32_t bos_id, int32_t eos_id) {
    check_beam_options(options);
    HNAS_CHECK(!model.training(), "beam search: the model is in training mode (dropout on); call set_training(false)");
    NoGradScope no_grad;
    const int64_t sources = source_ids.dim(0), beam = options.beam, vocabulary = model.config().vocab_size;
    // Position 0 holds bos and the last token fed sits at position `limit`, so eos comes at the latest
    // after `limit` tokens.
    const int64_t limit = std::min(options.max_length, model.config().max_target_positions - 1);
    HNAS_CHECK(limit >= options.min_length, "beam search: the model's ", model.config().max_target_positions,
               " target positions leave room for ", limit, " tokens, fewer than --min-len ", options.min_length);
    const Search search{options, beam, vocabulary, limit, eos_id, static_cast<size_t>(std::min(2 * beam, vocabulary))};

    // The decoder state starts with a row a source: every beam of a source starts from bos alone, so
    // the first step decodes each source once and its logits serve all its beams.
    models::DecoderState state = model.start_decoding(source_ids, source_valid);
    std::vector<int64_t> rows;
    Beams beams = start_beams(sources, beam);
    std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(sources));

    std::vector<std::vector<Extension>> extensions;  // per row, this step
    std::vector<RowScratch> scratches(static_cast<size_t>(omp_get_max_threads()),
                                      RowScratch{std::vector<double>(static_cast<size_t>(vocabulary)),
                                                 std::vector<int32_t>(static_cast<size_t>(vocabulary))});
    for (int64_t step = 0; step <= limit && !beams.sources.empty(); ++step) {
        const int64_t rows_a_state_row = step == 0 ? beam : 1;
        std::vector<int32_t> inputs;
        if (step == 0) {
            inputs.assign(static_cast<size_t>(sources), bos_id);
        } else {
            for (const auto& tokens : beams.tokens) inputs.push_back(tokens.back());
        }
        const Tensor logits = model.decode_step(state, Tensor::from_ints({static_cast<int64_t>(inputs.size())}, inputs));
        extend_rows(search, logits, rows_a_state_row, beams, step, scratches, extensions);
        beams = advance(search, beams, extensions, step, finished, rows);
        for (int64_t& row : rows) row /= rows_a_state_row;
        if (!beams.sources.empty()) state.keep_rows(rows);
    }
    for (auto& done : finished) {
        std::stable_sort(done.begin(), done.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
        if (done.size() > static_cast<size_t>(options.nbest)) done.resize(static_cast<size_t>(options.nbest));
    }
    return finished;
}

}  // namespace hnas::decode
