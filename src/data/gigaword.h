// Gigaword headline generation data (Rush et al. 2015 format: an article file and a title file,
// line-aligned, one example per line), streamed from disk into padded Seq2SeqBatches.
//
// Streaming and shuffling. Opening the files makes one pass that checks them (equal line counts,
// UTF-8, line lengths) and remembers the byte offset of every `shuffle_buffer / shuffle_regions`-th
// line, cutting the corpus into regions. Each epoch visits the regions in a seeded random order,
// `shuffle_regions` at a time: such a window (at most shuffle_buffer examples) is read and tokenized,
// bucketed by length into batches (batching.h), and the batches are delivered in random order. Only
// one window is in memory at a time, so memory is bounded by the shuffle buffer, not the corpus
// (the full 3.8M-pair training split works the same as the bundled 35k pairs), while each window
// mixes examples from regions spread across the whole file.
//
// Examples: the article's pieces cut to max_source; the title's pieces cut to max_target - 1, so the
// decoder's bos + title and title + eos both fit in max_target positions. Pairs whose article or
// title has no pieces (blank lines) are skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/text_io.h"
#include "data/batch.h"
#include "data/batching.h"
#include "data/tokenizer.h"

namespace hnas::data {

// The checked line index of an article/title file pair, read region by region.
class LineAlignedCorpus {
public:
    // One pass over both files. Throws (naming files and lines) if a file cannot be opened or is
    // empty, if the line counts differ (with both counts and the line where the shorter file ends),
    // on damaged lines under DamagedLines::reject (a pair with a damaged line is left out under skip)
    // and on lines longer than max_line_bytes.
    LineAlignedCorpus(std::string article_path, std::string title_path, int64_t region_lines,
                      size_t max_line_bytes = kDefaultMaxLineBytes, DamagedLines damaged = DamagedLines::reject);

    int64_t pairs() const { return pairs_; }  // line pairs, left-out ones included
    int64_t left_out() const { return static_cast<int64_t>(left_out_.size()); }
    int64_t regions() const { return static_cast<int64_t>(region_offsets_.size()); }
    // Hash of the files' sizes and line count (for data positions).
    uint64_t fingerprint() const { return fingerprint_; }
    const std::string& article_path() const { return article_path_; }
    const std::string& title_path() const { return title_path_; }
    int64_t region_lines() const { return region_lines_; }

    // Calls visit(line_index, article, title) for each pair of region `region` in file order;
    // line_index is 0-based; left-out pairs are not visited. Throws if the files have changed since
    // they were opened. Reads through readers of its own, so regions may be read on several threads.
    void read_region(int64_t region,
                     const std::function<void(int64_t, std::string_view, std::string_view)>& visit) const;

    // The fingerprint of files of these sizes holding `pairs` line pairs, `left_out` of them damaged.
    static uint64_t fingerprint_of(uint64_t article_bytes, uint64_t title_bytes, int64_t pairs, int64_t left_out);

private:
    std::string article_path_, title_path_;
    uint64_t article_bytes_, title_bytes_;
    size_t max_line_bytes_;
    int64_t region_lines_;
    int64_t pairs_ = 0;
    std::vector<std::pair<uint64_t, uint64_t>> region_offsets_;  // byte offsets of each region's first line
    std::vector<int64_t> left_out_;                              // 0-based indices of damaged pairs, ascending
    uint64_t fingerprint_ = 0;
};

struct Seq2SeqDataOptions {
    std::string article_path, title_path;
    std::string prepared;  // a directory `hnas prepare` made of the two files, read in their place (prepared_pairs.h)
    int64_t max_source = 128;  // article pieces kept
    int64_t max_target = 64;   // decoder positions: title pieces kept are max_target - 1
    size_t max_line_bytes = kDefaultMaxLineBytes;
    DamagedLines damaged_lines = DamagedLines::reject;
    int64_t shuffle_buffer = 65536;  // examples in memory at once (one window)
    int64_t shuffle_regions = 16;    // regions of the file mixed in one window
    bool shuffle = true;             // false: regions in file order, batches in length order
    uint64_t seed = 0;
    BatchOptions batch;
    int64_t epochs = 0;    // next() ends after this many epochs; 0 = never
    int64_t prefetch = 4;  // batches prepared ahead on a background thread; 0 = on the caller's thread
};

// The Gigaword pipeline: files → tokenizer → shuffle windows → length-bucketed, padded batches.
class Seq2SeqBatcher {
public:
    // Opens and checks the files (see LineAlignedCorpus) and validates the options.
    Seq2SeqBatcher(Tokenizer tokenizer, Seq2SeqDataOptions options);
    ~Seq2SeqBatcher();
    Seq2SeqBatcher(const Seq2SeqBatcher&) = delete;
    Seq2SeqBatcher& operator=(const Seq2SeqBatcher&) = delete;

    // The next batch, crossing epoch boundaries; std::nullopt after `epochs` epochs. Errors of the
    // background thread are rethrown here.
    std::optional<Seq2SeqBatch> next();

    // The position of the batch next() will return (after the batches already returned).
    DataPosition position() const;
    // Continue from a saved position: the following batches are those an uninterrupted run
    // delivers from there. Throws if the position comes from differently configured data.
    void restore(const DataPosition& position);

    int64_t pairs() const;              // line pairs in the files
    int64_t windows_per_epoch() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace hnas::data
