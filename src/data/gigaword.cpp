// The line-aligned corpus index and the streamed, windowed Gigaword batch pipeline (see gigaword.h).
#include "data/gigaword.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <span>
#include <system_error>

#include "base/check.h"
#include "data/prefetch.h"
#include "data/prepared_pairs.h"

namespace hnas::data {

namespace {

// Purposes of the derived random streams (batching.h).
constexpr uint64_t kRegionOrderStream = 0x5E9'0001;
constexpr uint64_t kWindowStream = 0x5E9'0002;

uint64_t checked_file_size(const std::string& path) {
    std::error_code error;
    const uint64_t size = std::filesystem::file_size(path, error);
    HNAS_CHECK(!error, "cannot open ", path, ": ", error.message());
    HNAS_CHECK(size > 0, path, " is empty");
    return size;
}

}  // namespace

LineAlignedCorpus::LineAlignedCorpus(std::string article_path, std::string title_path, int64_t region_lines,
                                     size_t max_line_bytes, DamagedLines damaged)
    : article_path_(std::move(article_path)),
      title_path_(std::move(title_path)),
      article_bytes_(checked_file_size(article_path_)),
      title_bytes_(checked_file_size(title_path_)),
      max_line_bytes_(max_line_bytes),
      region_lines_(region_lines) {
    HNAS_CHECK(region_lines_ >= 1, "line-aligned corpus: region_lines must be positive");
    LineReader article_reader(article_path_, max_line_bytes), title_reader(title_path_, max_line_bytes);
    std::string_view article, title;
    while (true) {
        const std::pair<uint64_t, uint64_t> offsets(article_reader.offset(), title_reader.offset());
        const bool has_article = article_reader.next(article);
        const bool has_title = title_reader.next(title);
        if (!has_article || !has_title) {
            if (has_article != has_title) {
                LineReader& longer = has_article ? article_reader : title_reader;
                const LineReader& shorter = has_article ? title_reader : article_reader;
                std::string_view rest;
                while (longer.next(rest)) {
                }
                throw Error(concat_message("line counts differ: ", article_path_, " has ", article_reader.line_number(),
                                           " lines but ", title_path_, " has ", title_reader.line_number(), " (",
                                           shorter.path(), " ends at line ", shorter.line_number(), ")"));
            }
            break;
        }
        if (pairs_ % region_lines_ == 0) region_offsets_.push_back(offsets);
        ++pairs_;
        const bool good_article = accept_line(article, article_path_, pairs_, damaged);
        if (!accept_line(title, title_path_, pairs_, damaged) || !good_article) left_out_.push_back(pairs_ - 1);
    }
    fingerprint_ = fingerprint_of(article_bytes_, title_bytes_, pairs_, left_out());
}

uint64_t LineAlignedCorpus::fingerprint_of(uint64_t article_bytes, uint64_t title_bytes, int64_t pairs, int64_t left_out) {
    uint64_t fingerprint = hash_combine(hash_combine(hash_combine(0, article_bytes), title_bytes), static_cast<uint64_t>(pairs));
    return left_out > 0 ? hash_combine(fingerprint, static_cast<uint64_t>(left_out)) : fingerprint;
}

void LineAlignedCorpus::read_region(int64_t region,
                                    const std::function<void(int64_t, std::string_view, std::string_view)>& visit) const {
    HNAS_CHECK(region >= 0 && region < regions(), "line-aligned corpus: region ", region, " of ", regions());
    const int64_t first = region * region_lines_;
    const int64_t count = std::min(region_lines_, pairs_ - first);
    const auto [article_offset, title_offset] = region_offsets_[static_cast<size_t>(region)];
    LineReader article_reader(article_path_, max_line_bytes_), title_reader(title_path_, max_line_bytes_);
    article_reader.seek(article_offset, first + 1);
    title_reader.seek(title_offset, first + 1);
    auto left_out = std::lower_bound(left_out_.begin(), left_out_.end(), first);
    std::string_view article, title;
    for (int64_t i = 0; i < count; ++i) {
        const bool has_article = article_reader.next(article);
        const bool has_title = title_reader.next(title);
        HNAS_CHECK(has_article && has_title, has_article ? title_path_ : article_path_, " ends at line ",
                   first + i, " but had ", pairs_, " lines when it was opened: the file changed");
        if (left_out != left_out_.end() && *left_out == first + i) {
            ++left_out;
            continue;
        }
        visit(first + i, article, title);
    }
}

namespace {

// The synchronous pipeline behind Seq2SeqBatcher (driven by PrefetchedPipeline).
class Seq2SeqEngine {
public:
    Seq2SeqEngine(Tokenizer tokenizer, Seq2SeqDataOptions options)
        : tokenizer_(std::move(tokenizer)),
          options_(validated(std::move(options))),
          region_lines_(std::max<int64_t>(1, options_.shuffle_buffer / options_.shuffle_regions)) {
        if (options_.prepared.empty()) {
            text_ = std::make_unique<LineAlignedCorpus>(options_.article_path, options_.title_path, region_lines_,
                                                        options_.max_line_bytes, options_.damaged_lines);
        } else {
            prepared_ = std::make_unique<PreparedPairs>(options_.prepared, options_.article_path, options_.title_path, tokenizer_);
        }
        regions_ = (pairs() + region_lines_ - 1) / region_lines_;
        windows_per_epoch_ = (regions_ + options_.shuffle_regions - 1) / options_.shuffle_regions;
        uint64_t hash = hash_combine(text_ ? text_->fingerprint() : prepared_->fingerprint(), tokenizer_.model_hash());
        for (int64_t value : {options_.max_source, options_.max_target, options_.shuffle_buffer,
                              options_.shuffle_regions, static_cast<int64_t>(options_.shuffle),
                              options_.batch.max_sentences, options_.batch.max_tokens}) {
            hash = hash_combine(hash, static_cast<uint64_t>(value));
        }
        hash = hash_padding(hash, options_.batch);
        position_.fingerprint = hash_combine(hash, options_.seed);
    }

