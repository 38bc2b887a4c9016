// Shards, manifests and the preparation shared by prepared text and prepared pairs (prepared_shards.h).
#include "data/prepared_shards.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <thread>

#include "base/atomic_file.h"
#include "base/check.h"
#include "base/hash.h"
#include "base/read_file.h"

namespace hnas::data::prepared {

namespace {

namespace fs = std::filesystem;

constexpr char kIndexMagic[8] = {'H', 'N', 'A', 'S', 'I', 'D', 'X', '1'};
constexpr uint64_t kIndexHeaderBytes = 32;  // magic, then uint32: version, id bytes, tokens, ends, groups, reserved

void store32(uint8_t* at, uint32_t value) { std::memcpy(at, &value, 4); }
uint32_t load32(const uint8_t* at) {
    uint32_t value;
    std::memcpy(&value, at, 4);
    return value;
}

uint32_t parse_hex32(const Json& value, const std::string& what) {
    HNAS_CHECK(value.is_string() && value.get<std::string>().size() == 8 &&
                   value.get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos,
               what, " must be 8 hex digits, got ", value.dump());
    return static_cast<uint32_t>(std::stoul(value.get<std::string>(), nullptr, 16));
}

Json shard_json(const std::string& name, const ShardStats& s) {
    return {{"name", name},           {"tokens", s.tokens},       {"ends", s.ends},
            {"groups", s.groups},     {"text_bytes", s.text_bytes}, {"damaged_lines", s.damaged_lines},
            {"ends_source", s.ends_source}, {"ids_crc32c", hex32(s.ids_crc)}, {"index_crc32c", hex32(s.index_crc)}};
}

ShardStats shard_stats(const Json& json, const std::string& manifest) {
    ShardStats s;
    try {
        constexpr int64_t kMost = (int64_t{1} << 32) - 1;  // the index's uint32 counts
        s.tokens = static_cast<uint64_t>(json_integer(json.at("tokens"), 0, kMost, manifest + ": a shard's tokens"));
        s.ends = static_cast<uint64_t>(json_integer(json.at("ends"), 0, kMost, manifest + ": a shard's ends"));
        s.groups = static_cast<uint64_t>(json_integer(json.at("groups"), 0, kMost, manifest + ": a shard's groups"));
        s.text_bytes = static_cast<uint64_t>(json_integer(json.at("text_bytes"), 0, INT64_MAX, manifest + ": a shard's text_bytes"));
        s.damaged_lines = json_integer(json.at("damaged_lines"), 0, INT64_MAX, manifest + ": a shard's damaged_lines");
        s.ends_source = json.at("ends_source").get<bool>();
        s.ids_crc = parse_hex32(json.at("ids_crc32c"), manifest + ": ids_crc32c");
        s.index_crc = parse_hex32(json.at("index_crc32c"), manifest + ": index_crc32c");
    } catch (const Json::exception& error) {
        HNAS_CHECK(false, manifest, ": a shard entry ", json.dump(), " is malformed: ", error.what());
    }
    HNAS_CHECK(s.groups <= s.ends, manifest, ": shard counts out of order in ", json.dump());
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
    s.ends = load32(index.data() + 20);
    s.groups = load32(index.data() + 24);
    if (index.size() != kIndexHeaderBytes + 4 * (s.ends + s.groups)) return std::nullopt;
    const MappedFile ids(stem + ".ids", "prepared ids");
    if (ids.size() != s.tokens * static_cast<uint64_t>(id_bytes)) return std::nullopt;
    s.index_crc = crc32c(index.data(), index.size());
    s.ids_crc = crc32c(ids.data(), ids.size());
    return s;
}

void check_ends(std::span<const uint32_t> ends, uint64_t limit, bool strictly, const std::string& file, const char* what) {
    for (size_t i = 0; i < ends.size(); ++i) {
        const uint32_t previous = i == 0 ? 0 : ends[i - 1];
        HNAS_CHECK((strictly ? ends[i] > previous : ends[i] >= previous) && ends[i] <= limit, file, ": ", what, " ", i,
                   " ends at ", ends[i], ", after ", previous, " and within ", limit);
    }
}

// One pass over a shard's ids, block by block while each is in cache: their checksum and their largest.
struct IdsScan {
    uint32_t crc = 0, largest = 0;
};
IdsScan scan_ids(const MappedFile& ids, uint64_t tokens, int id_bytes) {
    constexpr uint64_t kBlockTokens = uint64_t{1} << 16;
    IdsScan scan;
    for (uint64_t begin = 0; begin < tokens; begin += kBlockTokens) {
        const uint64_t count = std::min(kBlockTokens, tokens - begin);
        const uint8_t* block = ids.data() + begin * static_cast<uint64_t>(id_bytes);
        scan.crc = crc32c(block, count * static_cast<uint64_t>(id_bytes), scan.crc);
        if (id_bytes == 2) {
            const auto* values = reinterpret_cast<const uint16_t*>(block);
            for (uint64_t i = 0; i < count; ++i) scan.largest = std::max<uint32_t>(scan.largest, values[i]);
        } else {
            const auto* values = reinterpret_cast<const uint32_t*>(block);
            for (uint64_t i = 0; i < count; ++i) scan.largest = std::max(scan.largest, values[i]);
        }
    }
    return scan;
}

}  // namespace

std::string hex32(uint32_t value) { return fmt::format("{:08x}", value); }
std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }
std::string shard_name(int64_t k) { return fmt::format("shard-{:06d}", k); }

