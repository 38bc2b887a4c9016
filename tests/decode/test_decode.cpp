// Decoding: the cached step-by-step decoder equals a full recomputation for every decoder-safe
// attention kind (with padding in the source, a prior, pre- and post-LN, the decoder on the encoder's
// weights); beam search at beam 1 is greedy decoding; wider beams find hypotheses at least as likely;
// the options (min/max length, n-gram bans, n-best) do what they say; scores are the model's own
// log-probabilities.
#include <cmath>
#include <set>

#include "config/experiment_config.h"
#include "data/tokenizer.h"
#include "decode/beam_search.h"
#include "decode/headlines.h"
#include "nn/attention_probe.h"
#include "tasks/task.h"
#include "test_support.h"

namespace hnas {
namespace {

using config::Json;
using testing::random_tensor;

struct DecoderSetup {
    std::string decoder_kind, cross_kind;
    bool prior, pre_norm;
    bool shared_prior = false;  // T5's: one table per stack (encoder, decoder self and cross), not per layer
    bool shared_weights = false;  // share_encoder_decoder: the decoder runs on the encoder's weights
};

void PrintTo(const DecoderSetup& s, std::ostream* out) {
    *out << "decoder " << s.decoder_kind << ", cross " << s.cross_kind << (s.prior ? ", prior" : "")
         << (s.shared_prior ? " shared by each stack" : "") << (s.shared_weights ? ", on the encoder's weights" : "")
         << (s.pre_norm ? ", pre-LN" : ", post-LN");
}

std::string setup_name(const ::testing::TestParamInfo<DecoderSetup>& info) {
    const auto& s = info.param;
    return s.decoder_kind + "_" + s.cross_kind + (s.prior ? "_prior" : "") + (s.shared_prior ? "_shared" : "") +
           (s.shared_weights ? "_tied" : "") + (s.pre_norm ? "_preln" : "_postln");
}

std::unique_ptr<models::Seq2SeqModel> tiny_model(const DecoderSetup& setup, uint64_t seed, int64_t vocabulary = 40) {
    Json encoder = {{"kind", "dnas"}}, decoder = {{"kind", setup.decoder_kind}}, cross = {{"kind", setup.cross_kind}};
    // nap divides a query's centred scores by √(var + ε); an untrained model's near-equal scores make that
    // up to 1/√ε times the products' last-bit differences. ε = 10⁻² bounds it at 10, as for the other kinds.
    for (Json* stack : {&decoder, &cross})
        if ((*stack)["kind"] == "nap") (*stack)["nap_eps"] = 1e-2;
    if (setup.prior) decoder["prior"] = {{"enabled", true}, {"buckets", 8}, {"max_distance", 16}};
    if (setup.shared_prior) {
        decoder["prior"]["shared"] = true;
        for (Json* stack : {&encoder, &cross}) (*stack)["prior"] = decoder["prior"];
    }
    const Json raw = {{"task", "headline"},
                      {"seed", seed},
                      {"model",
                       {{"vocab_size", vocabulary}, {"d_model", 32}, {"heads", 4}, {"ffn_dim", 48}, {"encoder_layers", 2},
                        {"decoder_layers", 2}, {"max_source_positions", 16}, {"max_target_positions", 12},
                        {"norm", setup.pre_norm ? "pre" : "post"}, {"share_encoder_decoder", setup.shared_weights},
                        {"attention", {{"encoder", encoder}, {"decoder", decoder}, {"cross", cross}}}}}};
    const auto parsed = tasks::parse_config(raw);
    static Rng dropout(1, 1);
    Rng init(seed, 0);
    auto model = std::make_unique<models::Seq2SeqModel>(parsed.model, init, dropout);
    if (setup.prior) {  // the prior starts at zero; make it matter
        for (const auto& named : model->named_parameters()) {
            if (named.name.find("relative_bias") != std::string::npos) {
                const Tensor values = random_tensor(named.parameter.shape(), seed + 11, -1.0f, 1.0f);
                Tensor table = named.parameter.value();  // shares the parameter's storage
                std::copy_n(values.data(), values.numel(), table.data());
            }
        }
    }
    model->set_training(false);
    return model;
}

// Sources (B, S) with ragged padding: row b has S - b real tokens (at least 2).
std::pair<Tensor, Tensor> ragged_sources(int64_t batch, int64_t length, int64_t vocabulary, uint64_t seed) {
    Rng rng(seed, 5);
    std::vector<int32_t> ids(static_cast<size_t>(batch * length), 0);
    std::vector<float> valid(ids.size(), 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
        const int64_t real = std::max<int64_t>(2, length - b);
        for (int64_t t = 0; t < real; ++t) {
            ids[static_cast<size_t>(b * length + t)] = 4 + static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocabulary - 4));
            valid[static_cast<size_t>(b * length + t)] = 1.0f;
        }
    }
    return {Tensor::from_ints({batch, length}, ids), Tensor::from_floats({batch, length}, valid)};
}

