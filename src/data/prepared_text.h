// Text corpora tokenized once into memory-mapped shards (`hnas prepare`, docs/data.md), so that a run
// over a corpus larger than memory starts in seconds and its anonymous memory does not grow with it.
//
// A prepared directory holds, per shard (a chunk of about chunk_bytes of one source, cut where a
// document or block ends), `shard-NNNNNN.ids` (the token ids back to back, 2 bytes each when the
// vocabulary fits, else 4, little-endian) and `shard-NNNNNN.idx` (a 32-byte header, then the end of
// each sentence as a token offset within the shard and the end of each document that ends in it as a
// sentence count, both uint32); and `manifest.json`, written last: the format version, the tokenizer's
// hash, each source's path, unit, size and CRC-32C, the counts, and each shard's counts and the
// CRC-32C of its two files. Without a manifest the directory is not prepared data; `plan.json` then
// records an unfinished preparation, which `hnas prepare` resumes (or starts over when its settings
// changed).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/text_io.h"
#include "data/text_corpus.h"
#include "data/tokenizer.h"

namespace hnas::data {

inline constexpr int kPreparedTextVersion = 1;

struct PrepareOptions {
    int threads = 1;                             // chunks tokenized at once
    uint64_t chunk_bytes = uint64_t{64} << 20;   // text per shard (a shard ends at the next document end after it)
    size_t max_line_bytes = kDefaultMaxLineBytes;
    DamagedLines damaged_lines = DamagedLines::reject;
};

struct PrepareProgress {
    uint64_t bytes_done = 0, bytes_total = 0;
    int64_t shards_done = 0, shards_total = 0;
};

struct PrepareSummary {
    uint64_t bytes = 0, tokens = 0, sentences = 0, documents = 0;
    int64_t shards = 0, reused_shards = 0, damaged_lines = 0;
    int id_bytes = 0;
};

// Tokenizes `sources` into `directory` (created if missing) in parallel; resumes an unfinished
// preparation of the same sources and settings; does nothing when the directory already holds them.
// `progress` is called from this thread after each finished shard. Throws naming the file on bad text
// (as read_text), on a directory holding something else, and when a file cannot be written (a full
// disk): no manifest is then written, so nothing there is taken for prepared data.
PrepareSummary prepare_text(const std::vector<TextSource>& sources, const Tokenizer& tokenizer,
                            const std::string& directory, const PrepareOptions& options,
                            const std::function<void(const PrepareProgress&)>& progress);

struct PreparedText {
    TokenCorpus corpus;
    std::vector<uint64_t> source_bytes;  // each source's size when it was prepared
};

// Maps a prepared directory after checking it against the config's `sources` and `tokenizer`: the
// manifest's version, tokenizer hash and sources (a source file still present must have its prepared
// size), each shard's sizes, checksums, ids (inside the vocabulary) and index (increasing offsets
// inside its ids). Throws naming the file and what is wrong.
PreparedText open_prepared_text(const std::string& directory, const std::vector<TextSource>& sources,
                                const Tokenizer& tokenizer);

}  // namespace hnas::data
