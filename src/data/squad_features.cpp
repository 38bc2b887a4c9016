#include "data/squad_features.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/check.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/read_file.h"

namespace hnas::data {

namespace {

// run_squad's is_whitespace: space, tab, CR, LF and U+202F (narrow no-break space, E2 80 AF).
size_t whitespace_at(const std::string& text, size_t i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') return 1;
    if (text.compare(i, 3, "\xE2\x80\xAF") == 0) return 3;
    return 0;
}

std::vector<std::pair<size_t, size_t>> split_words(const std::string& context) {
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < context.size()) {
        if (const size_t space = whitespace_at(context, i)) {
            i += space;
            continue;
        }
        const size_t begin = i;
        while (i < context.size() && whitespace_at(context, i) == 0) ++i;
        words.emplace_back(begin, i);
    }
    return words;
}

// The byte offset of code point `index` (SQuAD's answer_start counts characters), npos beyond the end.
size_t byte_offset(const std::string& text, int64_t index) {
    int64_t seen = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // a continuation byte
        if (seen++ == index) return i;
    }
    return seen == index ? text.size() : std::string::npos;
}

// The word holding byte `offset`; an offset on whitespace belongs to the word before it (run_squad).
int64_t word_at(const std::vector<std::pair<size_t, size_t>>& words, size_t offset) {
    const auto after = std::upper_bound(words.begin(), words.end(), offset,
                                        [](size_t value, const std::pair<size_t, size_t>& word) { return value < word.first; });
    return std::max<int64_t>(0, after - words.begin() - 1);
}

const Json& field(const Json& object, const char* key, const std::string& path, Json::value_t type, const std::string& file) {
    HNAS_CHECK(object.is_object() && object.contains(key), file, ": ", path, " has no \"", key, "\"");
    const Json& value = object.at(key);
    const bool ok = type == Json::value_t::number_integer ? value.is_number_integer() : value.type() == type;
    HNAS_CHECK(ok, file, ": ", path, ".", key, " is ", value.type_name(), ", expected ",
               type == Json::value_t::string ? "a string" : type == Json::value_t::array ? "a list" : "an integer");
    return value;
}

// A window of the context's pieces.
struct Window {
    size_t start, length;
};

// run_squad's _check_is_max_context: of the windows holding piece `position`, the one where it has the
// most context on its shorter side (ties: the longer window, then the first).
bool is_max_context(const std::vector<Window>& windows, size_t current, size_t position) {
    double best_score = -1.0;
    size_t best = current;
    for (size_t w = 0; w < windows.size(); ++w) {
        const Window& window = windows[w];
        if (position < window.start || position >= window.start + window.length) continue;
        const size_t left = position - window.start, right = window.start + window.length - 1 - position;
        const double score = static_cast<double>(std::min(left, right)) + 0.01 * static_cast<double>(window.length);
        if (score > best_score) {
            best_score = score;
            best = w;
        }
    }
    return best == current;
}

// An example's context as pieces, word by word: each piece's word and each word's first piece.
struct ContextPieces {
    std::vector<int32_t> ids;
    std::vector<int64_t> piece_word, word_first_piece;
};

ContextPieces context_pieces(const SquadExample& example, const Tokenizer& tokenizer) {
    ContextPieces pieces;
    for (size_t w = 0; w < example.words.size(); ++w) {
        pieces.word_first_piece.push_back(static_cast<int64_t>(pieces.ids.size()));
        const auto [begin, end] = example.words[w];
        for (int32_t id : tokenizer.encode(std::string_view(example.context).substr(begin, end - begin))) {
            pieces.ids.push_back(id);
            pieces.piece_word.push_back(static_cast<int64_t>(w));
        }
    }
    return pieces;
}

// The first answer's first and last piece (the training target), narrowed to the pieces that spell it;
// (-1, -1) when there is none.
std::pair<int64_t, int64_t> answer_pieces(const SquadExample& example, const ContextPieces& context, const Tokenizer& tokenizer) {
    if (example.answers.empty() || context.ids.empty()) return {-1, -1};
    const SquadAnswer& answer = example.answers.front();
    const int64_t first_word = word_at(example.words, static_cast<size_t>(answer.start));
    const int64_t last_word = word_at(example.words, static_cast<size_t>(answer.start) + answer.text.size() - 1);
    const std::vector<int64_t>& word_first_piece = context.word_first_piece;
    int64_t answer_first = word_first_piece[static_cast<size_t>(first_word)];
    int64_t answer_last = static_cast<size_t>(last_word) + 1 < word_first_piece.size() ? word_first_piece[static_cast<size_t>(last_word) + 1] - 1
                                                                                       : static_cast<int64_t>(context.ids.size()) - 1;
    const std::vector<int32_t> spelled = tokenizer.encode(answer.text);
    bool found = false;
    for (int64_t s = answer_first; s <= answer_last && !found; ++s) {
        for (int64_t t = answer_last; t >= s && !found; --t) {
            if (std::equal(context.ids.begin() + s, context.ids.begin() + t + 1, spelled.begin(), spelled.end())) {
                answer_first = s;
                answer_last = t;
                found = true;
            }
        }
    }
    // An answer whose words encode to no pieces (only characters WordPiece drops) has no span.
    if (answer_first > answer_last) return {-1, -1};
    return {answer_first, answer_last};
}

