// Writing and reading prepared headline pairs (prepared_pairs.h).
#include "data/prepared_pairs.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "base/hash.h"
#include "data/gigaword.h"
#include "data/prepared_shards.h"

namespace hnas::data {

using namespace prepared;

namespace {

constexpr const char* kFormat = "hnas-prepared-pairs";

// A file's size and CRC-32C.
std::pair<uint64_t, uint32_t> size_and_checksum(const std::string& path) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    HNAS_CHECK(file != nullptr, "prepare: cannot open ", path, ": ", std::strerror(errno));
    std::vector<char> block(size_t{4} << 20);
    uint64_t size = 0;
    uint32_t crc = 0;
    for (size_t got; (got = std::fread(block.data(), 1, block.size(), file)) > 0;) {
        crc = crc32c(block.data(), got, crc);
        size += got;
    }
    const bool failed = std::ferror(file) != 0;
    std::fclose(file);
    HNAS_CHECK(!failed, "prepare: cannot read ", path);
    return {size, crc};
}

// Lines of the article file in about `chunk_bytes`, from the average line of its first megabyte.
int64_t lines_per_chunk(const std::string& article_path, uint64_t chunk_bytes) {
    std::FILE* file = std::fopen(article_path.c_str(), "rb");
    HNAS_CHECK(file != nullptr, "prepare: cannot open ", article_path, ": ", std::strerror(errno));
    std::vector<char> head(size_t{1} << 20);
    const size_t got = std::fread(head.data(), 1, head.size(), file);
    std::fclose(file);
    const auto lines = std::max<int64_t>(1, std::count(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(got), '\n'));
    return std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes) * lines / static_cast<int64_t>(std::max<size_t>(got, 1)));
}

// One shard: the pairs of one region, a left-out pair as two empty ends.
ShardStats write_pair_shard(const LineAlignedCorpus& corpus, int64_t region, const Tokenizer& tokenizer, const std::string& stem,
                            int id_bytes) {
    std::vector<int32_t> ids;
    std::vector<uint32_t> ends;
    EncodeCache cache;
    const int64_t first = region * corpus.region_lines();
    const int64_t count = std::min(corpus.region_lines(), corpus.pairs() - first);
    int64_t next = first, left_out = 0;
    auto end_pair = [&] {
        HNAS_CHECK(ids.size() < (uint64_t{1} << 32), "prepare: ", corpus.article_path(), " lines ", first + 1, "-", first + count,
                   " give 2^32 tokens or more; lower the chunk size");
        ends.push_back(static_cast<uint32_t>(ids.size()));
    };
    corpus.read_region(region, [&](int64_t line, std::string_view article, std::string_view title) {
        for (; next < line; ++next, ++left_out) ends.insert(ends.end(), 2, static_cast<uint32_t>(ids.size()));
        tokenizer.encode(article, ids, cache);
        end_pair();
        tokenizer.encode(title, ids, cache);
        end_pair();
        next = line + 1;
    });
    for (; next < first + count; ++next, ++left_out) ends.insert(ends.end(), 2, static_cast<uint32_t>(ids.size()));
    ShardStats stats = write_shard(ids, ends, {}, stem, id_bytes);
    stats.damaged_lines = left_out;
    return stats;
}

}  // namespace

PrepareSummary prepare_pairs(const std::string& article_path, const std::string& title_path, const Tokenizer& tokenizer,
                             const std::string& directory, const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress) {
    HNAS_CHECK(options.chunk_bytes >= 1, "prepare: chunk_bytes must be at least 1");
    const int id_bytes = tokenizer.vocab_size() <= 65536 ? 2 : 4;
    const int64_t chunk_lines = lines_per_chunk(article_path, options.chunk_bytes);
    const LineAlignedCorpus corpus(article_path, title_path, chunk_lines, options.max_line_bytes, options.damaged_lines);
    const auto [article_bytes, article_crc] = size_and_checksum(article_path);
    const auto [title_bytes, title_crc] = size_and_checksum(title_path);
    Preparation preparation;
    preparation.directory = directory;
    preparation.settings = {
        {"format", kFormat},
        {"version", kPreparedTextVersion},
        {"tokenizer", {{"hash", hex64(tokenizer.model_hash())}, {"vocab_size", tokenizer.vocab_size()}}},
        {"id_bytes", id_bytes},
        {"chunk_lines", chunk_lines},
        {"max_line_bytes", options.max_line_bytes},
        {"damaged_lines", name_of(options.damaged_lines)},
        {"sources",
         {{{"path", article_path}, {"bytes", article_bytes}, {"crc32c", hex32(article_crc)}},
          {{"path", title_path}, {"bytes", title_bytes}, {"crc32c", hex32(title_crc)}}}}};
    preparation.shards = corpus.regions();
    preparation.text_bytes = article_bytes + title_bytes;
    // Progress in lines, weighted to bytes: each shard holds about the same share of both files.
    preparation.shard_text_bytes = [&](int64_t k) {
        const int64_t lines = std::min(chunk_lines, corpus.pairs() - k * chunk_lines);
        return static_cast<uint64_t>(static_cast<double>(preparation.text_bytes) * static_cast<double>(lines) /
                                     static_cast<double>(corpus.pairs()));
    };
    preparation.make_shard = [&](int64_t k, const std::string& stem) { return write_pair_shard(corpus, k, tokenizer, stem, id_bytes); };
    preparation.finish_stats = [](int64_t, ShardStats& stats) { stats.ends_source = true; };
    const Prepared done = run_preparation(preparation, options.threads, progress,
                                          {{"pairs", corpus.pairs()}, {"left_out", corpus.left_out()}});
    PrepareSummary summary = summary_of(done, id_bytes);
    summary.sentences = static_cast<uint64_t>(corpus.pairs());
    return summary;
}