// log P(tokens, eos | source) of one source row, from the full (uncached) decoder.
double sequence_log_probability(const models::Seq2SeqModel& model, const Tensor& ids, const Tensor& valid, int64_t row,
                                const std::vector<int32_t>& tokens) {
    NoGradScope no_grad;
    const Tensor source_ids = ids.take_rows({row}), source_valid = valid.take_rows({row});
    std::vector<int32_t> input{data::kBosId};
    input.insert(input.end(), tokens.begin(), tokens.end());
    const auto length = static_cast<int64_t>(input.size());
    const Tensor logits = model.logits(model.decode(model.encode(source_ids, source_valid), source_valid,
                                                    Tensor::from_ints({1, length}, input), Tensor::full({1, length}, 1.0f)))
                              .value();
    const int64_t vocabulary = model.config().vocab_size;
    double total = 0;
    for (int64_t t = 0; t < length; ++t) {
        const float* row_logits = logits.data() + t * vocabulary;
        double top = row_logits[0], sum = 0;
        for (int64_t v = 1; v < vocabulary; ++v) top = std::max<double>(top, row_logits[v]);
        for (int64_t v = 0; v < vocabulary; ++v) sum += std::exp(row_logits[v] - top);
        const int32_t next = t + 1 < length ? input[static_cast<size_t>(t + 1)] : data::kEosId;
        total += row_logits[next] - top - std::log(sum);
    }
    return total;
}

// Greedy decoding by full recomputation over the growing prefix: the reference for beam 1.
std::vector<int32_t> greedy_reference(const models::Seq2SeqModel& model, const Tensor& ids, const Tensor& valid, int64_t row,
                                      int64_t max_length) {
    NoGradScope no_grad;
    const Tensor source_ids = ids.take_rows({row}), source_valid = valid.take_rows({row});
    const Var memory = model.encode(source_ids, source_valid);
    std::vector<int32_t> prefix{data::kBosId};
    const int64_t vocabulary = model.config().vocab_size;
    while (static_cast<int64_t>(prefix.size()) <= max_length) {
        const auto length = static_cast<int64_t>(prefix.size());
        const Tensor logits = model.logits(model.decode(memory, source_valid, Tensor::from_ints({1, length}, prefix),
                                                        Tensor::full({1, length}, 1.0f)))
                                  .value();
        const float* last = logits.data() + (length - 1) * vocabulary;
        const auto best = static_cast<int32_t>(std::max_element(last, last + vocabulary) - last);
        if (best == data::kEosId) break;
        prefix.push_back(best);
    }
    return {prefix.begin() + 1, prefix.end()};
}

class CachedDecoding : public ::testing::TestWithParam<DecoderSetup> {};

