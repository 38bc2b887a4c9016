#include "tasks/headline/headline_decode.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "base/atomic_file.h"
#include "base/number_format.h"
#include "base/read_file.h"
#include "eval/rouge_report.h"
#include "models/seq2seq.h"
#include "tasks/headline/headline_options.h"
#include "tasks/task_support.h"

namespace hnas::tasks::headline {

std::vector<std::string> best_headlines(const std::vector<std::vector<decode::DecodedHeadline>>& headlines) {
    std::vector<std::string> best;
    for (const auto& hypotheses : headlines) best.push_back(hypotheses.empty() ? std::string() : hypotheses.front().text);
    return best;
}

Json decoding_json(const decode::BeamOptions& beam) {
    return {{"beam", beam.beam},
            {"length_penalty", beam.length_penalty},
            {"min_length", beam.min_length},
            {"max_length", beam.max_length},
            {"no_repeat_ngram", beam.no_repeat_ngram}};
}

DecodeRun decode_file(const TrainedCheckpoint& trained, const decode::DecodeSettings& settings, const std::string& articles_path) {
    HNAS_CHECK(trained.config.task == &schema(), trained.checkpoint.path(), " holds a ", trained.config.task->name, " model (",
               trained.config.task->description, "); decoding needs a headline (encoder-decoder) checkpoint");
    DecodeRun run;
    run.beam = decode::beam_options(options(trained.config).decoding, settings);
    const int64_t max_source = settings.max_source > 0 ? settings.max_source : headline::max_source(trained.config);
    const auto articles = read_lines(articles_path, "articles");
    const LoadedModel<models::Seq2SeqModel> loaded = load_model<models::Seq2SeqModel>(trained);
    backend::set_matmul_precision(settings.precision);
    spdlog::info("decoding {} articles of {} with a model of step {} (beam {}, length penalty {}, min length {}, "
                 "no repeated {}-grams, batch {}, {} matmuls)",
                 articles.size(), articles_path, trained.step, run.beam.beam, portable(run.beam.length_penalty),
                 run.beam.min_length, run.beam.no_repeat_ngram, settings.batch, name_of(settings.precision));
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    size_t reported = 0;
    run.headlines = decode::decode_articles(*loaded.model, trained.tokenizer, articles, run.beam, settings.batch, max_source,
                                            [&](size_t done, size_t total) {
                                                if (done == total || done - reported >= 256) {
                                                    reported = done;
                                                    spdlog::info("decoded {}/{} articles ({:.1f} articles/s)", done,
                                                                 total, portable(static_cast<double>(done) / elapsed()));
                                                }
                                            });
    run.seconds = elapsed();
    return run;
}

std::string format_headlines(const DecodeRun& run) {
    const int64_t nbest = run.beam.nbest;
    std::string text;
    for (size_t id = 0; id < run.headlines.size(); ++id) {
        const auto& hypotheses = run.headlines[id];
        if (nbest == 1) {
            text += (hypotheses.empty() ? std::string() : hypotheses.front().text) + "\n";
            continue;
        }
        for (const auto& hypothesis : hypotheses) {
            text += fmt::format("{} ||| {} ||| {:.6f}\n", id, hypothesis.text, portable(hypothesis.score));
        }
    }
    return text;
}

Evaluation evaluate(const TrainedCheckpoint& trained, const EvaluationRequest& request) {
    HNAS_CHECK(!request.input.empty() && !request.references.empty(), "eval: ", trained.checkpoint.path(),
               " holds a headline model: give --articles and --references");
    const decode::DecodeSettings settings = decode::decode_settings(request.options.value("decoding", Json::object()));
    const eval::RougeOptions r = eval::rouge_options(request.options.value("rouge", Json::object()));
    const auto references = read_lines(request.references, "references");
    const DecodeRun run = decode_file(trained, settings, request.input);
    HNAS_CHECK(references.size() == run.headlines.size(), "eval: ", request.input, " has ", run.headlines.size(),
               " articles but ", request.references, " has ", references.size(), " references");
    write_file_atomically(request.predictions, format_headlines(run));
    const eval::RougeReport rouge = eval::score_rouge(best_headlines(run.headlines), references, r);
    Json decoding = decoding_json(run.beam);
    decoding.update({{"batch", settings.batch}, {"precision", name_of(settings.precision)}, {"seconds", run.seconds}});
    Json report = {{"articles", request.input},
                   {"references", request.references},
                   {"hypotheses", request.predictions},
                   {"decoding", decoding},
                   {"rouge_settings",
                    {{"stem", r.stem}, {"bootstrap", r.bootstrap}, {"seed", r.seed},
                     {"as", "ROUGE-1.5.5 -n 2 -a -f A -p 0.5" + std::string(r.stem ? " -m" : "")}}},
                   {"rouge", eval::rouge_json(rouge)}};
    return {report, eval::rouge_table(rouge, r.stem)};
}

}  // namespace hnas::tasks::headline