    std::optional<Seq2SeqBatch> produce() {
        while (options_.epochs == 0 || position_.epoch < options_.epochs) {
            load_window();
            if (!batches_.empty()) {
                Seq2SeqBatch batch = build(batches_[static_cast<size_t>(position_.batch)]);
                position_.examples += batch.source_ids.dim(0);
                if (++position_.batch == static_cast<int64_t>(batches_.size())) next_window();
                return batch;
            }
            next_window();  // every pair of this window was blank
        }
        return std::nullopt;
    }

    DataPosition position() const { return position_; }

    void restore(const DataPosition& position) {
        HNAS_CHECK(position.fingerprint == position_.fingerprint,
                   "data position: saved for different Gigaword data or options (fingerprint ", position.fingerprint,
                   ", this pipeline ", position_.fingerprint, ")");
        HNAS_CHECK(position.window < windows_per_epoch_, "data position: window ", position.window,
                   " does not exist (an epoch has ", windows_per_epoch_, ")");
        position_ = position;
        loaded_ = false;
    }

    int64_t pairs() const { return text_ ? text_->pairs() : prepared_->pairs(); }
    int64_t windows_per_epoch() const { return windows_per_epoch_; }

private:
    struct Example {
        int64_t line;
        size_t begin;  // source ids at tokens_[begin, begin + source), target ids right after
        int32_t source, target;
    };

    static Seq2SeqDataOptions validated(Seq2SeqDataOptions options) {
        HNAS_CHECK(options.max_source >= 1, "gigaword data: max_source must be at least 1");
        HNAS_CHECK(options.max_target >= 2, "gigaword data: max_target must be at least 2 (a title piece and eos)");
        HNAS_CHECK(options.shuffle_buffer >= 1, "gigaword data: shuffle_buffer must be positive");
        HNAS_CHECK(options.shuffle_regions >= 1 && options.shuffle_regions <= options.shuffle_buffer,
                   "gigaword data: shuffle_regions must be in [1, shuffle_buffer]");
        HNAS_CHECK(options.epochs >= 0 && options.prefetch >= 0, "gigaword data: epochs and prefetch must not be negative");
        check_batch_options(options.batch, std::max(options.max_source, options.max_target), "gigaword data");
        return options;
    }

