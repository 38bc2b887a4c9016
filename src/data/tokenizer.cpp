// Tokenizer: SentencePiece training, loading, id checks, encode/decode with Gigaword's unk markers
// (see tokenizer.h).
#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "base/read_file.h"
#include "base/rng.h"
#include "base/text_io.h"
#include "data/wordpiece.h"

namespace hnas::data {

namespace {

constexpr std::string_view kWordMark = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's word boundary
constexpr std::string_view kWordPieceMagic = "hnas-wordpiece 1\n";
constexpr uint64_t kTrainSampleStream = 0x7A11'5EED;

// SentencePiece skips training sentences longer than its max_sentence_length (4192 bytes), which
// would drop whole documents such as the one-address-per-line State of the Union file. Lines are
// therefore cut at word boundaries into pieces of at most this many bytes; subword statistics only
// see words, so nothing is lost.
constexpr size_t kTrainPieceBytes = 2048;

// The characters SentencePiece's normalizer turns into word boundaries ('\v' it deletes instead).
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f'; }

bool is_unk_marker(std::string_view word) { return word == "<unk>" || word == "UNK"; }

// Calls visit(word) for each whitespace-delimited word of `text`, in order.
template <typename Visit>
void for_each_word(std::string_view text, Visit&& visit) {
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_space(text[i])) ++i;
        const size_t start = i;
        while (i < text.size() && !is_space(text[i])) ++i;
        if (i > start) visit(start, i);
    }
}

uint64_t fnv1a_64(std::string_view bytes) {
    uint64_t hash = 0xCBF29CE484222325ull;
    for (char c : bytes) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001B3ull;
    }
    return hash;
}

// Feeds the sampled training text to SentencePiece.
class VectorSentenceIterator : public sentencepiece::SentenceIterator {
public:
    explicit VectorSentenceIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
    bool done() const override { return index_ >= sentences_.size(); }
    void Next() override { ++index_; }
    const std::string& value() const override { return sentences_[index_]; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
    const std::vector<std::string>& sentences_;
    size_t index_ = 0;
};

// Reservoir sampling (Vitter's algorithm R) of the training text: a uniform sample of `capacity`
// pieces from a stream of unknown length, in bounded memory, reproducible from the seed.
class Reservoir {
public:
    Reservoir(int64_t capacity, uint64_t seed) : capacity_(capacity), rng_(seed, kTrainSampleStream) {}

    void add(std::string piece) {
        ++seen_;
        if (capacity_ == 0 || static_cast<int64_t>(items_.size()) < capacity_) {
            items_.push_back(std::move(piece));
            return;
        }
        const uint64_t slot = rng_.below(static_cast<uint64_t>(seen_));
        if (slot < static_cast<uint64_t>(capacity_)) items_[slot] = std::move(piece);
    }

    const std::vector<std::string>& items() const { return items_; }

private:
    int64_t capacity_;
    Rng rng_;
    int64_t seen_ = 0;
    std::vector<std::string> items_;
};

}  // namespace

struct Tokenizer::State {
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor;  // SentencePiece
    std::unique_ptr<WordPiece> wordpiece;                              // or WordPiece
    std::string serialized;
    uint64_t hash = 0;
    std::vector<std::string> pieces;
    std::vector<uint8_t> starts_word;
};

