// Writing and reading prepared text (prepared_text.h): the chunk plan, the shards, the manifest.
#include "data/prepared_text.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "base/hash.h"
#include "data/prepared_shards.h"

namespace hnas::data {

using namespace prepared;

namespace {

constexpr const char* kFormat = "hnas-prepared-text";

// A source as the plan sees it: its size, its checksum and the chunks it is read in.
struct SourcePlan {
    uint64_t bytes = 0;
    uint32_t crc = 0;
    std::vector<SourceChunk> chunks;
};

// One pass over a source: its checksum and its chunks, each ending after the first line at or past
// chunk_bytes that ends a document or block (any line for DocumentUnit::line, a blank line otherwise),
// so that reading the chunks one by one gives the sentences and documents reading the file whole does.
SourcePlan plan_source(const TextSource& source, uint64_t chunk_bytes) {
    std::FILE* file = std::fopen(source.path.c_str(), "rb");
    HNAS_CHECK(file != nullptr, "prepare: cannot open ", source.path, ": ", std::strerror(errno));
    SourcePlan plan;
    std::vector<char> block(size_t{4} << 20);
    SourceChunk chunk;
    uint64_t offset = 0;
    int64_t line_number = 0;  // lines finished so far
    bool line_in_block = true;
    for (;;) {
        const size_t got = std::fread(block.data(), 1, block.size(), file);
        if (got == 0) break;
        plan.crc = crc32c(block.data(), got, plan.crc);
        const char* begin = block.data();
        const char* end = begin + got;
        for (const char* p = begin; p < end;) {
            const char* newline = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
            if (newline == nullptr) {
                line_in_block = false;  // the line continues in the next block
                break;
            }
            const uint64_t after = offset + static_cast<uint64_t>(newline + 1 - begin);
            ++line_number;
            if (after - chunk.begin >= chunk_bytes) {
                // A line split over two blocks is not looked at: the cut then waits for the next one.
                const std::string_view line(p, static_cast<size_t>(newline - p));
                const bool ends_document = source.unit == DocumentUnit::line ||
                                           (line_in_block && is_blank(line) && find_control_byte(line) == std::string_view::npos);
                if (ends_document) {
                    chunk.end = after;
                    chunk.ends_file = false;
                    plan.chunks.push_back(chunk);
                    chunk = SourceChunk{after, 0, line_number + 1, true};
                }
            }
            line_in_block = true;
            p = newline + 1;
        }
        offset += got;
    }
    const bool failed = std::ferror(file) != 0;
    std::fclose(file);
    HNAS_CHECK(!failed, "prepare: cannot read ", source.path);
    HNAS_CHECK(offset > 0, "prepare: ", source.path, " is empty");
    plan.bytes = offset;
    if (chunk.begin < offset) {
        chunk.end = offset;
        plan.chunks.push_back(chunk);
    } else {
        plan.chunks.back().ends_file = true;
    }
    return plan;
}

Json sources_json(const std::vector<TextSource>& sources, const std::vector<SourcePlan>& plans) {
    Json list = Json::array();
    for (size_t i = 0; i < sources.size(); ++i) {
        list.push_back({{"path", sources[i].path}, {"unit", name_of(sources[i].unit)}, {"bytes", plans[i].bytes},
                        {"crc32c", hex32(plans[i].crc)}});
    }
    return list;
}

struct Job {
    size_t source;
    SourceChunk chunk;
};

}  // namespace

PrepareSummary prepare_text(const std::vector<TextSource>& sources, const Tokenizer& tokenizer,
                            const std::string& directory, const PrepareOptions& options,
                            const std::function<void(const PrepareProgress&)>& progress) {
    HNAS_CHECK(!sources.empty(), "prepare: no text sources");
    HNAS_CHECK(options.chunk_bytes >= 1, "prepare: chunk_bytes must be at least 1");
    const int id_bytes = tokenizer.vocab_size() <= 65536 ? 2 : 4;
    std::vector<SourcePlan> plans;
    std::vector<Job> jobs;
    uint64_t text_bytes = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
        plans.push_back(plan_source(sources[i], options.chunk_bytes));
        for (const SourceChunk& chunk : plans.back().chunks) jobs.push_back({i, chunk});
        text_bytes += plans.back().bytes;
    }
    Preparation preparation;
    preparation.directory = directory;
    preparation.settings = {{"format", kFormat},
                            {"version", kPreparedTextVersion},
                            {"tokenizer", {{"hash", hex64(tokenizer.model_hash())}, {"vocab_size", tokenizer.vocab_size()}}},
                            {"id_bytes", id_bytes},
                            {"chunk_bytes", options.chunk_bytes},
                            {"max_line_bytes", options.max_line_bytes},
                            {"damaged_lines", name_of(options.damaged_lines)},
                            {"sources", sources_json(sources, plans)}};
    preparation.shards = static_cast<int64_t>(jobs.size());
    preparation.text_bytes = text_bytes;
    preparation.shard_text_bytes = [&](int64_t k) { return jobs[static_cast<size_t>(k)].chunk.end - jobs[static_cast<size_t>(k)].chunk.begin; };
    preparation.make_shard = [&](int64_t k, const std::string& stem) {
        const Job& job = jobs[static_cast<size_t>(k)];
        TokenizedText text;
        read_text(sources[job.source], job.chunk, tokenizer, options.max_line_bytes, options.damaged_lines, text);
        HNAS_CHECK(text.ids.size() < (uint64_t{1} << 32), "prepare: ", sources[job.source].path, " bytes ", job.chunk.begin, "-",
                   job.chunk.end, " give 2^32 tokens or more; lower the chunk size");
        ShardStats stats = write_shard(text.ids, text.sentence_ends, text.document_ends, stem, id_bytes);
        stats.damaged_lines = text.damaged_lines;
        return stats;
    };
    preparation.finish_stats = [&](int64_t k, ShardStats& stats) { stats.ends_source = jobs[static_cast<size_t>(k)].chunk.ends_file; };
    uint64_t sentences = 0, documents = 0;
    const Prepared done = run_preparation(preparation, options.threads, progress, Json::object());
    for (const ShardStats& shard : done.shards) {
        sentences += shard.ends;
        documents += shard.groups;
    }
    PrepareSummary summary = summary_of(done, id_bytes);
    summary.sentences = sentences;
    summary.documents = documents;
    return summary;
}

