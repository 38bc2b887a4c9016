// hnas-bench decode: beam search of a trained headline model, and what the PyTorch twin decodes again.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "base/read_file.h"
#include "bench/bench.h"
#include "decode/headlines.h"
#include "io/checkpoint.h"
#include "models/model_io.h"
#include "tasks/headline/headline_options.h"
#include "tasks/task_support.h"
#include "tasks/trained_model.h"

namespace hnas::bench {

// Beam search of a trained headline model (decoding settings from its config's test section, beam
// from the flag) over the first `count` articles, in the length-sorted batches of `hnas decode`. One
// untimed batch warms up, then one timed pass decodes them all. Prints one JSON line; `out` gets the
// model's parameters, "source/<b>/ids|valid" per batch and, in the metadata, the run's config, the
// decoding settings and every batch's best hypotheses: what `scripts/torch_reference.py --sources` decodes again.
void bench_decode(const DecodeBenchOptions& o) {
    const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(o.checkpoint);
    HNAS_CHECK(trained.config.task == &tasks::headline::schema(), "decode: ", o.checkpoint, " holds a ", trained.config.task->name,
               " model; the decoding bench needs a headline checkpoint");
    const tasks::LoadedModel<models::Seq2SeqModel> loaded = tasks::load_model<models::Seq2SeqModel>(trained);
    const models::Seq2SeqModel& model = *loaded.model;
    std::vector<std::string> articles = read_lines(o.articles, "articles");
    HNAS_CHECK(static_cast<int64_t>(articles.size()) >= o.count, "decode: ", o.articles, " has ", articles.size(),
               " articles, fewer than --count ", o.count);
    articles.resize(static_cast<size_t>(o.count));
    decode::BeamOptions beam;
    static_cast<decode::DecodingConfig&>(beam) = tasks::headline::options(trained.config).decoding;
    beam.beam = o.beam;
    const int64_t max_source = tasks::headline::max_source(trained.config);
    const auto batches = decode::source_batches(trained.tokenizer, articles, o.batch, max_source);
    backend::set_matmul_precision(o.precision);

    auto decode_batch = [&](const decode::SourceBatch& b) {
        return decode::beam_search(model, b.ids, b.valid, beam, data::kBosId, data::kEosId);
    };
    decode_batch(batches.front());
    std::vector<std::vector<std::vector<decode::Hypothesis>>> hypotheses;
    const backend::MatmulStats before = backend::matmul_stats();
    const auto start = Clock::now();
    for (const auto& b : batches) hypotheses.push_back(decode_batch(b));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const backend::MatmulStats after = backend::matmul_stats();

    nlohmann::ordered_json best = nlohmann::ordered_json::array();
    int64_t generated = 0;
    for (const auto& batch_hypotheses : hypotheses) {
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const auto& row : batch_hypotheses) {
            rows.push_back(row.front().tokens);
            generated += static_cast<int64_t>(row.front().tokens.size());
        }
        best.push_back(std::move(rows));
    }
    nlohmann::ordered_json meta = {{"hnas_version", HNAS_VERSION}, {"checkpoint", o.checkpoint},
                                   {"config", trained.config.resolved},
                                   {"beam", beam.beam}, {"length_penalty", beam.length_penalty},
                                   {"min_length", beam.min_length}, {"max_length", beam.max_length},
                                   {"no_repeat_ngram", beam.no_repeat_ngram}, {"batch", o.batch},
                                   {"bos_id", data::kBosId}, {"eos_id", data::kEosId},
                                   {"batches", batches.size()}, {"hypotheses", best}};
    io::CheckpointWriter writer(meta);
    models::add_parameters(writer, model);
    for (size_t b = 0; b < batches.size(); ++b) {
        writer.add_tensor(fmt::format("source/{}/ids", b), batches[b].ids);
        writer.add_tensor(fmt::format("source/{}/valid", b), batches[b].valid);
    }
    writer.write(o.out);
    std::cout << nlohmann::json{{"impl", "hnas"}, {"beam", beam.beam}, {"articles", o.count}, {"batch", o.batch},
                                {"precision", name_of(o.precision)}, {"seconds", seconds}, {"articles_per_s", static_cast<double>(o.count) / seconds},
                                {"generated_tokens", generated}, {"matmul_calls", after.calls - before.calls},
                                {"matmul_seconds", after.seconds - before.seconds},
                                {"matmul_primitives_created", after.primitives - before.primitives},
                                {"matmul_creation_seconds", after.creation_seconds - before.creation_seconds},
                                {"peak_rss_mib", peak_rss_mib()}, {"out", o.out}}
                     .dump()
              << std::endl;
}

}  // namespace hnas::bench