// Windows of at most `room` pieces every `stride` pieces (run_squad's doc_spans).
std::vector<Window> context_windows(size_t pieces, size_t room, size_t stride) {
    std::vector<Window> windows;
    for (size_t start = 0;;) {
        const size_t length = std::min(pieces - start, room);
        windows.push_back({start, length});
        if (start + length >= pieces) break;
        start += std::min(length, stride);
    }
    return windows;
}

// Window w's feature: [CLS] query [SEP] the window's pieces [SEP], with the answer's positions when the
// window holds it whole.
SpanFeature window_feature(size_t example, const std::vector<int32_t>& query, const ContextPieces& context,
                           const std::vector<Window>& windows, size_t w, std::pair<int64_t, int64_t> answer) {
    const Window& window = windows[w];
    SpanFeature feature;
    feature.example = static_cast<int64_t>(example);
    feature.ids.push_back(kClsId);
    feature.ids.insert(feature.ids.end(), query.begin(), query.end());
    feature.ids.push_back(kSepId);
    const size_t offset = feature.ids.size();
    feature.segments.assign(offset, 0);
    feature.word.assign(offset, -1);
    feature.max_context.assign(offset, 0);
    for (size_t i = window.start; i < window.start + window.length; ++i) {
        feature.ids.push_back(context.ids[i]);
        feature.word.push_back(context.piece_word[i]);
        feature.max_context.push_back(is_max_context(windows, w, i) ? 1 : 0);
    }
    feature.ids.push_back(kSepId);
    feature.word.push_back(-1);
    feature.max_context.push_back(0);
    feature.segments.resize(feature.ids.size(), 1);
    const auto first = static_cast<size_t>(answer.first), last = static_cast<size_t>(answer.second);
    if (answer.first >= 0 && first >= window.start && last < window.start + window.length) {
        feature.start = static_cast<int32_t>(first - window.start + offset);
        feature.end = static_cast<int32_t>(last - window.start + offset);
    }
    return feature;
}

}  // namespace

SquadFile read_squad(const std::string& path) {
    const Json root = parse_json(read_file(path, "SQuAD file"), path + ": not valid JSON:");
    SquadFile file;
    HNAS_CHECK(root.is_object(), path, ": expected an object {\"version\", \"data\"} at the top level");
    if (root.contains("version") && root.at("version").is_string()) file.version_2 = root.at("version").get<std::string>().rfind("v2", 0) == 0;
    const Json& data = field(root, "data", "(top level)", Json::value_t::array, path);
    std::set<std::string> ids;
    for (size_t a = 0; a < data.size(); ++a) {
        const std::string article = "data[" + std::to_string(a) + "]";
        const Json& paragraphs = field(data[a], "paragraphs", article, Json::value_t::array, path);
        for (size_t p = 0; p < paragraphs.size(); ++p) {
            const std::string paragraph = article + ".paragraphs[" + std::to_string(p) + "]";
            const std::string context = field(paragraphs[p], "context", paragraph, Json::value_t::string, path).get<std::string>();
            const auto words = split_words(context);
            const Json& qas = field(paragraphs[p], "qas", paragraph, Json::value_t::array, path);
            for (size_t q = 0; q < qas.size(); ++q) {
                const std::string question = paragraph + ".qas[" + std::to_string(q) + "]";
                SquadExample example;
                example.id = field(qas[q], "id", question, Json::value_t::string, path).get<std::string>();
                example.question = field(qas[q], "question", question, Json::value_t::string, path).get<std::string>();
                example.context = context;
                example.words = words;
                HNAS_CHECK(ids.insert(example.id).second, path, ": ", question, ".id \"", example.id, "\" is used twice");
                bool impossible = false;
                if (qas[q].contains("is_impossible")) {
                    HNAS_CHECK(qas[q].at("is_impossible").is_boolean(), path, ": ", question, ".is_impossible is not true or false");
                    impossible = qas[q].at("is_impossible").get<bool>();
                    file.version_2 = true;
                }
                const Json& answers = field(qas[q], "answers", question, Json::value_t::array, path);
                for (size_t n = 0; n < answers.size() && !impossible; ++n) {
                    const std::string answer = question + ".answers[" + std::to_string(n) + "]";
                    SquadAnswer parsed;
                    parsed.text = field(answers[n], "text", answer, Json::value_t::string, path).get<std::string>();
                    const int64_t start = field(answers[n], "answer_start", answer, Json::value_t::number_integer, path).get<int64_t>();
                    const size_t offset = start >= 0 ? byte_offset(context, start) : std::string::npos;
                    HNAS_CHECK(offset != std::string::npos && !parsed.text.empty() && context.compare(offset, parsed.text.size(), parsed.text) == 0,
                               path, ": ", answer, ": \"", parsed.text, "\" is not the context at answer_start ", start,
                               offset == std::string::npos ? std::string(" (beyond the context)")
                                                           : " (the context there reads \"" + context.substr(offset, parsed.text.size()) + "\")");
                    parsed.start = static_cast<int64_t>(offset);
                    example.answers.push_back(parsed);
                }
                HNAS_CHECK(impossible || !example.answers.empty(), path, ": ", question, " has no answers and is not marked is_impossible");
                file.examples.push_back(std::move(example));
            }
        }
    }
    HNAS_CHECK(!file.examples.empty(), path, ": no questions");
    return file;
}

