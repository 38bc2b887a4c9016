// Writing and reading prepared text (prepared_text.h): the chunk plan, the shards, the manifest.
#include "data/prepared_text.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/mapped_file.h"
#include "base/read_file.h"

namespace hnas::data {

namespace {

namespace fs = std::filesystem;

constexpr char kIndexMagic[8] = {'H', 'N', 'A', 'S', 'I', 'D', 'X', '1'};
constexpr uint64_t kIndexHeaderBytes = 32;  // magic, version, id bytes, tokens, sentences, documents (uint32 each after the magic)
constexpr const char* kFormat = "hnas-prepared-text";

Json read_json(const std::string& path, const std::string& what) {
    return parse_json(read_file(path, what), what + " " + path + ": not valid JSON:");
}

std::string hex32(uint32_t value) { return fmt::format("{:08x}", value); }

std::string shard_name(int64_t k) { return fmt::format("shard-{:06d}", k); }

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

struct ShardStats {
    uint64_t tokens = 0, sentences = 0, documents = 0, text_bytes = 0;
    uint32_t ids_crc = 0, index_crc = 0;
    int64_t damaged_lines = 0;
    bool ends_source = false;
};

void store32(uint8_t* at, uint32_t value) { std::memcpy(at, &value, 4); }
uint32_t load32(const uint8_t* at) {
    uint32_t value;
    std::memcpy(&value, at, 4);
    return value;
}

// Writes one shard's two files (the index last: a shard is whole when its index exists).
ShardStats write_shard(const TokenizedText& text, const std::string& stem, int id_bytes) {
    ShardStats stats;
    stats.tokens = text.ids.size();
    stats.sentences = text.sentence_ends.size();
    stats.documents = text.document_ends.size();
    stats.damaged_lines = text.damaged_lines;
    {
        AtomicFile ids(stem + ".ids", "prepared ids");
        std::vector<uint8_t> buffer;
        constexpr size_t kBlock = size_t{1} << 20;
        for (size_t start = 0; start < text.ids.size(); start += kBlock) {
            const size_t count = std::min(kBlock, text.ids.size() - start);
            buffer.resize(count * static_cast<size_t>(id_bytes));
            for (size_t i = 0; i < count; ++i) {
                const auto id = static_cast<uint32_t>(text.ids[start + i]);
                if (id_bytes == 2) {
                    const auto narrow = static_cast<uint16_t>(id);
                    std::memcpy(buffer.data() + 2 * i, &narrow, 2);
                } else {
                    std::memcpy(buffer.data() + 4 * i, &id, 4);
                }
            }
            stats.ids_crc = crc32c(buffer.data(), buffer.size(), stats.ids_crc);
            ids.write(buffer.data(), buffer.size());
        }
        ids.commit();
    }
    std::vector<uint8_t> index(kIndexHeaderBytes + 4 * (stats.sentences + stats.documents));
    std::memcpy(index.data(), kIndexMagic, 8);
    store32(index.data() + 8, kPreparedTextVersion);
    store32(index.data() + 12, static_cast<uint32_t>(id_bytes));
    store32(index.data() + 16, static_cast<uint32_t>(stats.tokens));
    store32(index.data() + 20, static_cast<uint32_t>(stats.sentences));
    store32(index.data() + 24, static_cast<uint32_t>(stats.documents));
    std::memcpy(index.data() + kIndexHeaderBytes, text.sentence_ends.data(), 4 * stats.sentences);
    std::memcpy(index.data() + kIndexHeaderBytes + 4 * stats.sentences, text.document_ends.data(), 4 * stats.documents);
    stats.index_crc = crc32c(index.data(), index.size());
    AtomicFile file(stem + ".idx", "prepared index");
    file.write(index.data(), index.size());
    file.commit();
    return stats;
}

// A shard's files, mapped and checked against what the manifest says of them.
struct MappedShard {
    MappedFile ids, index;
    TokenPart part;
};

MappedShard map_shard(const std::string& stem, const ShardStats& expected, int id_bytes, int32_t vocab_size) {
    MappedShard shard{MappedFile(stem + ".ids", "prepared ids"), MappedFile(stem + ".idx", "prepared index"), {}};
    const MappedFile& index = shard.index;
    const std::string& idx = index.path();
    HNAS_CHECK(index.size() >= kIndexHeaderBytes && std::memcmp(index.data(), kIndexMagic, 8) == 0, idx,
               ": not a prepared index (", index.size(), " bytes, no HNASIDX1 header)");
    HNAS_CHECK(load32(index.data() + 8) == kPreparedTextVersion, idx, ": format version ", load32(index.data() + 8),
               ", this hnas reads ", kPreparedTextVersion, "; prepare the data again");
    const uint64_t tokens = load32(index.data() + 16), sentences = load32(index.data() + 20), documents = load32(index.data() + 24);
    HNAS_CHECK(load32(index.data() + 12) == static_cast<uint32_t>(id_bytes) && tokens == expected.tokens &&
                   sentences == expected.sentences && documents == expected.documents,
               idx, ": its header (", load32(index.data() + 12), "-byte ids, ", tokens, " tokens, ", sentences, " sentences, ",
               documents, " documents) is not what manifest.json says (", id_bytes, ", ", expected.tokens, ", ",
               expected.sentences, ", ", expected.documents, ")");
    HNAS_CHECK(index.size() == kIndexHeaderBytes + 4 * (sentences + documents), idx, ": ", index.size(), " bytes, expected ",
               kIndexHeaderBytes + 4 * (sentences + documents), " (truncated or damaged)");
    HNAS_CHECK(shard.ids.size() == tokens * static_cast<uint64_t>(id_bytes), shard.ids.path(), ": ", shard.ids.size(),
               " bytes, expected ", tokens * static_cast<uint64_t>(id_bytes), " (truncated or damaged)");
    HNAS_CHECK(crc32c(index.data(), index.size()) == expected.index_crc, idx, ": checksum ", hex32(crc32c(index.data(), index.size())),
               ", manifest.json says ", hex32(expected.index_crc), " (damaged)");
    HNAS_CHECK(crc32c(shard.ids.data(), shard.ids.size()) == expected.ids_crc, shard.ids.path(), ": checksum differs from manifest.json's ",
               hex32(expected.ids_crc), " (damaged)");
    // The index is read as uint32 arrays: the mapping is page-aligned and the header 32 bytes.
    const auto* words = reinterpret_cast<const uint32_t*>(index.data() + kIndexHeaderBytes);
    const std::span<const uint32_t> sentence_ends(words, sentences), document_ends(words + sentences, documents);
    for (uint64_t s = 0; s < sentences; ++s) {
        HNAS_CHECK(sentence_ends[s] > (s == 0 ? 0 : sentence_ends[s - 1]) && sentence_ends[s] <= tokens, idx, ": sentence ", s,
                   " ends at token ", sentence_ends[s], ", after ", (s == 0 ? 0 : sentence_ends[s - 1]), " and within ", tokens);
    }
    HNAS_CHECK(sentences == 0 ? tokens == 0 : sentence_ends.back() == tokens, idx, ": its sentences do not cover its ", tokens, " tokens");
    for (uint64_t d = 0; d < documents; ++d) {
        HNAS_CHECK(document_ends[d] > (d == 0 ? 0 : document_ends[d - 1]) && document_ends[d] <= sentences, idx, ": document ", d,
                   " ends at sentence ", document_ends[d], ", after ", (d == 0 ? 0 : document_ends[d - 1]), " and within ", sentences);
    }
    HNAS_CHECK(!expected.ends_source || documents == 0 || document_ends.back() == sentences, idx,
               ": the last shard of a source leaves its last sentences outside any document");
    uint32_t largest = 0;
    if (id_bytes == 2) {
        const auto* ids = reinterpret_cast<const uint16_t*>(shard.ids.data());
        for (uint64_t i = 0; i < tokens; ++i) largest = std::max<uint32_t>(largest, ids[i]);
    } else {
        const auto* ids = reinterpret_cast<const uint32_t*>(shard.ids.data());
        for (uint64_t i = 0; i < tokens; ++i) largest = std::max(largest, ids[i]);
    }
    HNAS_CHECK(tokens == 0 || largest < static_cast<uint32_t>(vocab_size), shard.ids.path(), ": token id ", largest,
               " is outside the tokenizer's ", vocab_size, " pieces");
    shard.part = {shard.ids.data(), id_bytes, tokens, sentence_ends, document_ends};
    return shard;
}

Json sources_json(const std::vector<TextSource>& sources, const std::vector<SourcePlan>& plans) {
    Json list = Json::array();
    for (size_t i = 0; i < sources.size(); ++i) {
        list.push_back({{"path", sources[i].path}, {"unit", name_of(sources[i].unit)}, {"bytes", plans[i].bytes},
                        {"crc32c", hex32(plans[i].crc)}});
    }
    return list;
}

// What a preparation is of: plan.json while it runs, and the heart of manifest.json.
Json settings_json(const std::vector<TextSource>& sources, const std::vector<SourcePlan>& plans, const Tokenizer& tokenizer,
                   const PrepareOptions& options, int id_bytes) {
    return {{"format", kFormat},
            {"version", kPreparedTextVersion},
            {"tokenizer", {{"hash", fmt::format("{:016x}", tokenizer.model_hash())}, {"vocab_size", tokenizer.vocab_size()}}},
            {"id_bytes", id_bytes},
            {"chunk_bytes", options.chunk_bytes},
            {"max_line_bytes", options.max_line_bytes},
            {"damaged_lines", name_of(options.damaged_lines)},
            {"sources", sources_json(sources, plans)}};
}

Json shard_json(const std::string& name, const ShardStats& s) {
    return {{"name", name},           {"tokens", s.tokens},       {"sentences", s.sentences},
            {"documents", s.documents}, {"text_bytes", s.text_bytes}, {"damaged_lines", s.damaged_lines},
            {"ends_source", s.ends_source}, {"ids_crc32c", hex32(s.ids_crc)}, {"index_crc32c", hex32(s.index_crc)}};
}

uint32_t parse_hex32(const Json& value, const std::string& what) {
    HNAS_CHECK(value.is_string() && value.get<std::string>().size() == 8 &&
                   value.get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos, what, " must be 8 hex digits, got ", value.dump());
    return static_cast<uint32_t>(std::stoul(value.get<std::string>(), nullptr, 16));
}

ShardStats shard_stats(const Json& json, const std::string& manifest) {
    ShardStats s;
    try {
        constexpr int64_t kMost = (int64_t{1} << 32) - 1;  // the index's uint32 counts
        s.tokens = static_cast<uint64_t>(json_integer(json.at("tokens"), 0, kMost, manifest + ": a shard's tokens"));
        s.sentences = static_cast<uint64_t>(json_integer(json.at("sentences"), 0, kMost, manifest + ": a shard's sentences"));
        s.documents = static_cast<uint64_t>(json_integer(json.at("documents"), 0, kMost, manifest + ": a shard's documents"));
        s.ends_source = json.at("ends_source").get<bool>();
        s.ids_crc = parse_hex32(json.at("ids_crc32c"), manifest + ": ids_crc32c");
        s.index_crc = parse_hex32(json.at("index_crc32c"), manifest + ": index_crc32c");
    } catch (const Json::exception& error) {
        HNAS_CHECK(false, manifest, ": a shard entry ", json.dump(), " is malformed: ", error.what());
    }
    HNAS_CHECK(s.documents <= s.sentences && s.sentences <= s.tokens, manifest, ": shard counts out of order in ", json.dump());
    return s;
}

// Removes what a preparation writes (shards, plan, manifest), leaving anything else in the directory.
void remove_prepared_files(const std::string& directory) {
    for (const auto& entry : fs::directory_iterator(directory)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shard-", 0) == 0 || name == "plan.json" || name == "manifest.json") fs::remove(entry.path());
    }
}

// The shard's stats when a finished one is on disk from an earlier run of the same plan.
std::optional<ShardStats> finished_shard(const std::string& stem, int id_bytes) {
    if (!fs::exists(stem + ".idx") || !fs::exists(stem + ".ids")) return std::nullopt;
    const MappedFile index(stem + ".idx", "prepared index");
    if (index.size() < kIndexHeaderBytes || std::memcmp(index.data(), kIndexMagic, 8) != 0) return std::nullopt;
    ShardStats s;
    s.tokens = load32(index.data() + 16);
    s.sentences = load32(index.data() + 20);
    s.documents = load32(index.data() + 24);
    if (index.size() != kIndexHeaderBytes + 4 * (s.sentences + s.documents)) return std::nullopt;
    const MappedFile ids(stem + ".ids", "prepared ids");
    if (ids.size() != s.tokens * static_cast<uint64_t>(id_bytes)) return std::nullopt;
    s.index_crc = crc32c(index.data(), index.size());
    s.ids_crc = crc32c(ids.data(), ids.size());
    return s;
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
    HNAS_CHECK(options.threads >= 1 && options.chunk_bytes >= 1, "prepare: threads and chunk_bytes must be at least 1");
    const int id_bytes = tokenizer.vocab_size() <= 65536 ? 2 : 4;
    std::vector<SourcePlan> plans;
    std::vector<Job> jobs;
    for (size_t i = 0; i < sources.size(); ++i) {
        plans.push_back(plan_source(sources[i], options.chunk_bytes));
        for (const SourceChunk& chunk : plans.back().chunks) jobs.push_back({i, chunk});
    }
    const Json settings = settings_json(sources, plans, tokenizer, options, id_bytes);
    fs::create_directories(directory);
    const std::string manifest_path = directory + "/manifest.json", plan_path = directory + "/plan.json";
    if (fs::exists(manifest_path)) {
        Json manifest = read_json(manifest_path, "manifest");
        Json given = manifest;
        given.erase("shards");
        given.erase("counts");
        PrepareSummary summary;
        if (given == settings) {
            summary.shards = static_cast<int64_t>(manifest.value("shards", Json::array()).size());
            summary.reused_shards = summary.shards;
            summary.id_bytes = id_bytes;
            const Json counts = manifest.value("counts", Json::object());
            auto count = [&](const char* key) {
                return json_integer(counts.value(key, Json()), 0, INT64_MAX, manifest_path + ": counts." + key);
            };
            summary.bytes = static_cast<uint64_t>(count("bytes"));
            summary.tokens = static_cast<uint64_t>(count("tokens"));
            summary.sentences = static_cast<uint64_t>(count("sentences"));
            summary.documents = static_cast<uint64_t>(count("documents"));
            summary.damaged_lines = count("damaged_lines");
            return summary;
        }
    }
    const bool resumable = fs::exists(plan_path) && read_json(plan_path, "preparation plan") == settings;
    if (!resumable) {
        remove_prepared_files(directory);
        write_file_atomically(plan_path, settings.dump(1) + "\n");
    }

    std::vector<ShardStats> stats(jobs.size());
    std::vector<uint8_t> done(jobs.size(), 0);
    PrepareSummary summary;
    summary.id_bytes = id_bytes;
    PrepareProgress state;
    state.shards_total = static_cast<int64_t>(jobs.size());
    for (const SourcePlan& plan : plans) state.bytes_total += plan.bytes;
    for (size_t k = 0; k < jobs.size(); ++k) {
        const uint64_t text_bytes = jobs[k].chunk.end - jobs[k].chunk.begin;
        if (!resumable) continue;
        if (auto found = finished_shard(directory + "/" + shard_name(static_cast<int64_t>(k)), id_bytes)) {
            stats[k] = *found;
            stats[k].text_bytes = text_bytes;
            done[k] = 1;
            ++summary.reused_shards;
            ++state.shards_done;
            state.bytes_done += text_bytes;
        }
    }

    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::exception_ptr error;
    std::vector<size_t> finished;  // shards finished since progress was last told, under `mutex`
    auto work = [&] {
        TokenizedText text;
        for (size_t k = next++; k < jobs.size() && !failed; k = next++) {
            if (done[k]) continue;
            try {
                text.clear();
                const Job& job = jobs[k];
                read_text(sources[job.source], job.chunk, tokenizer, options.max_line_bytes, options.damaged_lines, text);
                HNAS_CHECK(text.ids.size() < (uint64_t{1} << 32), "prepare: ", sources[job.source].path, " bytes ", job.chunk.begin,
                           "-", job.chunk.end, " give 2^32 tokens or more; lower the chunk size");
                ShardStats s = write_shard(text, directory + "/" + shard_name(static_cast<int64_t>(k)), id_bytes);
                s.text_bytes = job.chunk.end - job.chunk.begin;
                const std::lock_guard lock(mutex);
                stats[k] = s;
                finished.push_back(k);
            } catch (...) {
                const std::lock_guard lock(mutex);
                if (!error) error = std::current_exception();
                failed = true;
            }
        }
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < options.threads; ++t) workers.emplace_back(work);
    auto report_finished = [&] {
        const std::lock_guard lock(mutex);
        for (size_t k : finished) {
            ++state.shards_done;
            state.bytes_done += stats[k].text_bytes;
        }
        if (!finished.empty() && progress) progress(state);
        finished.clear();
    };
    while (state.shards_done < state.shards_total && !failed) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        report_finished();
    }
    for (std::thread& worker : workers) worker.join();
    if (error) std::rethrow_exception(error);
    report_finished();