TEST_P(CachedDecoding, StepLogitsEqualFullRecomputation) {
    const auto model = tiny_model(GetParam(), 21);
    const int64_t batch = 3, source_length = 9, target_length = 7, vocabulary = model->config().vocab_size;
    const auto [ids, valid] = ragged_sources(batch, source_length, vocabulary, 3);
    const Tensor targets = random_tensor({batch, target_length}, 9, 4.0f, static_cast<float>(vocabulary) - 0.01f);
    std::vector<int32_t> target_ids(static_cast<size_t>(batch * target_length));
    for (size_t i = 0; i < target_ids.size(); ++i) target_ids[i] = static_cast<int32_t>(targets.data()[i]);
    const Tensor target_input = Tensor::from_ints({batch, target_length}, target_ids);

    NoGradScope no_grad;
    const Tensor full = model->logits(model->decode(model->encode(ids, valid), valid, target_input,
                                                    Tensor::full({batch, target_length}, 1.0f)))
                            .value();  // (B·T, V)
    models::DecoderState state = model->start_decoding(ids, valid);
    double worst = 0;
    for (int64_t t = 0; t < target_length; ++t) {
        std::vector<int32_t> column;
        for (int64_t b = 0; b < batch; ++b) column.push_back(target_ids[static_cast<size_t>(b * target_length + t)]);
        const Tensor step = model->decode_step(state, Tensor::from_ints({batch}, column));
        ASSERT_EQ(step.shape(), (Shape{batch, vocabulary}));
        for (int64_t b = 0; b < batch; ++b)
            for (int64_t v = 0; v < vocabulary; ++v) {
                const double expected = full.data()[(b * target_length + t) * vocabulary + v];
                worst = std::max(worst, std::abs(step.data()[b * vocabulary + v] - expected));
            }
    }
    EXPECT_LT(worst, 2e-5) << "largest difference between cached and recomputed logits";
}

// Beam search's reorderings: each source's row repeated (its memory row read by both), rows moved among
// the hypotheses of one source (the memory stays in place, uncopied), a source dropped and rows
// repeated, then rows of one source apart (a memory row each); every step's logits equal the full
// recomputation of each row's own prefix.
TEST_P(CachedDecoding, ReorderedRowsEqualFullRecomputation) {
    const auto model = tiny_model(GetParam(), 23);
    const int64_t sources = 3, source_length = 9, vocabulary = model->config().vocab_size;
    const auto [ids, valid] = ragged_sources(sources, source_length, vocabulary, 5);
    NoGradScope no_grad;
    models::DecoderState state = model->start_decoding(ids, valid);
    // The memory's keys and values are projected once a source, then repeated for the source's rows.
    for (const nn::LayerCache& layer : state.layers) ASSERT_EQ(layer.cross.keys.dim(0), sources);
    std::vector<int64_t> source_of{0, 0, 1, 1, 2, 2};
    state.keep_rows(source_of);
    for (const nn::LayerCache& layer : state.layers) ASSERT_EQ(layer.cross.values.dim(0), sources);
    std::vector<std::vector<int32_t>> prefixes(source_of.size(), std::vector<int32_t>{data::kBosId});
    const std::vector<std::vector<int64_t>> reorders{{}, {1, 0, 3, 2, 5, 4}, {}, {4, 4, 0, 1}, {}, {0, 2, 3, 1}, {}};
    const std::vector<int64_t> memory_rows{3, 3, 3, 2, 2, 4, 4};  // after each step's reorder
    double worst = 0;
    for (size_t step = 0; step < reorders.size(); ++step) {
        const auto& rows = reorders[step];
        if (!rows.empty()) {
            const float* memory_before = state.memory.value().data();
            state.keep_rows(rows);
            std::vector<std::vector<int32_t>> kept;
            std::vector<int64_t> kept_sources;
            for (int64_t row : rows) {
                kept.push_back(prefixes[static_cast<size_t>(row)]);
                kept_sources.push_back(source_of[static_cast<size_t>(row)]);
            }
            const bool same_memory_rows = memory_rows[step] == memory_rows[step - 1];
            EXPECT_EQ(state.memory.value().data() == memory_before, same_memory_rows) << "step " << step;
            prefixes = std::move(kept);
            source_of = std::move(kept_sources);
        }
        ASSERT_EQ(state.memory.dim(0), memory_rows[step]) << "step " << step;
        for (const nn::LayerCache& layer : state.layers) ASSERT_EQ(layer.cross.keys.dim(0), memory_rows[step]);
        std::vector<int32_t> inputs;
        for (size_t r = 0; r < prefixes.size(); ++r) inputs.push_back(prefixes[r].back());
        const auto rows_now = static_cast<int64_t>(inputs.size());
        const Tensor step_logits = model->decode_step(state, Tensor::from_ints({rows_now}, inputs));
        for (int64_t r = 0; r < rows_now; ++r) {
            const auto& prefix = prefixes[static_cast<size_t>(r)];
            const auto length = static_cast<int64_t>(prefix.size());
            const int64_t source = source_of[static_cast<size_t>(r)];
            const Tensor source_ids = ids.take_rows({source}), source_valid = valid.take_rows({source});
            const Tensor full = model->logits(model->decode(model->encode(source_ids, source_valid), source_valid,
                                                            Tensor::from_ints({1, length}, prefix),
                                                            Tensor::full({1, length}, 1.0f)))
                                    .value();
            for (int64_t v = 0; v < vocabulary; ++v)
                worst = std::max(worst, std::abs(double{step_logits.data()[r * vocabulary + v]} -
                                                 full.data()[(length - 1) * vocabulary + v]));
            // each row continues with a token of its own, so rows of one source diverge
            prefixes[static_cast<size_t>(r)].push_back(4 + static_cast<int32_t>((7 * r + 3 * static_cast<int64_t>(step)) % (vocabulary - 4)));
        }
    }
    EXPECT_LT(worst, 2e-5) << "largest difference between reordered cached and recomputed logits";
}