void train_tokenizer(const TokenizerTrainOptions& options) {
    HNAS_CHECK(!options.inputs.empty(), "tokenizer training: no input files");
    HNAS_CHECK(!options.model_prefix.empty(), "tokenizer training: empty model prefix");
    HNAS_CHECK(options.type != TokenizerType::wordpiece, "tokenizer training: a WordPiece vocabulary is loaded, not ",
               "trained; train \"unigram\" or \"bpe\"");
    HNAS_CHECK(options.vocab_size > kNumSpecialIds, "tokenizer training: vocab_size ", options.vocab_size,
               " leaves no room beside the ", kNumSpecialIds, " special pieces");
    HNAS_CHECK(options.input_sentence_size >= 0, "tokenizer training: negative input_sentence_size");
    HNAS_CHECK(options.character_coverage > 0.0 && options.character_coverage <= 1.0,
               "tokenizer training: character_coverage ", options.character_coverage, " is not in (0, 1]");
    HNAS_CHECK(options.num_threads >= 1, "tokenizer training: num_threads must be at least 1");

    Reservoir sample(options.input_sentence_size, options.seed);
    for (const std::string& path : options.inputs) {
        LineReader reader(path);
        std::string_view line;
        std::string piece;
        while (reader.next(line)) {
            if (!accept_line(line, path, reader.line_number(), options.damaged_lines)) continue;
            for_each_word(line, [&](size_t start, size_t end) {
                const std::string_view word = line.substr(start, end - start);
                if (is_unk_marker(word)) return;
                if (!piece.empty() && piece.size() + 1 + word.size() > kTrainPieceBytes) {
                    sample.add(std::move(piece));
                    piece.clear();
                }
                if (!piece.empty()) piece += ' ';
                piece += word;
            });
            if (!piece.empty()) {
                sample.add(std::move(piece));
                piece.clear();
            }
        }
    }
    std::string files;
    for (const std::string& path : options.inputs) files += (files.empty() ? "" : ", ") + path;
    if (sample.items().empty()) throw Error("tokenizer training: the input files hold no text: " + files);

    const std::unordered_map<std::string, std::string> arguments = {
        {"model_prefix", options.model_prefix},
        {"vocab_size", std::to_string(options.vocab_size)},
        {"model_type", name_of(options.type)},
        {"pad_id", std::to_string(kPadId)},
        {"unk_id", std::to_string(kUnkId)},
        {"bos_id", std::to_string(kBosId)},
        {"eos_id", std::to_string(kEosId)},
        {"user_defined_symbols", "[CLS],[SEP],[MASK]"},
        {"character_coverage", std::to_string(options.character_coverage)},
        {"num_threads", std::to_string(options.num_threads)},
        {"input_sentence_size", "0"},  // the sample above is the whole training set
        {"shuffle_input_sentence", "false"},
        {"minloglevel", "1"},  // SentencePiece logs every EM iteration at INFO level
    };
    VectorSentenceIterator iterator(sample.items());
    const auto status = sentencepiece::SentencePieceTrainer::Train(arguments, &iterator);
    // SentencePiece's "Vocabulary size too high (V). Please set it to a value <= N." names neither the
    // text nor why: a vocabulary sized for a large corpus (a paper config's) asked of a small one.
    const std::string message(status.message());
    const size_t limit_at = message.find("<= ");
    if (message.find("Vocabulary size too high") != std::string::npos && limit_at != std::string::npos) {
        const std::string limit = message.substr(limit_at + 3, message.find('.', limit_at) - limit_at - 3);
        throw Error("tokenizer training: the text of " + files + " makes at most " + limit + " pieces, not the " +
                    std::to_string(options.vocab_size) + " of vocab_size: lower it, or train on the text the config was made " +
                    "for (the paper configs' vocabularies need the full data, e.g. Gigaword's 3.8 M pairs: data/gigaword/README.md)");
    }
    HNAS_CHECK(status.ok(), "tokenizer training (", options.model_prefix, "): SentencePiece: ", status.ToString());
}

