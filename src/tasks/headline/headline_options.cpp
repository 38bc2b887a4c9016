#include "tasks/headline/headline_options.h"

#include <algorithm>

#include "tasks/task_options.h"

namespace hnas::tasks::headline {

namespace {

using config::ConfigNode;
using config::Doc;

void defaults(config::ExperimentConfig& config) { install_default_options<HeadlineOptions>(config); }

void parse_data(ConfigNode& node, HeadlineOptions& o) {
    o.train_articles = node.text("train_articles", o.train_articles, "line-aligned training articles (made by `data/gigaword/prepare_data.py`)");
    o.train_titles = node.text("train_titles", o.train_titles, "their titles, line by line");
    o.prepared = node.text("prepared", o.prepared,
                           "a directory `hnas prepare` made of `train_articles` and `train_titles` with the run's tokenizer, "
                           "read memory-mapped in their place (docs/data.md); empty: the files are read and tokenized window by window");
    o.valid_articles = node.text("valid_articles", o.valid_articles, "validation articles");
    o.valid_titles = node.text("valid_titles", o.valid_titles, "their titles");
    o.max_source = node.integer("max_source", o.max_source, "pieces kept per article", 1, config::kMaxLength);
    o.max_target = node.integer("max_target", o.max_target, "decoder positions per title (title pieces kept: `max_target` − 1)", 2,
                                config::kMaxLength);
    o.shuffle_buffer = node.integer("shuffle_buffer", o.shuffle_buffer, "examples in memory at once while streaming and shuffling", 1);
}

void parse_test(ConfigNode& node, HeadlineOptions& o) {
    o.test_articles = node.text("articles", o.test_articles, "test articles, one per line (the standard Gigaword test set)");
    o.test_references = node.text("references", o.test_references, "their reference headlines");
    o.wordnet = node.text("wordnet", o.wordnet, "the folder of WordNet 2.0's exception lists that ROUGE-1.5.5's -m stemming reads");
    decode::DecodingConfig& d = o.decoding;
    d.beam = node.integer("beam", d.beam, "beam size of the test decoding (1: greedy); also `hnas decode`'s and `hnas eval`'s", 1);
    d.length_penalty = node.number("length_penalty", d.length_penalty, "A: hypotheses ranked by log P / (tokens + 1)^A (0: plain log P)", 0.0);
    d.min_length = node.integer("min_length", d.min_length, "fewest tokens before eos", 0);
    d.max_length = node.integer("max_length", d.max_length, "most tokens before eos", 1);
    d.no_repeat_ngram = node.integer("no_repeat_ngram", d.no_repeat_ngram, "no n-gram of this size twice (0: off)", 0);
    o.test_batch = node.integer("batch", o.test_batch, "articles decoded together", 1);
}

void parse(config::TaskSections& sections, config::ExperimentConfig& config) {
    HeadlineOptions& o = options_of<HeadlineOptions>(config, schema());
    parse_data(sections.data, o);
    o.label_smoothing = sections.train.number("label_smoothing", o.label_smoothing, "target distribution (1−ε)·one-hot + ε/V", 0.0, 0.99);
    o.decode_examples = sections.validation.integer("decode_examples", o.decode_examples,
                                                    "validation articles decoded greedily and scored with ROUGE-L F1", 0);
    o.max_decode_length = sections.validation.integer("max_decode_length", o.max_decode_length, "longest decoded headline", 1);
    parse_test(sections.test, o);
}

// ROUGE-L needs decoded headlines: without them the loss picks the best checkpoint.
std::vector<std::string> metrics(const config::ExperimentConfig& config) {
    return options(config).decode_examples > 0 ? std::vector<std::string>{"rouge_l", "loss"} : std::vector<std::string>{"loss"};
}

}  // namespace

const config::TaskSchema& schema() {
    static const config::TaskSchema headline{
        .name = "headline",
        .description = "headline generation with an encoder-decoder (paper 000's Gigaword task)",
        .defaults = defaults,
        .parse = parse,
        .metrics = metrics,
        .key_table_variants = nullptr,
    };
    return headline;
}

const HeadlineOptions& options(const config::ExperimentConfig& config) { return options_of<HeadlineOptions>(config, schema()); }

int64_t max_source(const config::ExperimentConfig& config) { return std::min(options(config).max_source, config.model.max_source_positions); }

}  // namespace hnas::tasks::headline
