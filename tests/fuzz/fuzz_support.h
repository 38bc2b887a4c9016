// What the libFuzzer targets share. The readers under test open files by path, so each target writes
// its input into a private scratch directory first. A reader may reject any input, but only with
// hnas::Error (which names the file and the problem): every other exception escapes the target, and
// libFuzzer reports it as a crash and saves the input.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../same_tensor.h"
#include "base/check.h"
#include "base/text_io.h"
#include "data/batching.h"
#include "data/tokenizer.h"
#include "tensor/tensor.h"

namespace hnas::fuzz {

// A directory of this process's own under $TMPDIR (scripts/fuzz.sh points it into its scratch
// directory), removed at normal exit. The exit handler is registered once the path exists, so it
// runs before the path is destroyed.
inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base && *base ? base : "/tmp") + "/hnas-fuzz.XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) std::abort();
        return std::filesystem::path(pattern);
    }();
    static const bool removed_at_exit = std::atexit([] {
        std::error_code ignored;
        std::filesystem::remove_all(scratch_dir(), ignored);
    }) == 0;
    (void)removed_at_exit;
    return dir;
}

// Writes `bytes` to the scratch file `name` and returns its path.
inline std::string write_scratch_file(const std::string& name, std::string_view bytes) {
    const std::string path = (scratch_dir() / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) std::abort();
    return path;
}

// Runs `read`, accepting a rejection by hnas::Error; any other exception propagates. With
// HNAS_FUZZ_VERBOSE=1 in the environment rejections are printed, to see how far seeds get.
template <typename Read>
void reject_only_with_hnas_errors(Read&& read) {
    static const bool verbose = std::getenv("HNAS_FUZZ_VERBOSE") != nullptr;
    try {
        read();
    } catch (const Error& e) {
        if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
    }
}

// Runs `step`, which no input may make fail: an hnas::Error is reported as a finding (abort, so
// libFuzzer saves the input) with `what` and the error's message.
template <typename Step>
void must_succeed(const char* what, Step&& step) {
    try {
        step();
    } catch (const Error& e) {
        std::fprintf(stderr, "finding: %s failed: %s\n", what, e.what());
        std::abort();
    }
}

using testing::same_tensor;

// The pass over a data file that `hnas train` makes before it writes anything (damaged and blank
// lines), which the text targets run before their reader as training does.
inline void scan_as_training_does(const std::string& path, DamagedLines policy) {
    reject_only_with_hnas_errors([&] { (void)scan_text_file(path, policy); });
}

// A small BPE model trained once per process on 2,000 lines sampled from the bundled Gigaword training
// pairs: the text readers' targets need a real tokenizer, and training one keeps binary files out of
// the repository.
inline const data::Tokenizer& small_tokenizer() {
    static const data::Tokenizer tokenizer = [] {
        const std::string gigaword = std::string(HNAS_SOURCE_DIR) + "/data/gigaword/train_10k/";
        data::TokenizerTrainOptions options;
        options.inputs = {gigaword + "train.article.txt", gigaword + "train.title.txt"};
        options.model_prefix = (scratch_dir() / "tokenizer").string();
        options.vocab_size = 400;
        options.type = data::TokenizerType::bpe;
        options.input_sentence_size = 2000;
        data::train_tokenizer(options);
        return data::Tokenizer::load(options.model_prefix + ".model");
    }();
    return tokenizer;
}

// A batch a pipeline delivered and its data position just before it.
template <typename Batch>
struct Delivered {
    data::DataPosition position;
    Batch batch;
};

// Every batch of the pipeline Batcher over `options`, with the position before each.
template <typename Batcher, typename Options>
auto read_all(const Options& options) {
    Batcher batcher(small_tokenizer(), options);
    using Batch = typename decltype(batcher.next())::value_type;
    std::vector<Delivered<Batch>> delivered;
    while (true) {
        const data::DataPosition position = batcher.position();
        std::optional<Batch> batch = batcher.next();
        if (!batch) return delivered;
        delivered.push_back({position, std::move(*batch)});
    }
}

// A pipeline restored to a delivered position must deliver the same batch again; same(a, b) compares
// two batches.
template <typename Batcher, typename Options, typename Batch, typename Same>
void check_resume(const Options& options, const Delivered<Batch>& expected, Same same) {
    std::optional<Batch> batch;
    must_succeed("resuming from a delivered position", [&] {
        Batcher batcher(small_tokenizer(), options);
        batcher.restore(expected.position);
        batch = batcher.next();
    });
    if (!batch || !same(*batch, expected.batch)) {
        std::fprintf(stderr, "finding: after restoring epoch %lld window %lld batch %lld the batch differs\n",
                     static_cast<long long>(expected.position.epoch), static_cast<long long>(expected.position.window),
                     static_cast<long long>(expected.position.batch));
        std::abort();
    }
}

}  // namespace hnas::fuzz