Tokenizer Tokenizer::from_processor(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                                    const std::string& origin) {
    auto expect_id = [&](const char* name, int actual, int32_t expected) {
        HNAS_CHECK(actual == expected, origin, ": the tokenizer's ", name, " id is ", actual, ", hnas needs ",
                   expected, " (train the model with hnas vocab)");
    };
    expect_id("pad", processor->pad_id(), kPadId);
    expect_id("unk", processor->unk_id(), kUnkId);
    expect_id("bos", processor->bos_id(), kBosId);
    expect_id("eos", processor->eos_id(), kEosId);
    expect_id("[CLS]", processor->PieceToId("[CLS]"), kClsId);
    expect_id("[SEP]", processor->PieceToId("[SEP]"), kSepId);
    expect_id("[MASK]", processor->PieceToId("[MASK]"), kMaskId);
    const int size = processor->GetPieceSize();
    HNAS_CHECK(size > kNumSpecialIds, origin, ": the tokenizer has only ", size, " pieces");

    auto state = std::make_shared<State>();
    state->serialized = processor->serialized_model_proto();
    state->hash = fnv1a_64(state->serialized);
    state->pieces.reserve(static_cast<size_t>(size));
    state->starts_word.reserve(static_cast<size_t>(size));
    for (int id = 0; id < size; ++id) {
        std::string piece = processor->IdToPiece(id);
        state->starts_word.push_back(id == kUnkId || (id >= kNumSpecialIds && piece.starts_with(kWordMark)) ? 1 : 0);
        state->pieces.push_back(std::move(piece));
    }
    state->processor = std::move(processor);
    return Tokenizer(std::move(state));
}

Tokenizer Tokenizer::load(const std::string& path) {
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->Load(path);
    HNAS_CHECK(status.ok(), "cannot load tokenizer model ", path, ": ", status.ToString());
    return from_processor(std::move(processor), path);
}

Tokenizer Tokenizer::from_vocabulary(const std::string& vocab_text, const std::string& origin) {
    auto state = std::make_shared<State>();
    state->wordpiece = std::make_unique<WordPiece>(vocab_text, origin);
    state->serialized = std::string(kWordPieceMagic) + vocab_text;
    state->hash = fnv1a_64(state->serialized);
    state->pieces = state->wordpiece->pieces();
    for (size_t id = 0; id < state->pieces.size(); ++id) {
        const bool continuation = state->pieces[id].starts_with("##");
        state->starts_word.push_back(id == kUnkId || (id >= kNumSpecialIds && !continuation) ? 1 : 0);
    }
    return Tokenizer(std::move(state));
}

Tokenizer Tokenizer::symbols(int32_t count) {
    HNAS_CHECK(count >= 0, "symbol tokenizer: needs a count of symbols >= 0, got ", count);
    std::string vocab = "[PAD]\n[UNK]\n[BOS]\n[EOS]\n[CLS]\n[SEP]\n[MASK]";
    for (int32_t symbol = 0; symbol < count; ++symbol) vocab.append("\n").append(std::to_string(symbol));
    return from_vocabulary(vocab, "symbol vocabulary");
}

Tokenizer Tokenizer::load_wordpiece(const std::string& path) {
    return from_vocabulary(read_file(path, "the WordPiece vocabulary"), path);
}

TokenizerKind Tokenizer::kind() const { return state_->wordpiece ? TokenizerKind::wordpiece : TokenizerKind::sentencepiece; }

const std::vector<int64_t>& Tokenizer::source_rows() const {
    static const std::vector<int64_t> none;
    return state_->wordpiece ? state_->wordpiece->source_rows() : none;
}

Tokenizer Tokenizer::from_serialized(const std::string& bytes) {
    if (bytes.starts_with(kWordPieceMagic)) {
        return from_vocabulary(bytes.substr(kWordPieceMagic.size()), "serialized WordPiece vocabulary");
    }
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->LoadFromSerializedProto(bytes);
    HNAS_CHECK(status.ok(), "cannot load tokenizer model from ", bytes.size(), " serialized bytes: ",
               status.ToString());
    return from_processor(std::move(processor), "serialized tokenizer model");
}

const std::string& Tokenizer::serialized_model() const { return state_->serialized; }

uint64_t Tokenizer::model_hash() const { return state_->hash; }

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(state_->pieces.size()); }