// Two hypotheses a memory row (grouped cross-attention) against each its own (rows of the sources
// interleaved, so the memory repeats): the same logits, and a probe on the cross-attentions records the
// same rows, a memory row for each query row.
TEST(CachedDecodingGroups, GroupedCrossAttentionUnderAProbeEqualsUngrouped) {
    const auto model = tiny_model({"lnas", "lnas", false, false}, 29);
    const auto [ids, valid] = ragged_sources(2, 7, model->config().vocab_size, 6);
    NoGradScope no_grad;
    std::vector<const nn::MultiHeadAttention*> cross;
    for (nn::TransformerLayer* layer : model->decoder_layers()) cross.push_back(layer->cross_attention());
    struct Run {
        Tensor logits;
        std::vector<nn::AttentionRecord> records;
    };
    auto run = [&](const std::vector<int64_t>& rows, const std::vector<int32_t>& tokens, int64_t memory_rows) {
        models::DecoderState state = model->start_decoding(ids, valid);
        state.keep_rows(rows);
        EXPECT_EQ(state.memory.dim(0), memory_rows);
        nn::AttentionProbe probe(cross);
        Run out{model->decode_step(state, Tensor::from_ints({4}, tokens)), {}};
        for (const nn::MultiHeadAttention* attention : cross) out.records.push_back(probe.record(*attention));
        return out;
    };
    const Run grouped = run({0, 0, 1, 1}, {4, 5, 6, 7}, 2), apart = run({0, 1, 0, 1}, {4, 6, 5, 7}, 4);
    const std::vector<int64_t> same_row{0, 2, 1, 3};  // grouped row r is apart's row same_row[r]
    auto expect_rows_equal = [&](const Tensor& a, const Tensor& b, const std::string& what) {
        ASSERT_EQ(a.shape(), b.shape()) << what;
        const int64_t width = a.numel() / a.dim(0);
        for (int64_t r = 0; r < a.dim(0); ++r)
            for (int64_t e = 0; e < width; ++e)
                ASSERT_NEAR(a.data()[r * width + e], b.data()[same_row[static_cast<size_t>(r)] * width + e], 1e-5)
                    << what << " row " << r;
    };
    expect_rows_equal(grouped.logits, apart.logits, "logits");
    for (size_t layer = 0; layer < cross.size(); ++layer) {
        const nn::AttentionRecord &g = grouped.records[layer], &a = apart.records[layer];
        expect_rows_equal(g.key_weight_sums, a.key_weight_sums, "key weight sums");
        expect_rows_equal(g.key_valid, a.key_valid, "key mask");
        expect_rows_equal(g.memory, a.memory, "memory");
    }
}

