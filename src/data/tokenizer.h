// The subword tokenizer: a SentencePiece model (unigram or BPE) or BERT's WordPiece vocabulary
// (src/data/wordpiece.h), with hnas's fixed special ids.
//
// Every hnas model uses the same ids for the special pieces, so batches, losses and checkpoints can
// rely on them: pad 0, unk 1, bos 2, eos 3 (SentencePiece control/unknown pieces, never produced from
// text), and the BERT pieces [CLS] 4, [SEP] 5, [MASK] 6 (user-defined symbols). Models trained by
// train_tokenizer have them; loading a model whose ids differ is an error.
//
// Gigaword marks rare words as `<unk>` (train/valid) or `UNK` (test), under either kind of tokenizer. A whitespace-delimited word that
// is exactly one of these markers encodes to the unk id and never to pieces such as `<`, `unk`, `>`;
// the markers are also removed from the text a model is trained on, so they spend no vocabulary.
// Gigaword's `#` digit placeholders are ordinary text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/enum_names.h"
#include "base/text_io.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace hnas::data {

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;
inline constexpr int32_t kClsId = 4;
inline constexpr int32_t kSepId = 5;
inline constexpr int32_t kMaskId = 6;
inline constexpr int32_t kNumSpecialIds = 7;  // ids below this are special; ordinary pieces follow

// What decode() writes for the unk id: Gigaword's own marker, so outputs compare with references.
inline constexpr std::string_view kUnkText = "<unk>";

// A config's tokenizer: a SentencePiece model trained as unigram or BPE, or BERT's WordPiece vocab.txt
// (loaded, never trained by hnas).
enum class TokenizerType { unigram, bpe, wordpiece };
inline constexpr EnumName<TokenizerType> kTokenizerTypeNames[]{
    {TokenizerType::unigram, "unigram"}, {TokenizerType::bpe, "bpe"}, {TokenizerType::wordpiece, "wordpiece"}};
constexpr const auto& enum_names(TokenizerType) { return kTokenizerTypeNames; }

struct TokenizerTrainOptions {
    std::vector<std::string> inputs;   // UTF-8 text files, one sentence per line
    std::string model_prefix;          // writes <prefix>.model and <prefix>.vocab
    int vocab_size = 8000;             // including the 7 special pieces
    TokenizerType type = TokenizerType::unigram;  // unigram or bpe
    // Lines sampled (reservoir sampling, seeded) from all inputs to train on; 0 = every line. This
    // bounds training time and memory on large corpora.
    int64_t input_sentence_size = 1000000;
    uint64_t seed = 0;                 // drives the sampling above
    double character_coverage = 1.0;   // fraction of characters covered (SentencePiece's option)
    // SentencePiece's EM threads. The trained model depends only on the inputs and these options,
    // this one included (threads split the sums), so keep it fixed for reproducible vocabularies.
    int num_threads = 2;
    DamagedLines damaged_lines = DamagedLines::reject;
};

// Trains a model as described above, quietly (SentencePiece's logging is turned off) and
// deterministically. Throws hnas::Error naming the problem (missing input, empty input, invalid
// UTF-8 with file and line, or SentencePiece's own message).
void train_tokenizer(const TokenizerTrainOptions& options);

// Memoized ids of whole words. SentencePiece segments every whitespace-delimited word on its own (no
// piece crosses a space), so encoding word by word through this cache gives exactly the ids of
// Tokenizer::encode, several times faster on text with a bounded vocabulary such as Gigaword.
// A cache serves one thread; it forgets everything when it holds max_words words, which bounds
// its memory (about 100 bytes a word).
enum class TokenizerKind { sentencepiece, wordpiece };

class EncodeCache {
public:
    explicit EncodeCache(size_t max_words = size_t{1} << 17) : max_words_(max_words) {}

private:
    friend class Tokenizer;
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
    };
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> words_;  // → ids_ range
    std::vector<int32_t> ids_;
    size_t max_words_;
    uint64_t model_hash_ = 0;  // of the tokenizer that filled it
};

// An immutable, cheaply copyable tokenizer; copies share the model, and concurrent use is safe.
class Tokenizer {
public:
    // From a `.model` file written by train_tokenizer (or by SentencePiece with the same ids).
    static Tokenizer load(const std::string& path);
    // From a WordPiece vocab.txt (BERT's; the ids are renumbered, see wordpiece.h).
    static Tokenizer load_wordpiece(const std::string& path);
    // From the bytes of a model (serialized_model()), e.g. as stored in a checkpoint.
    static Tokenizer from_serialized(const std::string& bytes);
    // The symbols "0" … "count−1" as whole words after the special pieces, as a WordPiece vocabulary
    // (paper 002's synthetic tasks): symbol s has id kNumSpecialIds + s, and "17 3" encodes to those ids.
    // 0 symbols: the special ids alone, for a task that reads no text (multiview).
    static Tokenizer symbols(int32_t count);

    TokenizerKind kind() const;
    // The model as bytes, to store in a checkpoint: a SentencePiece model proto, or for WordPiece the
    // line "hnas-wordpiece 1" followed by the vocab.txt text (a proto's first byte is a field tag
    // 0x0A, never the 'h').
    const std::string& serialized_model() const;
    // WordPiece: the vocab.txt line each id came from (-1 for an added bos or eos); SentencePiece: empty.
    const std::vector<int64_t>& source_rows() const;
    // A 64-bit hash of serialized_model(): data positions record which tokenizer made their batches.
    uint64_t model_hash() const;

    int32_t vocab_size() const;

    // The ids of `text`, without bos/eos.
    std::vector<int32_t> encode(std::string_view text) const;
    // Appends the ids of `text` to `out` (no allocation once `out` has grown).
    void encode(std::string_view text, std::vector<int32_t>& out) const;
    // The same ids, through a word cache.
    void encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const;

    // The text of `ids`: pad, bos and eos are dropped, unk becomes the word `<unk>`.
    std::string decode(std::span<const int32_t> ids) const;

    std::string_view piece(int32_t id) const;    // the piece's text, e.g. "▁the"
    int32_t piece_id(std::string_view piece) const;  // kUnkId for a piece not in the vocabulary
    // True if `id` begins a word: its piece starts with SentencePiece's word-boundary mark '▁' (WordPiece:
    // it is not a "##" continuation), or it is unk (which stands for a whole `<unk>` word). Masked-LM masking groups a word-start piece
    // with the continuation pieces after it.
    bool starts_word(int32_t id) const;

private:
    struct State;
    explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
    static Tokenizer from_processor(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                                    const std::string& origin);
    static Tokenizer from_vocabulary(const std::string& vocab_text, const std::string& origin);
    void encode_plain(std::string_view text, std::vector<int32_t>& out) const;

    std::shared_ptr<const State> state_;
};

}  // namespace hnas::data