bool Tokenizer::starts_word(int32_t id) const {
    HNAS_CHECK(id >= 0 && id < vocab_size(), "tokenizer.starts_word: id ", id, " is outside the vocabulary of ",
               vocab_size());
    return state_->starts_word[static_cast<size_t>(id)] != 0;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
    if (is_blank(text)) return;
    if (state_->wordpiece) {
        state_->wordpiece->encode(text, out);
        return;
    }
    thread_local std::vector<int> ids;
    const auto status = state_->processor->Encode(text, &ids);
    HNAS_CHECK(status.ok(), "tokenizer: cannot encode text: ", status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
    // Most lines hold no marker: encode them in one call.
    if (text.find("<unk>") == std::string_view::npos && text.find("UNK") == std::string_view::npos) {
        encode_plain(text, out);
        return;
    }
    // SentencePiece never lets a piece cross a space, so encoding the text between markers
    // separately gives the same pieces as encoding it whole.
    size_t segment_start = 0;
    for_each_word(text, [&](size_t start, size_t end) {
        if (!is_unk_marker(text.substr(start, end - start))) return;
        encode_plain(text.substr(segment_start, start - segment_start), out);
        out.push_back(kUnkId);
        segment_start = end;
    });
    encode_plain(text.substr(segment_start), out);
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const {
    if (cache.model_hash_ != state_->hash) {
        cache.words_.clear();
        cache.ids_.clear();
        cache.model_hash_ = state_->hash;
    }
    for_each_word(text, [&](size_t start, size_t end) {
        const std::string_view word = text.substr(start, end - start);
        if (is_unk_marker(word)) {
            out.push_back(kUnkId);
            return;
        }
        auto found = cache.words_.find(word);
        if (found == cache.words_.end()) {
            if (cache.words_.size() >= cache.max_words_) {
                cache.words_.clear();
                cache.ids_.clear();
            }
            const size_t begin = cache.ids_.size();
            encode_plain(word, cache.ids_);
            found = cache.words_
                        .emplace(std::string(word), std::make_pair(static_cast<uint32_t>(begin),
                                                                   static_cast<uint32_t>(cache.ids_.size() - begin)))
                        .first;
        }
        const auto [begin, count] = found->second;
        out.insert(out.end(), cache.ids_.begin() + begin, cache.ids_.begin() + begin + count);
    });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    std::vector<int32_t> out;
    encode(text, out);
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string text;
    for (int32_t id : ids) {
        HNAS_CHECK(id >= 0 && id < vocab_size(), "tokenizer.decode: id ", id, " is outside the vocabulary of ",
                   vocab_size());
        if (id == kPadId || id == kBosId || id == kEosId) continue;
        if (id == kUnkId) {
            text += ' ';
            text += kUnkText;
            continue;
        }
        const std::string& piece = state_->pieces[static_cast<size_t>(id)];
        if (state_->wordpiece) {
            // "##" pieces continue the word before them
            if (piece.starts_with("##")) {
                text.append(piece, 2);
            } else {
                text.append(" ").append(piece);
            }
            continue;
        }
        size_t i = 0;
        while (i < piece.size()) {
            if (piece.compare(i, kWordMark.size(), kWordMark) == 0) {
                text += ' ';
                i += kWordMark.size();
            } else {
                text += piece[i++];
            }
        }
    }
    // The first word's boundary mark (SentencePiece's dummy prefix; WordPiece's separating space) is
    // not a space of the text.
    if (!text.empty() && text.front() == ' ') text.erase(0, 1);
    return text;
}

std::string_view Tokenizer::piece(int32_t id) const {
    HNAS_CHECK(id >= 0 && id < vocab_size(), "tokenizer.piece: id ", id, " is outside the vocabulary of ",
               vocab_size());
    return state_->pieces[static_cast<size_t>(id)];
}

int32_t Tokenizer::piece_id(std::string_view piece) const {
    return state_->wordpiece ? state_->wordpiece->id(piece) : state_->processor->PieceToId(piece);
}

}  // namespace hnas::data
