// Fuzzes the readers of the fine-tuning and import paths on untrusted files: the last input byte picks
// the reader, the rest is the file.
//   0  safetensors (hnas import-bert): read_safetensors, and what it accepts must survive a write and
//      a read back unchanged
//   1  SQuAD JSON (task span): read_squad, then the windows of every question under small limits
//   2  GLUE-style TSV (task classify): labels collected, then the examples read and batched
//   3  a WordPiece vocab.txt, then the same bytes tokenized by BERT's basic tokenizer and the
//      vocabulary; every id must be in the vocabulary
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "data/glue.h"
#include "data/squad_features.h"
#include "data/wordpiece.h"
#include "io/safetensors.h"
#include "fuzz_support.h"

namespace {

namespace data = hnas::data;
namespace io = hnas::io;
namespace fuzz = hnas::fuzz;

void safetensors(const std::string& bytes) {
    const std::string path = fuzz::write_scratch_file("fuzz.safetensors", bytes);
    std::optional<io::SafeTensors> read;
    fuzz::reject_only_with_hnas_errors([&] { read = io::read_safetensors(path); });
    if (!read) return;
    const std::string copy = (fuzz::scratch_dir() / "copy.safetensors").string();
    fuzz::must_succeed("writing back an accepted safetensors file", [&] { io::write_safetensors(copy, *read); });
    io::SafeTensors again;
    fuzz::must_succeed("reading back a written safetensors file", [&] { again = io::read_safetensors(copy); });
    for (const auto& [name, tensor] : read->tensors) {
        const auto found = again.tensors.find(name);
        if (found == again.tensors.end() || found->second.shape() != tensor.shape() ||
            std::memcmp(found->second.data(), tensor.data(), static_cast<size_t>(tensor.numel()) * 4) != 0) {
            std::fprintf(stderr, "finding: tensor %s changed through a write and a read\n", name.c_str());
            std::abort();
        }
    }
}

void squad(const std::string& bytes) {
    const std::string path = fuzz::write_scratch_file("fuzz.json", bytes);
    fuzz::reject_only_with_hnas_errors([&] {
        const data::SquadFile file = data::read_squad(path);
        data::SpanFeatureOptions options;
        options.max_seq = 24;
        options.doc_stride = 3;
        options.max_query = 6;
        for (const data::SpanFeature& feature : data::make_span_features(file, fuzz::small_tokenizer(), options)) {
            if (static_cast<int64_t>(feature.ids.size()) > options.max_seq || feature.start > feature.end ||
                feature.end >= static_cast<int32_t>(feature.ids.size())) {
                std::fprintf(stderr, "finding: a window of %zu pieces with the answer at [%d, %d]\n", feature.ids.size(), feature.start,
                             feature.end);
                std::abort();
            }
        }
    });
}

void tsv(const std::string& bytes) {
    const std::string path = fuzz::write_scratch_file("fuzz.tsv", bytes);
    fuzz::reject_only_with_hnas_errors([&] {
        data::ClassificationDataOptions options;
        options.path = path;
        options.layout = {0, 1, 2, true};
        options.labels.names = data::collect_label_names(path, options.layout, hnas::DamagedLines::skip);
        options.max_seq = 12;
        options.batch = {4, 0, 1};
        options.epochs = 1;
        options.damaged_lines = hnas::DamagedLines::skip;
        data::ClassificationBatcher batcher(fuzz::small_tokenizer(), options);
        while (auto batch = batcher.next()) {
            if (batch->input_ids.dim(1) > options.max_seq) std::abort();
        }
    });
}

void wordpiece(const std::string& bytes) {
    std::optional<data::WordPiece> vocabulary;
    fuzz::reject_only_with_hnas_errors([&] { vocabulary.emplace(bytes, "fuzz vocab.txt"); });
    (void)data::basic_tokenize(bytes);
    if (!vocabulary) return;
    std::vector<int32_t> ids;
    vocabulary->encode(bytes, ids);
    for (int32_t id : ids) {
        if (id < 0 || static_cast<size_t>(id) >= vocabulary->pieces().size()) {
            std::fprintf(stderr, "finding: id %d outside a vocabulary of %zu\n", id, vocabulary->pieces().size());
            std::abort();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data), size - 1);
    switch (data[size - 1] % 4) {
        case 0: safetensors(bytes); break;
        case 1: squad(bytes); break;
        case 2: tsv(bytes); break;
        default: wordpiece(bytes); break;
    }
    return 0;
}