    void next_window() {
        position_.batch = 0;
        if (++position_.window == windows_per_epoch_) {
            HNAS_CHECK(position_.examples > 0, options_.article_path, ", ", options_.title_path,
                       ": no line pair has both a non-empty article and a non-empty title");
            position_.window = 0;
            ++position_.epoch;
            position_.examples = 0;
        }
    }

    // visit(line, article ids, title ids) for each pair of a region: tokenized from the files, or
    // prepared (where a left-out pair comes with neither).
    void read_region(int64_t region, const std::function<void(int64_t, std::span<const int32_t>, std::span<const int32_t>)>& visit) {
        if (prepared_) {
            const int64_t first = region * region_lines_;
            prepared_->read_pairs(first, std::min(region_lines_, pairs() - first), visit);
            return;
        }
        text_->read_region(region, [&](int64_t line, std::string_view article, std::string_view title) {
            article_ids_.clear();
            title_ids_.clear();
            tokenizer_.encode(article, article_ids_, cache_);
            tokenizer_.encode(title, title_ids_, cache_);
            visit(line, article_ids_, title_ids_);
        });
    }

    // Reads the regions of the position's window and plans its batches.
    void load_window() {
        if (loaded_ && loaded_epoch_ == position_.epoch && loaded_window_ == position_.window) return;
        if (region_order_epoch_ != position_.epoch) {
            region_order_.resize(static_cast<size_t>(regions_));
            std::iota(region_order_.begin(), region_order_.end(), int64_t{0});
            if (options_.shuffle) {
                Rng rng = derive_rng(options_.seed, kRegionOrderStream, static_cast<uint64_t>(position_.epoch));
                shuffle_in_place(region_order_, rng);
            }
            region_order_epoch_ = position_.epoch;
        }
        const size_t first = static_cast<size_t>(position_.window * options_.shuffle_regions);
        const size_t last = std::min(region_order_.size(), first + static_cast<size_t>(options_.shuffle_regions));
        std::vector<int64_t> regions(region_order_.begin() + static_cast<std::ptrdiff_t>(first),
                                     region_order_.begin() + static_cast<std::ptrdiff_t>(last));
        std::sort(regions.begin(), regions.end());  // read forwards through the files

        tokens_.clear();
        examples_.clear();
        const size_t max_source = static_cast<size_t>(options_.max_source);
        const size_t max_title = static_cast<size_t>(options_.max_target - 1);
        for (int64_t region : regions) {
            read_region(region, [&](int64_t line, std::span<const int32_t> article, std::span<const int32_t> title) {
                const size_t source = std::min(article.size(), max_source), target = std::min(title.size(), max_title);
                if (source == 0 || target == 0) return;
                const size_t begin = tokens_.size();
                tokens_.insert(tokens_.end(), article.begin(), article.begin() + static_cast<std::ptrdiff_t>(source));
                tokens_.insert(tokens_.end(), title.begin(), title.begin() + static_cast<std::ptrdiff_t>(target));
                examples_.push_back({line, begin, static_cast<int32_t>(source), static_cast<int32_t>(target)});
            });
        }

        // Bucket by source length, then target length; a row costs its longer side (title + eos).
        std::vector<uint64_t> keys(examples_.size());
        std::vector<int64_t> sizes(examples_.size());
        for (size_t i = 0; i < examples_.size(); ++i) {
            keys[i] = static_cast<uint64_t>(examples_[i].source) * static_cast<uint64_t>(options_.max_target + 1) +
                      static_cast<uint64_t>(examples_[i].target);
            sizes[i] = std::max<int64_t>(examples_[i].source, examples_[i].target + 1);
        }
        Rng rng = derive_rng(options_.seed, kWindowStream, static_cast<uint64_t>(position_.epoch),
                             static_cast<uint64_t>(position_.window));
        batches_ = plan_batches(keys, sizes, options_.batch, options_.shuffle ? &rng : nullptr);
        HNAS_CHECK(position_.batch < static_cast<int64_t>(batches_.size()) || (batches_.empty() && position_.batch == 0),
                   "data position: batch ", position_.batch, " of window ", position_.window, " does not exist (it has ",
                   batches_.size(), " batches)");
        loaded_ = true;
        loaded_epoch_ = position_.epoch;
        loaded_window_ = position_.window;
    }