PreparedText open_prepared_text(const std::string& directory, const std::vector<TextSource>& sources,
                                const Tokenizer& tokenizer) {
    const std::string manifest_path = directory + "/manifest.json";
    int id_bytes = 0;
    const Json manifest = open_manifest(directory, kFormat, tokenizer, id_bytes);
    PreparedText result{TokenCorpus({}, nullptr), {}};
    const Json& listed = manifest.at("sources");
    HNAS_CHECK(listed.size() == sources.size(), manifest_path, ": prepared from ", listed.size(), " sources, the config names ",
               sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
        try {  // an entry that is no object, or a unit or path that is no string, is malformed (as check_source says)
            const std::string unit = listed[i].value("unit", "");
            HNAS_CHECK(unit == name_of(sources[i].unit), manifest_path, ": source ", i, " is ", listed[i].value("path", ""), " (", unit,
                       "), the config names ", sources[i].path, " (", name_of(sources[i].unit), ")");
        } catch (const Json::exception& error) {
            HNAS_CHECK(false, manifest_path, ": a source entry ", listed[i].dump(), " is malformed: ", error.what());
        }
        result.source_bytes.push_back(check_source(listed[i], sources[i].path, directory, manifest_path));
    }
    auto shards = std::make_shared<std::vector<MappedShard>>(
        map_shards(directory, manifest, id_bytes, tokenizer.vocab_size(), EndOrder::increasing));
    std::vector<TokenPart> parts;
    for (const MappedShard& shard : *shards) parts.push_back(shard.part);
    result.corpus = TokenCorpus(std::move(parts), shards);
    return result;
}

}  // namespace hnas::data
