// Fuzzes the masked-LM reader as training uses it: one or two text sources, each read as whole-file,
// blank-line-block or one-line documents, are scanned for damaged lines, then go through the whole
// pipeline (damaged-line and length checks, sentence splitting, tokenizer, sequence packing, n-gram
// masking, batches) for one or two epochs. Whatever was delivered must also be delivered again after
// restoring a saved position, as a resumed run relies on.
//
// Input layout (libFuzzer's FuzzedDataProvider): the pipeline's options in the last bytes, then from
// the front the first source's text and, when the options ask for a second source, the first text
// ends at the first backslash not followed by a second one ("\\" stands for one backslash) and the
// second source's text follows.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/mlm.h"
#include "fuzz_support.h"

namespace {

namespace data = hnas::data;

struct Input {
    data::MlmDataOptions options;
    size_t resume_at = 0;  // which delivered batch to restore the position of, modulo their number
};

data::DocumentUnit pick_unit(FuzzedDataProvider& provider) {
    return provider.PickValueInArray({data::DocumentUnit::file, data::DocumentUnit::block, data::DocumentUnit::line});
}

// Small limits, so short inputs reach the over-long line, trimming and batch-budget paths.
Input read_input(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider provider(bytes, size);
    Input input;
    data::MlmDataOptions& options = input.options;
    options.max_line_bytes = provider.ConsumeIntegralInRange<size_t>(1, 512);
    options.max_seq = provider.ConsumeIntegralInRange<int64_t>(5, 48);
    options.short_seq_prob = provider.ConsumeProbability<double>();
    options.swap_prob = provider.ConsumeProbability<double>();
    options.masking.mask_prob = provider.ConsumeFloatingPointInRange<double>(0.01, 0.99);
    options.masking.max_ngram = provider.ConsumeIntegralInRange<int>(1, 3);
    options.shuffle = provider.ConsumeBool();
    options.seed = provider.ConsumeIntegral<uint8_t>();
    options.batch.max_sentences = provider.ConsumeIntegralInRange<int64_t>(0, 8);
    options.batch.max_tokens = provider.ConsumeIntegralInRange<int64_t>(0, 256);
    options.epochs = provider.ConsumeIntegralInRange<int64_t>(1, 2);
    options.prefetch = 0;  // on this thread: a background thread's crash would be reported less clearly
    input.resume_at = provider.ConsumeIntegral<uint8_t>();
    const data::DocumentUnit first_unit = pick_unit(provider);
    const bool two_sources = provider.ConsumeBool();
    const data::DocumentUnit second_unit = pick_unit(provider);
    options.damaged_lines = provider.ConsumeBool() ? hnas::DamagedLines::skip : hnas::DamagedLines::reject;
    const std::string first_text =
        two_sources ? provider.ConsumeRandomLengthString() : provider.ConsumeRemainingBytesAsString();
    options.sources.push_back({hnas::fuzz::write_scratch_file("first.txt", first_text), first_unit});
    if (two_sources) {
        options.sources.push_back(
            {hnas::fuzz::write_scratch_file("second.txt", provider.ConsumeRemainingBytesAsString()), second_unit});
    }
    return input;
}

bool same_batch(const data::MlmBatch& a, const data::MlmBatch& b) {
    using hnas::fuzz::same_tensor;
    return a.tokens == b.tokens && same_tensor(a.input_ids, b.input_ids) && same_tensor(a.segment_ids, b.segment_ids) &&
           same_tensor(a.valid, b.valid) && same_tensor(a.masked_positions, b.masked_positions) &&
           same_tensor(a.masked_labels, b.masked_labels) && same_tensor(a.sentence_order, b.sentence_order);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    hnas::fuzz::small_tokenizer();  // trained before the first input, not while timing it
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    const Input input = read_input(bytes, size);
    for (const data::TextSource& source : input.options.sources)
        hnas::fuzz::scan_as_training_does(source.path, input.options.damaged_lines);
    std::optional<std::vector<hnas::fuzz::Delivered<data::MlmBatch>>> delivered;
    hnas::fuzz::reject_only_with_hnas_errors([&] { delivered = hnas::fuzz::read_all<data::MlmBatcher>(input.options); });
    if (delivered && !delivered->empty()) {
        hnas::fuzz::check_resume<data::MlmBatcher>(input.options, (*delivered)[input.resume_at % delivered->size()], same_batch);
    }
    return 0;
}