Json read_json(const std::string& path, const std::string& what) {
    return parse_json(read_file(path, what), what + " " + path + ": not valid JSON:");
}

ShardStats write_shard(const std::vector<int32_t>& ids, std::span<const uint32_t> ends, std::span<const uint32_t> groups,
                       const std::string& stem, int id_bytes) {
    ShardStats stats;
    stats.tokens = ids.size();
    stats.ends = ends.size();
    stats.groups = groups.size();
    {
        AtomicFile file(stem + ".ids", "prepared ids");
        std::vector<uint8_t> buffer;
        constexpr size_t kBlock = size_t{1} << 20;
        for (size_t start = 0; start < ids.size(); start += kBlock) {
            const size_t count = std::min(kBlock, ids.size() - start);
            buffer.resize(count * static_cast<size_t>(id_bytes));
            for (size_t i = 0; i < count; ++i) {
                const auto id = static_cast<uint32_t>(ids[start + i]);
                if (id_bytes == 2) {
                    const auto narrow = static_cast<uint16_t>(id);
                    std::memcpy(buffer.data() + 2 * i, &narrow, 2);
                } else {
                    std::memcpy(buffer.data() + 4 * i, &id, 4);
                }
            }
            stats.ids_crc = crc32c(buffer.data(), buffer.size(), stats.ids_crc);
            file.write(buffer.data(), buffer.size());
        }
        file.commit();
    }
    std::vector<uint8_t> index(kIndexHeaderBytes + 4 * (stats.ends + stats.groups));
    std::memcpy(index.data(), kIndexMagic, 8);
    store32(index.data() + 8, kPreparedTextVersion);
    store32(index.data() + 12, static_cast<uint32_t>(id_bytes));
    store32(index.data() + 16, static_cast<uint32_t>(stats.tokens));
    store32(index.data() + 20, static_cast<uint32_t>(stats.ends));
    store32(index.data() + 24, static_cast<uint32_t>(stats.groups));
    if (!ends.empty()) std::memcpy(index.data() + kIndexHeaderBytes, ends.data(), 4 * stats.ends);
    if (!groups.empty()) std::memcpy(index.data() + kIndexHeaderBytes + 4 * stats.ends, groups.data(), 4 * stats.groups);
    stats.index_crc = crc32c(index.data(), index.size());
    AtomicFile file(stem + ".idx", "prepared index");
    file.write(index.data(), index.size());
    file.commit();
    return stats;
}