    Json shard_list = Json::array();
    for (size_t k = 0; k < jobs.size(); ++k) {
        stats[k].ends_source = jobs[k].chunk.ends_file;
        shard_list.push_back(shard_json(shard_name(static_cast<int64_t>(k)), stats[k]));
        summary.bytes += stats[k].text_bytes;
        summary.tokens += stats[k].tokens;
        summary.sentences += stats[k].sentences;
        summary.documents += stats[k].documents;
        summary.damaged_lines += stats[k].damaged_lines;
    }
    summary.shards = static_cast<int64_t>(jobs.size());
    Json manifest = settings;
    manifest["counts"] = {{"bytes", summary.bytes},         {"tokens", summary.tokens},
                          {"sentences", summary.sentences}, {"documents", summary.documents},
                          {"damaged_lines", summary.damaged_lines}};
    manifest["shards"] = std::move(shard_list);
    write_file_atomically(manifest_path, manifest.dump(1) + "\n");
    fs::remove(plan_path);
    return summary;
}

PreparedText open_prepared_text(const std::string& directory, const std::vector<TextSource>& sources,
                                const Tokenizer& tokenizer) {
    const std::string manifest_path = directory + "/manifest.json";
    if (!fs::exists(manifest_path)) {
        HNAS_CHECK(!fs::exists(directory + "/plan.json"), "prepared data ", directory,
                   ": its preparation did not finish (no manifest.json); run `hnas prepare` again to finish it");
        HNAS_CHECK(false, "prepared data ", directory, ": no manifest.json, so not a directory `hnas prepare` wrote");
    }
    const Json manifest = read_json(manifest_path, "manifest");
    PreparedText prepared{TokenCorpus({}, nullptr), {}};
    std::vector<ShardStats> expected;
    int id_bytes = 0;
    try {
        HNAS_CHECK(manifest.at("format") == kFormat, manifest_path, ": format ", manifest.at("format").dump(), ", not ", kFormat);
        const int64_t version = json_integer(manifest.at("version"), 0, INT32_MAX, manifest_path + ": version");
        HNAS_CHECK(version == kPreparedTextVersion, manifest_path, ": format version ", version, ", this hnas reads ",
                   kPreparedTextVersion, "; prepare the data again");
        const std::string hash = manifest.at("tokenizer").at("hash").get<std::string>();
        HNAS_CHECK(hash == fmt::format("{:016x}", tokenizer.model_hash()), manifest_path, ": prepared with tokenizer ", hash,
                   ", but this run's tokenizer is ", fmt::format("{:016x}", tokenizer.model_hash()),
                   " (prepare again with the run's tokenizer, or set tokenizer.model to the one prepared with)");
        id_bytes = static_cast<int>(json_integer(manifest.at("id_bytes"), 0, 8, manifest_path + ": id_bytes"));
        HNAS_CHECK(id_bytes == 4 || (id_bytes == 2 && tokenizer.vocab_size() <= 65536), manifest_path, ": id_bytes ", id_bytes,
                   " cannot hold this tokenizer's ", tokenizer.vocab_size(), " pieces");
        const Json& listed = manifest.at("sources");
        HNAS_CHECK(listed.size() == sources.size(), manifest_path, ": prepared from ", listed.size(), " sources, the config names ",
                   sources.size());
        for (size_t i = 0; i < sources.size(); ++i) {
            const std::string path = listed[i].at("path").get<std::string>(), unit = listed[i].at("unit").get<std::string>();
            HNAS_CHECK(path == sources[i].path && unit == name_of(sources[i].unit), manifest_path, ": source ", i, " is ", path,
                       " (", unit, "), the config names ", sources[i].path, " (", name_of(sources[i].unit), ")");
            const auto bytes = static_cast<uint64_t>(json_integer(listed[i].at("bytes"), 1, INT64_MAX, manifest_path + ": a source's bytes"));
            std::error_code missing;
            const uint64_t now = fs::file_size(path, missing);
            HNAS_CHECK(missing || now == bytes, path, " has ", now, " bytes, but ", bytes, " when it was prepared into ", directory,
                       ": it changed; run `hnas prepare` again");
            prepared.source_bytes.push_back(bytes);
        }
        for (const Json& shard : manifest.at("shards")) expected.push_back(shard_stats(shard, manifest_path));
    } catch (const Json::exception& error) {
        HNAS_CHECK(false, manifest_path, ": malformed: ", error.what());
    }
    auto shards = std::make_shared<std::vector<MappedShard>>();
    shards->reserve(expected.size());
    std::vector<TokenPart> parts;
    for (size_t k = 0; k < expected.size(); ++k) {
        shards->push_back(map_shard(directory + "/" + shard_name(static_cast<int64_t>(k)), expected[k], id_bytes,
                                    tokenizer.vocab_size()));
        parts.push_back(shards->back().part);
    }
    prepared.corpus = TokenCorpus(std::move(parts), shards);
    return prepared;
}

}  // namespace hnas::data
