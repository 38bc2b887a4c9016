#include "tasks/trained_model.h"

#include <limits>

#include "io/checkpoint.h"
#include "models/model_factory.h"
#include "models/model_io.h"
#include "tasks/task.h"

namespace hnas::tasks {

namespace {
void check_metadata_has(const io::Checkpoint& checkpoint, const char* key) {
    HNAS_CHECK(checkpoint.metadata().contains(key), checkpoint.path(), ": no \"", key,
               "\" in the metadata; not a checkpoint of hnas train");
}
}  // namespace

config::ExperimentConfig saved_config(const io::Checkpoint& checkpoint) {
    check_metadata_has(checkpoint, "config");
    return parse_config(config::upgrade_saved_config(checkpoint.metadata().at("config")));
}

TrainedCheckpoint read_trained_checkpoint(const std::string& checkpoint_path) {
    io::Checkpoint checkpoint = io::Checkpoint::load(checkpoint_path);
    const auto& meta = checkpoint.metadata();
    config::ExperimentConfig config = saved_config(checkpoint);
    for (const char* key : {"vocab_size", "step"}) check_metadata_has(checkpoint, key);
    HNAS_CHECK(checkpoint.has("tokenizer.model"), checkpoint_path, ": holds no tokenizer.model");
    const int64_t step = json_integer(meta.at("step"), 0, std::numeric_limits<int64_t>::max(), checkpoint_path + ": the metadata's step");
    data::Tokenizer tokenizer = data::Tokenizer::from_serialized(checkpoint.bytes("tokenizer.model"));
    // The model's rows must be the tokenizer's pieces: export and decoding index one by the other.
    config.model.vocab_size = json_integer(meta.at("vocab_size"), tokenizer.vocab_size(), tokenizer.vocab_size(),
                                           checkpoint_path + ": the metadata's vocab_size (the tokenizer's pieces)");
    return {std::move(checkpoint), step, std::move(config), std::move(tokenizer)};
}

TrainedModel load_trained_model(const std::string& checkpoint_path) {
    TrainedCheckpoint source = read_trained_checkpoint(checkpoint_path);
    TrainedModel trained{checkpoint_path, source.step, std::move(source.config), std::move(source.tokenizer),
                         std::make_unique<Rng>(0, 1), nullptr};
    Rng init_rng(trained.config.seed, 0);  // every parameter is then overwritten from the checkpoint
    trained.model = models::build_model(trained.config.model, init_rng, *trained.dropout_rng);
    models::load_parameters(source.checkpoint, *trained.model);
    trained.model->set_training(false);
    return trained;
}

}  // namespace hnas::tasks
