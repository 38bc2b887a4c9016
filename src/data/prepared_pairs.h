// Headline pairs (an article file and a title file, line-aligned: the Gigaword layout) tokenized once
// into memory-mapped shards (`hnas prepare`, docs/data.md), so that millions of pairs start training in
// seconds. A shard holds consecutive line pairs: each pair's article ids and then its title ids, and in
// its index each pair's article end and title end (a pair whose line was left out as damaged is kept,
// empty, so line numbers stay those of the files). The manifest is prepared_text.h's, of format
// "hnas-prepared-pairs", with the pair and left-out counts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/prepared_text.h"
#include "data/tokenizer.h"

namespace hnas::data {

// Tokenizes the pairs of `article_path` and `title_path` into `directory` (as prepare_text: parallel,
// resumable, the manifest last). Throws as LineAlignedCorpus does on files that are not line-aligned
// or hold damaged lines under DamagedLines::reject.
PrepareSummary prepare_pairs(const std::string& article_path, const std::string& title_path, const Tokenizer& tokenizer,
                             const std::string& directory, const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress);

class PreparedPairs {
public:
    // Maps a prepared directory after checking it against the files the config names and its tokenizer
    // (as open_prepared_text). Throws naming the file and what is wrong.
    PreparedPairs(const std::string& directory, const std::string& article_path, const std::string& title_path,
                  const Tokenizer& tokenizer);
    ~PreparedPairs();

    int64_t pairs() const { return pairs_; }
    // LineAlignedCorpus::fingerprint() of the files it was prepared from.
    uint64_t fingerprint() const { return fingerprint_; }
    // visit(line, article ids, title ids) for lines [first, first + count) in order; a left-out pair has
    // neither.
    void read_pairs(int64_t first, int64_t count,
                    const std::function<void(int64_t, std::span<const int32_t>, std::span<const int32_t>)>& visit) const;

private:
    struct Shards;
    std::unique_ptr<Shards> shards_;
    int64_t pairs_ = 0;
    uint64_t fingerprint_ = 0;
};

}  // namespace hnas::data
