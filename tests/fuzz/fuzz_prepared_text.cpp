// Fuzzes the readers of prepared data directories (`hnas prepare`) behind their manifest and
// checksums: each input builds a directory whose manifest.json parses and names this run's format,
// version and tokenizer, and whose shards mostly match their manifest entries in size and CRC-32C, with
// hostile values from the input: token counts, ends out of order or past the ids, document counts, ids
// outside the vocabulary, the id width, shard and source entries; sometimes a truncated or missing
// shard file, a wrong checksum, or raw bytes as the manifest. One byte picks the reader training opens
// it with (prepared text for the masked LM, prepared pairs for Gigaword); what it accepts is read in
// full, and every sentence, document and pair must lie inside the corpus, every id inside the vocabulary.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/hash.h"
#include "data/prepared_pairs.h"
#include "data/prepared_shards.h"
#include "data/prepared_text.h"
#include "fuzz_support.h"
#include "structure_support.h"

namespace {

namespace data = hnas::data;
using hnas::Json;
using hnas::data::prepared::hex32;

// True one time in n; false once the input is used up (which gives the lowest value), so that a short
// input builds a valid directory.
bool one_in(FuzzedDataProvider& input, int n) { return input.ConsumeIntegralInRange<int>(1, n) == n; }

void expect(bool holds, const char* what) {
    if (holds) return;
    std::fprintf(stderr, "finding: an accepted prepared directory has %s\n", what);
    std::abort();
}

// Counted up in small steps, so mostly in the order the readers want; sometimes one is chosen outright.
std::vector<uint32_t> offsets(FuzzedDataProvider& input, size_t count, uint32_t least_step) {
    std::vector<uint32_t> list;
    for (uint32_t at = 0; list.size() < count;) list.push_back(at += input.ConsumeIntegralInRange<uint32_t>(least_step, 5));
    if (count > 0 && one_in(input, 8)) list[input.ConsumeIntegralInRange<size_t>(0, count - 1)] = input.ConsumeIntegral<uint32_t>();
    return list;
}

void append32(std::string& bytes, uint32_t value) { bytes.append(reinterpret_cast<const char*>(&value), 4); }

// Writes shard k's .ids and .idx under `stem` and returns its manifest entry.
Json write_shard(FuzzedDataProvider& input, const std::string& stem, bool pairs, int id_bytes) {
    const uint32_t vocab = static_cast<uint32_t>(hnas::fuzz::small_tokenizer().vocab_size());
    const size_t end_count = input.ConsumeIntegralInRange<size_t>(0, 8) * (pairs ? 2 : 1) + one_in(input, 16);
    const std::vector<uint32_t> ends = offsets(input, end_count, pairs ? 0 : 1);
    const std::vector<uint32_t> groups = offsets(input, pairs && !one_in(input, 16) ? 0 : input.ConsumeIntegralInRange<size_t>(0, end_count), 1);
    const uint32_t tokens = one_in(input, 16) ? input.ConsumeIntegralInRange<uint32_t>(0, 64) : ends.empty() ? 0 : std::min<uint32_t>(ends.back(), 1024);
    const bool in_vocabulary = !one_in(input, 8);
    std::string ids;
    for (uint32_t i = 0; i < tokens; ++i) {
        const uint32_t id = in_vocabulary ? input.ConsumeIntegral<uint16_t>() % vocab : input.ConsumeIntegral<uint32_t>();
        ids.append(reinterpret_cast<const char*>(&id), id_bytes == 2 ? 2 : 4);  // little-endian: the low bytes first
    }
    // The header's fields (version, id width, counts) as map_shard reads them, one of them sometimes another.
    uint32_t header[6] = {hnas::data::kPreparedTextVersion, static_cast<uint32_t>(id_bytes), tokens, static_cast<uint32_t>(ends.size()),
                          static_cast<uint32_t>(groups.size()), 0};
    if (one_in(input, 16)) header[input.ConsumeIntegralInRange<size_t>(0, 5)] = input.ConsumeIntegralInRange<uint32_t>(0, 9);
    std::string index = "HNASIDX1";
    for (uint32_t value : header) append32(index, value);
    for (uint32_t value : ends) append32(index, value);
    for (uint32_t value : groups) append32(index, value);
    Json entry = {{"name", stem.substr(stem.rfind('/') + 1)}, {"tokens", tokens}, {"ends", ends.size()}, {"groups", groups.size()},
                  {"text_bytes", ids.size()}, {"damaged_lines", 0}, {"ends_source", input.ConsumeBool()},
                  {"ids_crc32c", hex32(one_in(input, 16) ? input.ConsumeIntegral<uint32_t>() : hnas::crc32c(ids.data(), ids.size()))},
                  {"index_crc32c", hex32(one_in(input, 16) ? input.ConsumeIntegral<uint32_t>() : hnas::crc32c(index.data(), index.size()))}};
    if (one_in(input, 16)) {
        static const char* const kKeys[] = {"tokens", "ends", "groups", "text_bytes", "damaged_lines", "ends_source", "ids_crc32c", "index_crc32c"};
        entry[input.PickValueInArray(kKeys)] = hnas::fuzz::hostile_value(input);
    }
    // Sometimes a file cut short after its checksum was taken, or missing.
    std::string& cut = input.ConsumeBool() ? ids : index;
    if (one_in(input, 16)) cut.resize(input.ConsumeIntegralInRange<size_t>(0, cut.size()));
    if (!one_in(input, 64)) hnas::fuzz::write_scratch_file(stem + ".ids", ids);
    if (!one_in(input, 64)) hnas::fuzz::write_scratch_file(stem + ".idx", index);
    return one_in(input, 64) ? hnas::fuzz::hostile_value(input) : entry;
}

// A source as the manifest lists it (its file written beside the shards, or missing), and its path.
std::string add_source(FuzzedDataProvider& input, Json& listed, const char* name, const char* unit) {
    const size_t bytes = input.ConsumeIntegralInRange<size_t>(1, 64);
    const std::string path = (hnas::fuzz::scratch_dir() / "prepared" / name).string();
    if (input.ConsumeBool()) hnas::fuzz::write_scratch_file(std::string("prepared/") + name, std::string(bytes, 'x'));
    Json source = {{"path", path}, {"bytes", bytes}, {"crc32c", "00000000"}};
    if (unit != nullptr) source["unit"] = unit;
    if (one_in(input, 16)) source[input.PickValueInArray({"path", "bytes", "unit"})] = hnas::fuzz::hostile_value(input);
    listed.push_back(one_in(input, 64) ? hnas::fuzz::hostile_value(input) : source);
    return path;
}

void read_text(const data::TokenCorpus& corpus, int32_t vocab) {
    std::vector<int32_t> ids;
    for (uint64_t s = 0; s < corpus.sentences(); ++s) {
        const uint64_t begin = corpus.sentence_begin(s), end = corpus.sentence_end(s);
        expect(begin < end && end <= corpus.tokens(), "a sentence empty or past its tokens");
        ids.clear();
        corpus.append_tokens(begin, end, ids);
        for (int32_t id : ids) expect(id >= 0 && id < vocab, "an id outside the vocabulary");
        (void)corpus.starts_document(s);
    }
    expect(corpus.sentences() == 0 || corpus.sentence_end(corpus.sentences() - 1) == corpus.tokens(), "tokens after its last sentence");
    for (uint64_t d = 0; d < corpus.documents(); ++d) {
        const uint64_t begin = corpus.document_begin(d), end = corpus.document_end(d);
        expect(begin < end && end <= corpus.sentences() && corpus.document_of(begin) == d, "a document empty or past its sentences");
    }
}

void read_pairs(const data::PreparedPairs& pairs, int32_t vocab) {
    (void)pairs.fingerprint();
    auto check = [&](int64_t first, int64_t count) {
        int64_t next = first;
        pairs.read_pairs(first, count, [&](int64_t line, std::span<const int32_t> article, std::span<const int32_t> title) {
            expect(line == next++, "pairs out of line order");
            for (int32_t id : article) expect(id >= 0 && id < vocab, "an id outside the vocabulary");
            for (int32_t id : title) expect(id >= 0 && id < vocab, "an id outside the vocabulary");
        });
        expect(next == first + count, "pairs missing");
    };
    check(0, pairs.pairs());
    for (int64_t line = 0; line < pairs.pairs(); ++line) check(line, 1);  // each alone: the lookup of its shard
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    hnas::fuzz::small_tokenizer();  // trained before the first input, not while timing it
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider input(bytes, size);
    const data::Tokenizer& tokenizer = hnas::fuzz::small_tokenizer();
    const std::string directory = (hnas::fuzz::scratch_dir() / "prepared").string();
    std::filesystem::remove_all(directory);  // the previous input's
    std::filesystem::create_directory(directory);
    const bool pairs = input.ConsumeBool();
    const int id_bytes = one_in(input, 16) ? input.PickValueInArray({0, 1, 3, 8}) : input.ConsumeBool() ? 2 : 4;

    Json sources = Json::array(), shards = Json::array();
    std::vector<data::TextSource> text_sources;
    std::string article, title;
    if (pairs) {
        article = add_source(input, sources, "train.article.txt", nullptr);
        title = add_source(input, sources, "train.title.txt", nullptr);
    } else {
        static const data::DocumentUnit kUnits[] = {data::DocumentUnit::file, data::DocumentUnit::block, data::DocumentUnit::line};
        for (int i = input.ConsumeIntegralInRange<int>(1, 3); i > 0; --i) {
            const data::DocumentUnit unit = input.PickValueInArray(kUnits);
            text_sources.push_back({add_source(input, sources, i == 1 ? "one.txt" : i == 2 ? "two.txt" : "three.txt", hnas::name_of(unit)), unit});
        }
    }
    if (one_in(input, 16)) sources.erase(sources.begin());  // fewer than the config names
    int64_t pair_count = 0;
    for (int64_t k = input.ConsumeIntegralInRange<int64_t>(0, 4), i = 0; i < k; ++i) {
        shards.push_back(write_shard(input, "prepared/" + data::prepared::shard_name(i), pairs, id_bytes));
        if (shards.back().contains("ends") && shards.back()["ends"].is_number_unsigned()) pair_count += shards.back()["ends"].get<int64_t>() / 2;
    }
    Json manifest = {{"format", pairs ? "hnas-prepared-pairs" : "hnas-prepared-text"},
                     {"version", data::kPreparedTextVersion},
                     {"tokenizer", {{"hash", data::prepared::hex64(tokenizer.model_hash())}, {"vocab_size", tokenizer.vocab_size()}}},
                     {"id_bytes", id_bytes},
                     {"sources", sources},
                     {"shards", shards},
                     {"counts", {{"pairs", pair_count}, {"left_out", 0}}}};
    if (one_in(input, 16)) manifest[input.PickValueInArray({"format", "version", "tokenizer", "id_bytes", "sources", "shards", "counts"})] = hnas::fuzz::hostile_value(input);
    if (!one_in(input, 64)) {
        hnas::fuzz::write_scratch_file("prepared/manifest.json", one_in(input, 32) ? input.ConsumeRemainingBytesAsString() : manifest.dump(1));
    }

    if (pairs) {
        std::optional<data::PreparedPairs> opened;
        hnas::fuzz::reject_only_with_hnas_errors([&] { opened.emplace(directory, article, title, tokenizer); });
        if (opened) hnas::fuzz::must_succeed("reading the pairs", [&] { read_pairs(*opened, tokenizer.vocab_size()); });
    } else {
        std::optional<data::PreparedText> opened;
        hnas::fuzz::reject_only_with_hnas_errors([&] { opened = data::open_prepared_text(directory, text_sources, tokenizer); });
        if (opened) hnas::fuzz::must_succeed("reading the corpus", [&] { read_text(opened->corpus, tokenizer.vocab_size()); });
    }
    return 0;
}