INSTANTIATE_TEST_SUITE_P(DecoderKinds, CachedDecoding,
                         ::testing::Values(DecoderSetup{"lnas", "lnas", false, false},
                                         DecoderSetup{"dnas_causal", "lnas", false, false},
                                         DecoderSetup{"lnas", "dnas_causal", false, false},
                                         DecoderSetup{"dnas_causal", "dnas_causal", true, true},
                                         DecoderSetup{"nap", "nap", false, false},
                                         DecoderSetup{"lnas", "lnas", true, false},
                                         DecoderSetup{"lnas", "lnas", true, false, true},
                                         DecoderSetup{"dnas_causal", "dnas_causal", true, true, true},
                                         DecoderSetup{"lnas", "lnas", true, false, false, true},
                                         DecoderSetup{"dnas_causal", "lnas", false, true, false, true}),
                         setup_name);

TEST(BeamSearch, BeamOneIsGreedy) {
    for (const auto& setup : {DecoderSetup{"lnas", "lnas", false, false}, DecoderSetup{"dnas_causal", "dnas_causal", true, true}}) {
        const auto model = tiny_model(setup, 5);
        const auto [ids, valid] = ragged_sources(4, 8, model->config().vocab_size, 8);
        decode::BeamOptions options;
        options.beam = 1;
        options.min_length = 0;
        options.max_length = 10;
        options.no_repeat_ngram = 0;  // the reference below bans nothing
        const auto hypotheses = decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId);
        ASSERT_EQ(hypotheses.size(), 4u);
        for (int64_t row = 0; row < 4; ++row) {
            ASSERT_EQ(hypotheses[static_cast<size_t>(row)].size(), 1u);
            EXPECT_EQ(hypotheses[static_cast<size_t>(row)][0].tokens, greedy_reference(*model, ids, valid, row, 10))
                << "row " << row;
        }
    }
}

TEST(BeamSearch, WiderBeamsScoreAtLeastGreedyAndScoresAreTheModels) {
    const auto model = tiny_model({"lnas", "lnas", false, false}, 8);
    const auto [ids, valid] = ragged_sources(5, 8, model->config().vocab_size, 4);
    decode::BeamOptions options;
    options.length_penalty = 0.0;  // rank by log P, the quantity greedy approximates
    options.min_length = 0;
    options.max_length = 8;
    options.no_repeat_ngram = 0;
    options.beam = 1;
    const auto greedy = decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId);
    options.beam = 4;
    options.nbest = 4;
    const auto beam = decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId);
    for (size_t row = 0; row < 5; ++row) {
        ASSERT_FALSE(beam[row].empty());
        EXPECT_GE(beam[row][0].log_probability, greedy[row][0].log_probability - 1e-9) << "row " << row;
        for (size_t k = 0; k < beam[row].size(); ++k) {
            const auto& h = beam[row][k];
            if (k > 0) {
                EXPECT_LE(h.score, beam[row][k - 1].score) << "n-best out of order";
            }
            // The beam's bookkeeping (cache reordering across hypotheses) must give the model's own score.
            EXPECT_NEAR(h.log_probability, sequence_log_probability(*model, ids, valid, static_cast<int64_t>(row), h.tokens),
                        1e-4);
            EXPECT_NEAR(h.score, h.log_probability, 1e-12);  // length penalty 0
        }
    }
}

