// `hnas import-bert` and `hnas export`: public BERT weights in, hnas BERT-style models out, in Hugging
// Face's safetensors layout (src/convert/hf_bert.h); `hnas hidden-states` and `hnas tokenize`, what the
// parity script compares with transformers (scripts/bert_parity.py, and its --wordpiece).
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "command_line/validators.h"
#include "base/check.h"
#include "convert/bert_states.h"
#include "convert/hf_bert.h"
#include "data/tokenizer.h"
#include "nn/attention.h"

namespace hnas::cli {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    HNAS_CHECK(in, "cannot read ", path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(std::move(line));
    }
    return lines;
}

void add_import_command(CLI::App& app) {
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
        ->check(command_line::positive_integer<int64_t>());
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
}

void add_export_command(CLI::App& app) {
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

void add_hidden_states_command(CLI::App& app) {
    struct StatesOptions {
        std::string checkpoint, input, out;
        convert::HiddenStatesOptions states;
        int64_t max_lines = 0;
    };
    auto states_options = std::make_shared<StatesOptions>();
    auto* states_command = app.add_subcommand(
        "hidden-states", "Every layer's hidden states of a BERT-style checkpoint on the lines of a text file, as safetensors");
    states_command->add_option("--checkpoint", states_options->checkpoint, "A BERT-style checkpoint (import-bert, mlm, classify, span)")
        ->required()
        ->check(CLI::ExistingFile);
    states_command->add_option("--input", states_options->input, "Text, one sequence per line ([CLS] line [SEP])")
        ->required()
        ->check(CLI::ExistingFile);
    states_command->add_option("--out", states_options->out, "The safetensors file to write")->required();
    states_command->add_option("--batch", states_options->states.batch, "Lines per padded batch (default 8)")
        ->check(command_line::positive_integer<int64_t>());
    states_command->add_option("--precision", states_options->states.precision, "Matmul precision, f32 (default) or bf16")
        ->transform(command_line::enum_choices<backend::MatmulPrecision>());
    states_command->add_option("--max-lines", states_options->max_lines, "Only the first N lines (default: all)")
        ->check(command_line::positive_integer<int64_t>());
    states_command->callback([states_options] {
        std::vector<std::string> lines = read_lines(states_options->input);
        if (states_options->max_lines > 0 && static_cast<int64_t>(lines.size()) > states_options->max_lines) {
            lines.resize(static_cast<size_t>(states_options->max_lines));
        }
        convert::write_hidden_states(states_options->checkpoint, lines, states_options->states, states_options->out);
        spdlog::info("hidden-states: wrote {} ({} lines, {} matmuls)", states_options->out, lines.size(), name_of(states_options->states.precision));
    });
}

void add_tokenize_command(CLI::App& app) {
    struct TokenizeOptions {
        std::string vocab, input;
        bool pieces = false;
    };
    auto tokenize_options = std::make_shared<TokenizeOptions>();
    auto* tokenize_command = app.add_subcommand(
        "tokenize", "hnas's WordPiece tokenization of each line: vocab.txt rows (or pieces), space-separated, one line per line");
    tokenize_command->add_option("--vocab", tokenize_options->vocab, "A BERT vocab.txt")->required()->check(CLI::ExistingFile);
    tokenize_command->add_option("--input", tokenize_options->input, "Text, one sequence per line")->required()->check(CLI::ExistingFile);
    tokenize_command->add_flag("--pieces", tokenize_options->pieces, "Print the pieces instead of their vocab.txt rows");
    tokenize_command->callback([tokenize_options] {
        const data::Tokenizer tokenizer = data::Tokenizer::load_wordpiece(tokenize_options->vocab);
        const std::vector<int64_t>& rows = tokenizer.source_rows();
        std::string out;
        std::vector<int32_t> ids;
        for (const std::string& line : read_lines(tokenize_options->input)) {
            ids.clear();
            tokenizer.encode(line, ids);
            for (size_t i = 0; i < ids.size(); ++i) {
                if (i > 0) out += ' ';
                if (tokenize_options->pieces) {
                    out += tokenizer.piece(ids[i]);
                } else {
                    out += std::to_string(rows[static_cast<size_t>(ids[i])]);
                }
            }
            out += '\n';
        }
        std::cout << out << std::flush;
    });
}

}  // namespace

void add_bert_commands(CLI::App& app) {
    add_import_command(app);
    add_export_command(app);
    add_hidden_states_command(app);
    add_tokenize_command(app);
}

}  // namespace hnas::cli
