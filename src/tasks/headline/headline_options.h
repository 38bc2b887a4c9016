// The headline task's own config keys: the line-aligned article and title files, how much of each is
// kept, label smoothing, the validation's greedy headlines, and the test set with its beam search.
#pragma once

#include <string>

#include "config/experiment_config.h"
#include "decode/beam_search.h"

namespace hnas::tasks::headline {

struct HeadlineOptions : config::TaskOptionsOf<HeadlineOptions> {
    // data
    std::string train_articles = "data/gigaword/derived/train_all.article.txt";
    std::string prepared;
    std::string train_titles = "data/gigaword/derived/train_all.title.txt";
    std::string valid_articles = "data/gigaword/valid_1k/valid.article.filter.txt";
    std::string valid_titles = "data/gigaword/valid_1k/valid.title.filter.txt";
    int64_t max_source = 128, max_target = 64, shuffle_buffer = 65536;
    // train
    float label_smoothing = 0.1f;
    // validation: articles decoded greedily for ROUGE-L
    int64_t decode_examples = 200, max_decode_length = 30;
    // test: the standard Gigaword test set (data/gigaword/README.md), scored with ROUGE-1.5.5 -m
    std::string test_articles = "data/gigaword/test_1951/input.txt";
    std::string test_references = "data/gigaword/test_1951/task1_ref0.txt";
    std::string wordnet = "data/wordnet";  // the exception lists of ROUGE's -m stemming
    decode::DecodingConfig decoding;
    int64_t test_batch = 32;
};

const config::TaskSchema& schema();
// A headline config's options; an Error for a config of another task.
const HeadlineOptions& options(const config::ExperimentConfig& config);
// The longest article the model reads: data.max_source, within the model's source positions.
int64_t max_source(const config::ExperimentConfig& config);

}  // namespace hnas::tasks::headline