struct PreparedPairs::Shards {
    std::vector<MappedShard> mapped;
    std::vector<int64_t> first_pair;  // of each shard, and the total last
};

PreparedPairs::PreparedPairs(const std::string& directory, const std::string& article_path, const std::string& title_path,
                             const Tokenizer& tokenizer)
    : shards_(std::make_unique<Shards>()) {
    const std::string manifest_path = directory + "/manifest.json";
    int id_bytes = 0;
    const Json manifest = open_manifest(directory, kFormat, tokenizer, id_bytes);
    const Json& listed = manifest.at("sources");
    HNAS_CHECK(listed.size() == 2, manifest_path, ": pairs are prepared from 2 files, it lists ", listed.size());
    const uint64_t article_bytes = check_source(listed[0], article_path, directory, manifest_path);
    const uint64_t title_bytes = check_source(listed[1], title_path, directory, manifest_path);
    shards_->mapped = map_shards(directory, manifest, id_bytes, tokenizer.vocab_size(), EndOrder::non_decreasing);
    shards_->first_pair.push_back(0);
    for (const MappedShard& shard : shards_->mapped) {
        const auto ends = static_cast<int64_t>(shard.part.sentence_ends.size());
        HNAS_CHECK(ends % 2 == 0, shard.index.path(), ": ", ends, " ends, not an article end and a title end per pair");
        shards_->first_pair.push_back(shards_->first_pair.back() + ends / 2);
    }
    pairs_ = shards_->first_pair.back();
    const Json counts = manifest.value("counts", Json::object());
    HNAS_CHECK(counts.is_object(), manifest_path, ": counts must be an object, got ", counts.dump());
    const int64_t listed_pairs = json_integer(counts.value("pairs", Json()), 0, INT64_MAX, manifest_path + ": counts.pairs");
    const int64_t left_out = json_integer(counts.value("left_out", Json()), 0, listed_pairs, manifest_path + ": counts.left_out");
    HNAS_CHECK(listed_pairs == pairs_, manifest_path, ": counts.pairs is ", listed_pairs, " but its shards hold ", pairs_);
    fingerprint_ = LineAlignedCorpus::fingerprint_of(article_bytes, title_bytes, pairs_, left_out);
}

PreparedPairs::~PreparedPairs() = default;

void PreparedPairs::read_pairs(int64_t first, int64_t count,
                               const std::function<void(int64_t, std::span<const int32_t>, std::span<const int32_t>)>& visit) const {
    HNAS_CHECK(first >= 0 && count >= 0 && first + count <= pairs_, "prepared pairs: lines ", first, "+", count, " of ", pairs_);
    std::vector<int32_t> article, title;
    auto shard = std::upper_bound(shards_->first_pair.begin(), shards_->first_pair.end(), first) - 1;
    for (int64_t line = first; line < first + count; ++line) {
        while (line >= *(shard + 1)) ++shard;
        const MappedShard& mapped = shards_->mapped[static_cast<size_t>(shard - shards_->first_pair.begin())];
        const auto pair = static_cast<size_t>(line - *shard);
        const uint64_t begin = pair == 0 ? 0 : mapped.part.sentence_ends[2 * pair - 1];
        const uint64_t middle = mapped.part.sentence_ends[2 * pair], end = mapped.part.sentence_ends[2 * pair + 1];
        auto copy = [&](uint64_t from, uint64_t to, std::vector<int32_t>& out) {
            out.clear();
            if (mapped.part.id_bytes == 2) {
                const auto* ids = static_cast<const uint16_t*>(mapped.part.ids);
                out.assign(ids + from, ids + to);
            } else {
                const auto* ids = static_cast<const int32_t*>(mapped.part.ids);
                out.assign(ids + from, ids + to);
            }
        };
        copy(begin, middle, article);
        copy(middle, end, title);
        visit(line, article, title);
    }
}

}  // namespace hnas::data
