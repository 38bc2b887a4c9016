// Fuzzes the Gigaword reader as training uses it: an article file and a title file are scanned for
// damaged lines, then go through the whole pipeline (line index, damaged-line and length checks,
// tokenizer, shuffle windows, batches) for one or two epochs. Whatever was delivered must also be
// delivered again after restoring a saved position, as a resumed run relies on.
//
// Input layout (libFuzzer's FuzzedDataProvider): the pipeline's options in the last bytes, then from
// the front the article file's text ending at the first backslash not followed by a second one
// ("\\" stands for one backslash), and the title file's text after it.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/gigaword.h"
#include "fuzz_support.h"

namespace {

namespace data = hnas::data;

struct Input {
    data::Seq2SeqDataOptions options;
    size_t resume_at = 0;  // which delivered batch to restore the position of, modulo their number
};

// Small limits, so short inputs reach the over-long line, truncation and batch-budget paths.
Input read_input(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider provider(bytes, size);
    Input input;
    data::Seq2SeqDataOptions& options = input.options;
    options.max_line_bytes = provider.ConsumeIntegralInRange<size_t>(1, 512);
    options.max_source = provider.ConsumeIntegralInRange<int64_t>(1, 48);
    options.max_target = provider.ConsumeIntegralInRange<int64_t>(2, 24);
    options.shuffle_buffer = provider.ConsumeIntegralInRange<int64_t>(1, 64);
    options.shuffle_regions = provider.ConsumeIntegralInRange<int64_t>(1, std::min<int64_t>(8, options.shuffle_buffer));
    options.shuffle = provider.ConsumeBool();
    options.seed = provider.ConsumeIntegral<uint8_t>();
    options.batch.max_sentences = provider.ConsumeIntegralInRange<int64_t>(0, 8);
    options.batch.max_tokens = provider.ConsumeIntegralInRange<int64_t>(0, 256);
    options.epochs = provider.ConsumeIntegralInRange<int64_t>(1, 2);
    options.prefetch = 0;  // on this thread: a background thread's crash would be reported less clearly
    input.resume_at = provider.ConsumeIntegral<uint8_t>();
    options.damaged_lines = provider.ConsumeBool() ? hnas::DamagedLines::skip : hnas::DamagedLines::reject;
    options.article_path = hnas::fuzz::write_scratch_file("articles.txt", provider.ConsumeRandomLengthString());
    options.title_path = hnas::fuzz::write_scratch_file("titles.txt", provider.ConsumeRemainingBytesAsString());
    return input;
}

bool same_batch(const data::Seq2SeqBatch& a, const data::Seq2SeqBatch& b) {
    using hnas::fuzz::same_tensor;
    return a.example_index == b.example_index && a.source_tokens == b.source_tokens &&
           a.target_tokens == b.target_tokens && same_tensor(a.source_ids, b.source_ids) &&
           same_tensor(a.source_valid, b.source_valid) && same_tensor(a.target_input, b.target_input) &&
           same_tensor(a.target_output, b.target_output) && same_tensor(a.target_valid, b.target_valid);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    hnas::fuzz::small_tokenizer();  // trained before the first input, not while timing it
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    const Input input = read_input(bytes, size);
    hnas::fuzz::scan_as_training_does(input.options.article_path, input.options.damaged_lines);
    hnas::fuzz::scan_as_training_does(input.options.title_path, input.options.damaged_lines);
    std::optional<std::vector<hnas::fuzz::Delivered<data::Seq2SeqBatch>>> delivered;
    hnas::fuzz::reject_only_with_hnas_errors([&] { delivered = hnas::fuzz::read_all<data::Seq2SeqBatcher>(input.options); });
    if (delivered && !delivered->empty()) {
        hnas::fuzz::check_resume<data::Seq2SeqBatcher>(input.options, (*delivered)[input.resume_at % delivered->size()], same_batch);
    }
    return 0;
}