    Seq2SeqBatch build(const std::vector<uint32_t>& rows) const {
        int64_t source_len = 0, target_len = 0;
        for (uint32_t row : rows) {
            source_len = std::max<int64_t>(source_len, examples_[row].source);
            target_len = std::max<int64_t>(target_len, examples_[row].target + 1);
        }
        source_len = padded_length(source_len, options_.batch, options_.max_source);
        target_len = padded_length(target_len, options_.batch, options_.max_target);
        const int64_t batch_size = static_cast<int64_t>(rows.size());
        Seq2SeqBatch batch;
        batch.source_ids = Tensor::zeros({batch_size, source_len}, DType::i32);
        batch.source_valid = Tensor::zeros({batch_size, source_len});
        batch.target_input = Tensor::zeros({batch_size, target_len}, DType::i32);
        batch.target_output = Tensor::zeros({batch_size, target_len}, DType::i32);
        batch.target_valid = Tensor::zeros({batch_size, target_len});
        batch.example_index.reserve(rows.size());
        for (int64_t b = 0; b < batch_size; ++b) {
            const Example& example = examples_[rows[static_cast<size_t>(b)]];
            const int32_t* source = tokens_.data() + example.begin;
            const int32_t* target = source + example.source;
            int32_t* source_ids = batch.source_ids.ints() + b * source_len;
            float* source_valid = batch.source_valid.data() + b * source_len;
            std::copy(source, source + example.source, source_ids);
            std::fill(source_valid, source_valid + example.source, 1.0f);
            int32_t* input = batch.target_input.ints() + b * target_len;
            int32_t* output = batch.target_output.ints() + b * target_len;
            float* valid = batch.target_valid.data() + b * target_len;
            input[0] = kBosId;
            std::copy(target, target + example.target, input + 1);
            std::copy(target, target + example.target, output);
            output[example.target] = kEosId;
            std::fill(valid, valid + example.target + 1, 1.0f);
            batch.example_index.push_back(example.line);
            batch.source_tokens += example.source;
            batch.target_tokens += example.target + 1;
        }
        return batch;
    }

    Tokenizer tokenizer_;
    EncodeCache cache_;
    Seq2SeqDataOptions options_;
    int64_t region_lines_, regions_ = 0, windows_per_epoch_ = 0;
    std::unique_ptr<LineAlignedCorpus> text_;   // the files, when not prepared
    std::unique_ptr<PreparedPairs> prepared_;   // else their prepared form
    std::vector<int32_t> article_ids_, title_ids_;
    DataPosition position_;

    int64_t region_order_epoch_ = -1;
    std::vector<int64_t> region_order_;
    bool loaded_ = false;
    int64_t loaded_epoch_ = -1, loaded_window_ = -1;
    std::vector<int32_t> tokens_;
    std::vector<Example> examples_;
    std::vector<std::vector<uint32_t>> batches_;
};

}  // namespace

struct Seq2SeqBatcher::Impl {
    Impl(Seq2SeqEngine engine, size_t prefetch) : pipeline(std::move(engine), prefetch) {}
    PrefetchedPipeline<Seq2SeqEngine, Seq2SeqBatch> pipeline;
};

Seq2SeqBatcher::Seq2SeqBatcher(Tokenizer tokenizer, Seq2SeqDataOptions options) {
    const size_t prefetch = static_cast<size_t>(std::max<int64_t>(0, options.prefetch));
    impl_ = std::make_unique<Impl>(Seq2SeqEngine(std::move(tokenizer), std::move(options)), prefetch);
}

Seq2SeqBatcher::~Seq2SeqBatcher() = default;

std::optional<Seq2SeqBatch> Seq2SeqBatcher::next() { return impl_->pipeline.next(); }
DataPosition Seq2SeqBatcher::position() const { return impl_->pipeline.position(); }
void Seq2SeqBatcher::restore(const DataPosition& position) { impl_->pipeline.restore(position); }
int64_t Seq2SeqBatcher::pairs() const { return impl_->pipeline.engine().pairs(); }
int64_t Seq2SeqBatcher::windows_per_epoch() const { return impl_->pipeline.engine().windows_per_epoch(); }

}  // namespace hnas::data