std::vector<SpanFeature> make_span_features(const SquadFile& file, const Tokenizer& tokenizer, const SpanFeatureOptions& options) {
    HNAS_CHECK(options.doc_stride >= 1 && options.max_query >= 1 && options.max_seq > options.max_query + 3,
               "span features: max_seq ", options.max_seq, " leaves no room for a context beside ", options.max_query,
               " question pieces");
    std::vector<SpanFeature> features;
    for (size_t e = 0; e < file.examples.size(); ++e) {
        const SquadExample& example = file.examples[e];
        std::vector<int32_t> query = tokenizer.encode(example.question);
        if (static_cast<int64_t>(query.size()) > options.max_query) query.resize(static_cast<size_t>(options.max_query));
        const ContextPieces context = context_pieces(example, tokenizer);
        const std::pair<int64_t, int64_t> answer = answer_pieces(example, context, tokenizer);
        const size_t room = static_cast<size_t>(options.max_seq) - query.size() - 3;
        const std::vector<Window> windows = context_windows(context.ids.size(), room, static_cast<size_t>(options.doc_stride));
        for (size_t w = 0; w < windows.size(); ++w) features.push_back(window_feature(e, query, context, windows, w, answer));
    }
    return features;
}

SpanBatcher::SpanBatcher(const Tokenizer& tokenizer, SpanDataOptions options) : options_(std::move(options)) {
    file_ = read_squad(options_.path);
    features_ = make_span_features(file_, tokenizer, options_.features);
    std::vector<int64_t> lengths;
    for (const SpanFeature& feature : features_) lengths.push_back(static_cast<int64_t>(feature.ids.size()));
    std::error_code error;
    uint64_t fingerprint = hash_combine(tokenizer.model_hash(), std::filesystem::file_size(options_.path, error));
    for (int64_t value : {options_.features.max_seq, options_.features.doc_stride, options_.features.max_query}) {
        fingerprint = hash_combine(fingerprint, static_cast<uint64_t>(value));
    }
    batches_ = std::make_unique<EpochBatches>(std::move(lengths), options_.batch, options_.shuffle, options_.seed,
                                              options_.epochs, fingerprint, "SQuAD data " + options_.path);
}

std::optional<SpanBatch> SpanBatcher::next() {
    const auto indices = batches_->next();
    if (!indices) return std::nullopt;
    std::vector<const std::vector<int32_t>*> ids, segments;
    std::vector<int32_t> starts, ends;
    SpanBatch batch;
    for (uint32_t index : *indices) {
        const SpanFeature& feature = features_[index];
        ids.push_back(&feature.ids);
        segments.push_back(&feature.segments);
        starts.push_back(feature.start);
        ends.push_back(feature.end);
        batch.feature_index.push_back(index);
    }
    PaddedSequences padded = pad_sequences(ids, segments, options_.batch, options_.features.max_seq);
    batch.input_ids = std::move(padded.input_ids);
    batch.segment_ids = std::move(padded.segment_ids);
    batch.valid = std::move(padded.valid);
    batch.tokens = padded.tokens;
    const auto rows = static_cast<int64_t>(indices->size());
    batch.start_positions = Tensor::from_ints({rows}, starts);
    batch.end_positions = Tensor::from_ints({rows}, ends);
    return batch;
}

}  // namespace hnas::data
