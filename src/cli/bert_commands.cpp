// `hnas import-bert` and `hnas export`: public BERT weights in, hnas BERT-style models out, in Hugging
// Face's safetensors layout (src/convert/hf_bert.h).
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "convert/hf_bert.h"
#include "nn/attention.h"

namespace hnas::cli {

void add_bert_commands(CLI::App& app) {
    auto import_options = std::make_shared<convert::ImportOptions>();
    auto* import_command = app.add_subcommand(
        "import-bert", "Write an hnas masked-LM checkpoint from a Hugging Face BERT (safetensors + vocab.txt)");
    import_command->add_option("--weights", import_options->weights, "model.safetensors (BertForPreTraining or BertModel names)")
        ->required()
        ->check(CLI::ExistingFile);
    import_command->add_option("--vocab", import_options->vocab, "Its vocab.txt")->required()->check(CLI::ExistingFile);
    import_command->add_option("--config", import_options->config, "Its config.json (default: the one beside --weights)")
        ->check(CLI::ExistingFile);
    import_command->add_option("--heads", import_options->heads, "Attention heads, when no config.json gives them")
        ->check(positive_integer<int64_t>());
    import_command->add_option("--attention", import_options->attention, "The attention kind the encoder runs with (default lnas)");
    import_command->add_option("--out", import_options->out, "The hnas checkpoint to write")->required();
    import_command->add_flag("--allow-non-finite", import_options->allow_non_finite,
                             "Import weights that are NaN or infinite as they are (without it they are refused, naming each tensor)");
    import_command->callback([import_options] {
        nn::check_attention_kind_allowed(import_options->attention, nn::AttentionRole::bidirectional);
        const convert::ImportReport report = convert::import_bert(*import_options);
        for (const auto& name : report.fresh) spdlog::info("import-bert: {} starts fresh", name);
        for (const auto& name : report.unused) spdlog::info("import-bert: {} unused", name);
        spdlog::info("import-bert: wrote {} ({} parameters from {}, {} fresh)", import_options->out, report.mapped.size(),
                     import_options->weights, report.fresh.size());
    });

    struct ExportOptions {
        std::string checkpoint, out;
    };
    auto export_options = std::make_shared<ExportOptions>();
    auto* export_command = app.add_subcommand(
        "export", "Write an hnas BERT-style checkpoint as Hugging Face safetensors, config.json and vocab.txt");
    export_command->add_option("--checkpoint", export_options->checkpoint, "A checkpoint of hnas train or import-bert")
        ->required()
        ->check(CLI::ExistingFile);
    export_command->add_option("--out", export_options->out, "The folder to write")->required();
    export_command->callback([export_options] {
        convert::export_bert(export_options->checkpoint, export_options->out);
        spdlog::info("export: wrote {}/model.safetensors, config.json and the vocabulary", export_options->out);
    });
}

}  // namespace hnas::cli