MappedShard map_shard(const std::string& stem, const ShardStats& expected, int id_bytes, int32_t vocab_size, EndOrder order) {
    MappedShard shard{MappedFile(stem + ".ids", "prepared ids"), MappedFile(stem + ".idx", "prepared index"), {}};
    const MappedFile& index = shard.index;
    const std::string& idx = index.path();
    HNAS_CHECK(index.size() >= kIndexHeaderBytes && std::memcmp(index.data(), kIndexMagic, 8) == 0, idx,
               ": not a prepared index (", index.size(), " bytes, no HNASIDX1 header)");
    HNAS_CHECK(load32(index.data() + 8) == kPreparedTextVersion, idx, ": format version ", load32(index.data() + 8),
               ", this hnas reads ", kPreparedTextVersion, "; prepare the data again");
    const uint64_t tokens = load32(index.data() + 16), ends = load32(index.data() + 20), groups = load32(index.data() + 24);
    HNAS_CHECK(load32(index.data() + 12) == static_cast<uint32_t>(id_bytes) && tokens == expected.tokens && ends == expected.ends &&
                   groups == expected.groups,
               idx, ": its header (", load32(index.data() + 12), "-byte ids, ", tokens, " tokens, ", ends, " ends, ", groups,
               " groups) is not what manifest.json says (", id_bytes, ", ", expected.tokens, ", ", expected.ends, ", ",
               expected.groups, ")");
    HNAS_CHECK(index.size() == kIndexHeaderBytes + 4 * (ends + groups), idx, ": ", index.size(), " bytes, expected ",
               kIndexHeaderBytes + 4 * (ends + groups), " (truncated or damaged)");
    HNAS_CHECK(shard.ids.size() == tokens * static_cast<uint64_t>(id_bytes), shard.ids.path(), ": ", shard.ids.size(),
               " bytes, expected ", tokens * static_cast<uint64_t>(id_bytes), " (truncated or damaged)");
    const uint32_t index_crc = crc32c(index.data(), index.size());
    HNAS_CHECK(index_crc == expected.index_crc, idx, ": checksum ", hex32(index_crc), ", manifest.json says ",
               hex32(expected.index_crc), " (damaged)");
    const IdsScan scan = scan_ids(shard.ids, tokens, id_bytes);
    HNAS_CHECK(scan.crc == expected.ids_crc, shard.ids.path(), ": checksum differs from manifest.json's ", hex32(expected.ids_crc),
               " (damaged)");
    // The index is read as uint32 arrays: the mapping is page-aligned and the header 32 bytes.
    const auto* words = reinterpret_cast<const uint32_t*>(index.data() + kIndexHeaderBytes);
    const std::span<const uint32_t> end_list(words, ends), group_list(words + ends, groups);
    const bool sentences = order == EndOrder::increasing;
    check_ends(end_list, tokens, sentences, idx, sentences ? "sentence" : "end");
    HNAS_CHECK(ends == 0 ? tokens == 0 : end_list.back() == tokens, idx, ": its ends do not cover its ", tokens, " tokens");
    check_ends(group_list, ends, true, idx, "document");
    HNAS_CHECK(!expected.ends_source || groups == 0 || group_list.back() == ends, idx,
               ": the last shard of a source leaves its last sentences outside any document");
    HNAS_CHECK(tokens == 0 || scan.largest < static_cast<uint32_t>(vocab_size), shard.ids.path(), ": token id ", scan.largest,
               " is outside the tokenizer's ", vocab_size, " pieces");
    shard.part = {shard.ids.data(), id_bytes, tokens, end_list, group_list};
    return shard;
}

