#include "tasks/task_options.h"

namespace hnas::tasks {

LabelledFiles parse_labelled_files(config::ConfigNode& data) {
    LabelledFiles files;
    files.train_file = data.text("train_file", files.train_file,
                                 config::Doc("classify: a TSV file; span: a SQuAD JSON file; images: a CSV file of images, per line "
                                             "the pixels row by row, then the class id (data/images.h)",
                                             "required"));
    if (files.train_file.empty()) data.fail("train_file", "is required");
    files.valid_file = data.text("valid_file", files.valid_file, "the same for validation; empty: no validation");
    return files;
}

std::string parse_test_file(config::ConfigNode& test, const LabelledFiles& files) {
    std::string file = test.text("file", "", config::Doc("the labelled test file, in the training file's format", "`data.valid_file`"));
    if (file.empty()) {
        file = files.valid_file;
        test.set_resolved("file", file);
    }
    return file;
}

int64_t parse_test_batches(config::ConfigNode& test, int64_t fallback) {
    return test.integer("batches", fallback,
                        "test batches of `data.batch_sentences` rows (synthetic: at `data.valid_length`), from a "
                        "stream of their own (the same for every run and seed, so settings are compared on the same "
                        "examples)",
                        1);
}

double parse_same_class_templates(config::ConfigNode& data, double fallback) {
    return data.number("same_class_templates", fallback,
                       "paper 003 §9's recipe (0.5 there): the probability that a training example's layers of a kind that "
                       "compares templates (`ot`) also weigh the templates of a random other training example of its class; "
                       "validation and test see only their input's; 0: never",
                       0.0, 1.0);
}

}  // namespace hnas::tasks
