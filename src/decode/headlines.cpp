#include "decode/headlines.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <type_traits>

namespace hnas::decode {

namespace {
constexpr size_t kSourcePadMultiple = 8;
}  // namespace

std::vector<SourceBatch> source_batches(const data::Tokenizer& tokenizer, const std::vector<std::string>& articles,
                                        int64_t batch, int64_t max_source) {
    HNAS_CHECK(batch >= 1, "decode: the batch must hold at least one article, got ", batch);
    HNAS_CHECK(max_source >= 1, "decode: max_source must be at least 1, got ", max_source);
    std::vector<std::vector<int32_t>> sources(articles.size());
    for (size_t i = 0; i < articles.size(); ++i) {
        sources[i] = tokenizer.encode(articles[i]);
        if (static_cast<int64_t>(sources[i].size()) > max_source) sources[i].resize(static_cast<size_t>(max_source));
    }
    std::vector<size_t> order(articles.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return sources[x].size() < sources[y].size(); });

    std::vector<SourceBatch> batches;
    for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch)) {
        const size_t end = std::min(order.size(), start + static_cast<size_t>(batch));
        const auto rows = static_cast<int64_t>(end - start);
        size_t longest = 1;  // an empty article still gets one (padding) position
        for (size_t i = start; i < end; ++i) longest = std::max(longest, sources[order[i]].size());
        // Padded up to a multiple of kSourcePadMultiple, within max_source: fewer distinct shapes, so
        // fewer oneDNN primitives to create; the padding is masked.
        longest = std::min(static_cast<size_t>(max_source),
                           (longest + kSourcePadMultiple - 1) / kSourcePadMultiple * kSourcePadMultiple);
        std::vector<int32_t> ids(static_cast<size_t>(rows) * longest, data::kPadId);
        std::vector<float> valid(ids.size(), 0.0f);
        for (size_t i = start; i < end; ++i) {
            const auto& source = sources[order[i]];
            std::copy(source.begin(), source.end(), ids.begin() + static_cast<std::ptrdiff_t>((i - start) * longest));
            std::fill_n(valid.begin() + static_cast<std::ptrdiff_t>((i - start) * longest), source.size(), 1.0f);
        }
        const auto width = static_cast<int64_t>(longest);
        batches.push_back({Tensor::from_ints({rows, width}, ids), Tensor::from_floats({rows, width}, valid),
                           std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(start),
                                               order.begin() + static_cast<std::ptrdiff_t>(end))});
    }
    return batches;
}

std::vector<std::vector<DecodedHeadline>> decode_articles(const models::Seq2SeqModel& model,
                                                          const data::Tokenizer& tokenizer,
                                                          const std::vector<std::string>& articles,
                                                          const BeamOptions& options, int64_t batch, int64_t max_source,
                                                          const std::function<void(size_t, size_t)>& progress) {
    std::vector<std::vector<DecodedHeadline>> headlines(articles.size());
    size_t done = 0;
    for (const SourceBatch& sources : source_batches(tokenizer, articles, batch, max_source)) {
        const auto hypotheses = beam_search(model, sources.ids, sources.valid, options, data::kBosId, data::kEosId);
        for (size_t row = 0; row < sources.articles.size(); ++row) {
            for (const auto& hypothesis : hypotheses[row]) {
                std::string text = tokenizer.decode(hypothesis.tokens);
                std::transform(text.begin(), text.end(), text.begin(),
                               [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
                headlines[sources.articles[row]].push_back({std::move(text), hypothesis.score});
            }
        }
        done += sources.articles.size();
        if (progress) progress(done, articles.size());
    }
    return headlines;
}

Json settings_json(const DecodeSettings& settings) {
    Json json = {{"nbest", settings.nbest}, {"batch", settings.batch}, {"max_source", settings.max_source},
                 {"precision", name_of(settings.precision)}};
    if (settings.beam) json["beam"] = *settings.beam;
    if (settings.min_length) json["min_length"] = *settings.min_length;
    if (settings.max_length) json["max_length"] = *settings.max_length;
    if (settings.no_repeat_ngram) json["no_repeat_ngram"] = *settings.no_repeat_ngram;
    if (settings.length_penalty) json["length_penalty"] = *settings.length_penalty;
    return json;
}

DecodeSettings decode_settings(const Json& json) {
    DecodeSettings settings;
    const auto optional = [&json](const char* key, auto& field) {
        if (json.contains(key)) field = json.at(key).get<typename std::remove_reference_t<decltype(field)>::value_type>();
    };
    optional("beam", settings.beam);
    optional("min_length", settings.min_length);
    optional("max_length", settings.max_length);
    optional("no_repeat_ngram", settings.no_repeat_ngram);
    optional("length_penalty", settings.length_penalty);
    settings.nbest = json.value("nbest", settings.nbest);
    settings.batch = json.value("batch", settings.batch);
    settings.max_source = json.value("max_source", settings.max_source);
    if (json.contains("precision")) {
        settings.precision = parse_enum<backend::MatmulPrecision>(json.at("precision").get<std::string>(), "decoding precision");
    }
    return settings;
}

BeamOptions beam_options(const DecodingConfig& configured, const DecodeSettings& given) {
    BeamOptions beam;
    static_cast<DecodingConfig&>(beam) = configured;
    beam.beam = given.beam.value_or(beam.beam);
    beam.length_penalty = given.length_penalty.value_or(beam.length_penalty);
    beam.min_length = given.min_length.value_or(beam.min_length);
    beam.max_length = given.max_length.value_or(beam.max_length);
    beam.no_repeat_ngram = given.no_repeat_ngram.value_or(beam.no_repeat_ngram);
    beam.nbest = given.nbest;
    check_beam_options(beam);
    return beam;
}

}  // namespace hnas::decode