TEST(BeamSearch, LengthOptionsAndNgramBans) {
    const auto model = tiny_model({"lnas", "lnas", false, false}, 13, 12);  // few tokens: repeats are likely
    const auto [ids, valid] = ragged_sources(6, 8, model->config().vocab_size, 2);
    decode::BeamOptions options;
    options.beam = 3;
    options.nbest = 3;
    options.min_length = 4;
    options.max_length = 9;
    options.length_penalty = 1.0;
    options.no_repeat_ngram = 0;
    auto repeats_a_bigram = [](const std::vector<int32_t>& tokens) {
        std::set<std::pair<int32_t, int32_t>> seen;
        for (size_t i = 0; i + 1 < tokens.size(); ++i)
            if (!seen.insert({tokens[i], tokens[i + 1]}).second) return true;
        return false;
    };
    bool any_repeat = false;
    for (const auto& row : decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId)) {
        for (const auto& h : row) {
            EXPECT_GE(h.tokens.size(), 4u);
            EXPECT_LE(h.tokens.size(), 9u);
            EXPECT_NEAR(h.score, h.log_probability / static_cast<double>(h.tokens.size() + 1), 1e-9);
            any_repeat = any_repeat || repeats_a_bigram(h.tokens);
        }
    }
    ASSERT_TRUE(any_repeat) << "this model repeats bigrams without a ban, so the ban below is tested";
    options.no_repeat_ngram = 2;
    for (const auto& row : decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId)) {
        for (const auto& h : row) EXPECT_FALSE(repeats_a_bigram(h.tokens));
    }
}

TEST(BeamSearch, RejectsBadOptionsAndTrainingMode) {
    const auto model = tiny_model({"lnas", "lnas", false, false}, 2);
    const auto [ids, valid] = ragged_sources(1, 4, model->config().vocab_size, 1);
    decode::BeamOptions options;
    options.beam = 2;
    options.nbest = 3;
    EXPECT_THROW(decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId), Error);
    options.nbest = 1;
    model->set_training(true);
    EXPECT_THROW(decode::beam_search(*model, ids, valid, options, data::kBosId, data::kEosId), Error);
}

// hnas eval hands a task its decoding settings as JSON: every field survives the round trip, and unset
// ones stay unset (so the checkpoint's own decoding settings apply).
TEST(DecodeSettings, JsonRoundTripKeepsEveryFieldAndLeavesUnsetOnesUnset) {
    decode::DecodeSettings given;
    given.beam = 5;
    given.min_length = 3;
    given.max_length = 17;
    given.no_repeat_ngram = 2;
    given.length_penalty = 0.75;
    given.nbest = 4;
    given.batch = 9;
    given.max_source = 64;
    given.precision = backend::MatmulPrecision::bf16;
    const decode::DecodeSettings back = decode::decode_settings(decode::settings_json(given));
    EXPECT_EQ(back.beam, given.beam);
    EXPECT_EQ(back.min_length, given.min_length);
    EXPECT_EQ(back.max_length, given.max_length);
    EXPECT_EQ(back.no_repeat_ngram, given.no_repeat_ngram);
    EXPECT_EQ(back.length_penalty, given.length_penalty);
    EXPECT_EQ(back.nbest, given.nbest);
    EXPECT_EQ(back.batch, given.batch);
    EXPECT_EQ(back.max_source, given.max_source);
    EXPECT_EQ(back.precision, given.precision);

    const decode::DecodeSettings unset = decode::decode_settings(decode::settings_json(decode::DecodeSettings{}));
    EXPECT_FALSE(unset.beam || unset.min_length || unset.max_length || unset.no_repeat_ngram || unset.length_penalty);
    EXPECT_EQ(unset.nbest, decode::DecodeSettings{}.nbest);
    EXPECT_THROW(decode::decode_settings(Json{{"precision", "f16"}}), Error);
}

}  // namespace
}  // namespace hnas
