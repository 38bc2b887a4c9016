// What prepared text and prepared pairs share (prepared_text.h, prepared_pairs.h): a shard's two files
// and their checks, the manifest's common part, and the preparation itself (resumed, parallel,
// written atomically, the manifest last). A shard's index holds `ends` (uint32 token offsets within the
// shard: sentence ends, or each pair's article and title ends) and `groups` (uint32 counts of ends:
// document ends; none for pairs).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/mapped_file.h"
#include "data/prepared_text.h"
#include "data/text_corpus.h"
#include "data/tokenizer.h"

namespace hnas::data::prepared {

struct ShardStats {
    uint64_t tokens = 0, ends = 0, groups = 0, text_bytes = 0;
    uint32_t ids_crc = 0, index_crc = 0;
    int64_t damaged_lines = 0;
    bool ends_source = false;
};

// Writes `stem`.ids and then `stem`.idx (a shard is whole when its index exists).
ShardStats write_shard(const std::vector<int32_t>& ids, std::span<const uint32_t> ends, std::span<const uint32_t> groups,
                       const std::string& stem, int id_bytes);

// How a shard's ends may follow one another: sentences are never empty, an article or title may be.
enum class EndOrder { increasing, non_decreasing };

struct MappedShard {
    MappedFile ids, index;
    TokenPart part;  // ends as sentence_ends, groups as document_ends
};

// Maps and checks a shard against the manifest's entry (sizes, checksums, the order of its ends, ids
// inside the vocabulary); throws naming the file and what is wrong.
MappedShard map_shard(const std::string& stem, const ShardStats& expected, int id_bytes, int32_t vocab_size, EndOrder order);

std::string shard_name(int64_t k);
std::string hex32(uint32_t value);
std::string hex64(uint64_t value);
Json read_json(const std::string& path, const std::string& what);

// A preparation: what it is of (`settings`, which plan.json and manifest.json hold), its shards as jobs,
// and the work of one job. Returns each shard's stats and how many were reused.
struct Preparation {
    std::string directory;
    Json settings;
    int64_t shards = 0;
    uint64_t text_bytes = 0;                             // all the shards', for the progress
    std::function<uint64_t(int64_t)> shard_text_bytes;   // of shard k
    std::function<ShardStats(int64_t, const std::string&)> make_shard;  // shard k into the stem given
    std::function<void(int64_t, ShardStats&)> finish_stats;             // fills in what the plan knows (ends_source)
};
struct Prepared {
    std::vector<ShardStats> shards;
    int64_t reused = 0;
    bool already = false;  // the manifest was there: nothing was done
    Json manifest;
};
Prepared run_preparation(const Preparation& preparation, int threads,
                         const std::function<void(const PrepareProgress&)>& progress, const Json& extra_counts);

// The manifest of a prepared directory of `format`, checked for its version, tokenizer and id width;
// sets id_bytes. Throws naming the file when it is missing, unfinished or another.
Json open_manifest(const std::string& directory, const std::string& format, const Tokenizer& tokenizer, int& id_bytes);

// Every shard the manifest lists, mapped and checked.
std::vector<MappedShard> map_shards(const std::string& directory, const Json& manifest, int id_bytes, int32_t vocab_size,
                                    EndOrder order);

// Checks a manifest's source entry against the config's path (and, when the file is there, its size).
uint64_t check_source(const Json& listed, const std::string& path, const std::string& directory, const std::string& manifest);

PrepareSummary summary_of(const Prepared& prepared, int id_bytes);

}  // namespace hnas::data::prepared