namespace {

// Shards already on disk: all of them when the manifest matches (already prepared), those of an
// unfinished preparation of the same settings, or none (the directory is cleared and the plan written).
void find_finished(const Preparation& p, int id_bytes, Prepared& out, std::vector<uint8_t>& done) {
    const std::string manifest_path = p.directory + "/manifest.json", plan_path = p.directory + "/plan.json";
    if (fs::exists(manifest_path)) {
        Json manifest = read_json(manifest_path, "manifest");
        Json given = manifest;
        given.erase("shards");
        given.erase("counts");
        if (given == p.settings) {
            out.shards.clear();
            for (const Json& shard : manifest.value("shards", Json::array())) out.shards.push_back(shard_stats(shard, manifest_path));
            out.reused = static_cast<int64_t>(out.shards.size());
            out.already = true;
            out.manifest = std::move(manifest);
            return;
        }
    }
    const bool resumable = fs::exists(plan_path) && read_json(plan_path, "preparation plan") == p.settings;
    if (!resumable) {
        remove_prepared_files(p.directory);
        write_file_atomically(plan_path, p.settings.dump(1) + "\n");
        return;
    }
    for (int64_t k = 0; k < p.shards; ++k) {
        if (auto found = finished_shard(p.directory + "/" + shard_name(k), id_bytes)) {
            out.shards[static_cast<size_t>(k)] = *found;
            out.shards[static_cast<size_t>(k)].text_bytes = p.shard_text_bytes(k);
            done[static_cast<size_t>(k)] = 1;
            ++out.reused;
        }
    }
}

// Runs the jobs not done on `threads` threads, telling `progress` after each finished shard.
void make_shards(const Preparation& p, int threads, const std::vector<uint8_t>& done, std::vector<ShardStats>& stats,
                 PrepareProgress state, const std::function<void(const PrepareProgress&)>& progress) {
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::exception_ptr error;
    std::vector<size_t> finished;  // shards finished since progress was last told, under `mutex`
    auto work = [&] {
        for (size_t k = next++; k < stats.size() && !failed; k = next++) {
            if (done[k]) continue;
            try {
                ShardStats s = p.make_shard(static_cast<int64_t>(k), p.directory + "/" + shard_name(static_cast<int64_t>(k)));
                s.text_bytes = p.shard_text_bytes(static_cast<int64_t>(k));
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
    auto report_finished = [&] {
        const std::lock_guard lock(mutex);
        for (size_t k : finished) {
            ++state.shards_done;
            state.bytes_done += stats[k].text_bytes;
        }
        if (!finished.empty() && progress) progress(state);
        finished.clear();
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) workers.emplace_back(work);
    while (state.shards_done < state.shards_total && !failed) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        report_finished();
    }
    for (std::thread& worker : workers) worker.join();
    if (error) std::rethrow_exception(error);
    report_finished();
}

}  // namespace

Prepared run_preparation(const Preparation& p, int threads, const std::function<void(const PrepareProgress&)>& progress,
                         const Json& extra_counts) {
    HNAS_CHECK(threads >= 1, "prepare: threads must be at least 1");
    fs::create_directories(p.directory);
    const int id_bytes = p.settings.at("id_bytes").get<int>();
    Prepared out;
    out.shards.resize(static_cast<size_t>(p.shards));
    std::vector<uint8_t> done(static_cast<size_t>(p.shards), 0);
    find_finished(p, id_bytes, out, done);
    if (out.already) return out;
    PrepareProgress state;
    state.shards_total = p.shards;
    state.bytes_total = p.text_bytes;
    for (int64_t k = 0; k < p.shards; ++k) {
        if (!done[static_cast<size_t>(k)]) continue;
        ++state.shards_done;
        state.bytes_done += out.shards[static_cast<size_t>(k)].text_bytes;
    }
    make_shards(p, threads, done, out.shards, state, progress);
    Json shard_list = Json::array();
    uint64_t bytes = 0, tokens = 0;
    int64_t damaged = 0;
    for (int64_t k = 0; k < p.shards; ++k) {
        ShardStats& s = out.shards[static_cast<size_t>(k)];
        p.finish_stats(k, s);
        shard_list.push_back(shard_json(shard_name(k), s));
        bytes += s.text_bytes;
        tokens += s.tokens;
        damaged += s.damaged_lines;
    }
    out.manifest = p.settings;
    out.manifest["counts"] = {{"bytes", bytes}, {"tokens", tokens}, {"damaged_lines", damaged}};
    for (const auto& [key, value] : extra_counts.items()) out.manifest["counts"][key] = value;
    out.manifest["shards"] = std::move(shard_list);
    write_file_atomically(p.directory + "/manifest.json", out.manifest.dump(1) + "\n");
    fs::remove(p.directory + "/plan.json");
    return out;
}

PrepareSummary summary_of(const Prepared& prepared, int id_bytes) {
    PrepareSummary summary;
    summary.id_bytes = id_bytes;
    summary.shards = static_cast<int64_t>(prepared.shards.size());
    summary.reused_shards = prepared.reused;
    for (const ShardStats& s : prepared.shards) {
        summary.bytes += s.text_bytes;
        summary.tokens += s.tokens;
        summary.damaged_lines += s.damaged_lines;
    }
    return summary;
}

Json open_manifest(const std::string& directory, const std::string& format, const Tokenizer& tokenizer, int& id_bytes) {
    const std::string manifest_path = directory + "/manifest.json";
    if (!fs::exists(manifest_path)) {
        HNAS_CHECK(!fs::exists(directory + "/plan.json"), "prepared data ", directory,
                   ": its preparation did not finish (no manifest.json); run `hnas prepare` again to finish it");
        HNAS_CHECK(false, "prepared data ", directory, ": no manifest.json, so not a directory `hnas prepare` wrote");
    }
    Json manifest = read_json(manifest_path, "manifest");
    try {
        HNAS_CHECK(manifest.at("format") == format, manifest_path, ": format ", manifest.at("format").dump(), ", not ", format);
        const int64_t version = json_integer(manifest.at("version"), 0, INT32_MAX, manifest_path + ": version");
        HNAS_CHECK(version == kPreparedTextVersion, manifest_path, ": format version ", version, ", this hnas reads ",
                   kPreparedTextVersion, "; prepare the data again");
        const std::string hash = manifest.at("tokenizer").at("hash").get<std::string>();
        HNAS_CHECK(hash == hex64(tokenizer.model_hash()), manifest_path, ": prepared with tokenizer ", hash,
                   ", but this run's tokenizer is ", hex64(tokenizer.model_hash()),
                   " (prepare again with the run's tokenizer, or set tokenizer.model to the one prepared with)");
        id_bytes = static_cast<int>(json_integer(manifest.at("id_bytes"), 0, 8, manifest_path + ": id_bytes"));
        HNAS_CHECK(id_bytes == 4 || (id_bytes == 2 && tokenizer.vocab_size() <= 65536), manifest_path, ": id_bytes ", id_bytes,
                   " cannot hold this tokenizer's ", tokenizer.vocab_size(), " pieces");
        HNAS_CHECK(manifest.at("sources").is_array() && manifest.at("shards").is_array(), manifest_path,
                   ": sources and shards must be lists");
    } catch (const Json::exception& error) {
        HNAS_CHECK(false, manifest_path, ": malformed: ", error.what());
    }
    return manifest;
}

std::vector<MappedShard> map_shards(const std::string& directory, const Json& manifest, int id_bytes, int32_t vocab_size,
                                    EndOrder order) {
    const std::string manifest_path = directory + "/manifest.json";
    const Json& listed = manifest.at("shards");
    std::vector<ShardStats> expected;
    for (const Json& entry : listed) expected.push_back(shard_stats(entry, manifest_path));
    // Checking a shard reads all of it (checksums, ids): the start-up's largest part, and from a cold
    // page cache a disk's, so the shards are checked on every core. The first bad one in order is reported.
    std::vector<std::optional<MappedShard>> mapped(expected.size());
    std::vector<std::exception_ptr> errors(expected.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t k; (k = next++) < expected.size();) {
            try {
                mapped[k].emplace(map_shard(directory + "/" + shard_name(static_cast<int64_t>(k)), expected[k], id_bytes, vocab_size, order));
            } catch (...) {
                errors[k] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> workers;
    const size_t threads = std::min<size_t>(expected.size(), std::max(1u, std::thread::hardware_concurrency()));
    for (size_t t = 0; t < threads; ++t) workers.emplace_back(work);
    for (std::thread& worker : workers) worker.join();
    std::vector<MappedShard> shards;
    for (size_t k = 0; k < expected.size(); ++k) {
        if (errors[k]) std::rethrow_exception(errors[k]);
        shards.push_back(std::move(*mapped[k]));
    }
    return shards;
}

uint64_t check_source(const Json& listed, const std::string& path, const std::string& directory, const std::string& manifest) {
    try {
        const std::string prepared_path = listed.at("path").get<std::string>();
        HNAS_CHECK(prepared_path == path, manifest, ": prepared from ", prepared_path, ", the config names ", path);
        const auto bytes = static_cast<uint64_t>(json_integer(listed.at("bytes"), 1, INT64_MAX, manifest + ": a source's bytes"));
        std::error_code missing;
        const uint64_t now = fs::file_size(path, missing);
        HNAS_CHECK(missing || now == bytes, path, " has ", now, " bytes, but ", bytes, " when it was prepared into ", directory,
                   ": it changed; run `hnas prepare` again");
        return bytes;
    } catch (const Json::exception& error) {
        HNAS_CHECK(false, manifest, ": a source entry ", listed.dump(), " is malformed: ", error.what());
    }
    return 0;
}

}  // namespace hnas::data::prepared
