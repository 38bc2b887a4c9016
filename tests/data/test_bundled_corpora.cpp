// The bundled files are the files their manifests describe: every file named in the MD5 block of
// data/corpus/README.md and data/pretrained/README.md exists with that MD5 sum (computed by coreutils'
// md5sum), and every corpus (.txt), encoder (.ckpt) or tokenizer (.model) of those folders is named there.
// The published encoders are weights-only masked-LM checkpoints that load and verify.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "tasks/trained_model.h"

namespace hnas {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(HNAS_SOURCE_DIR) / "data";

// file name → MD5 sum, from the README's lines of the form "<32 hex digits>  <file>".
std::map<std::string, std::string> manifest(const fs::path& folder) {
    std::ifstream readme(folder / "README.md");
    const std::regex line_pattern("^([0-9a-f]{32})  (\\S+)$");
    std::map<std::string, std::string> sums;
    std::string line;
    std::smatch match;
    while (std::getline(readme, line)) {
        if (std::regex_match(line, match, line_pattern)) sums[match[2]] = match[1];
    }
    return sums;
}

std::string md5_of(const fs::path& path) {
    const std::string command = "md5sum '" + path.string() + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return "";
    char digest[33] = {};
    const size_t read = std::fread(digest, 1, 32, pipe);
    ::pclose(pipe);
    return read == 32 ? std::string(digest, 32) : "";
}

void expect_manifest_matches(const fs::path& folder, const std::vector<std::string>& extensions, size_t at_least) {
    const std::map<std::string, std::string> sums = manifest(folder);
    ASSERT_GE(sums.size(), at_least) << "the MD5 block of " << (folder / "README.md");
    for (const auto& [file, sum] : sums) {
        ASSERT_TRUE(fs::exists(folder / file)) << file << " is in the manifest but not in " << folder;
        EXPECT_EQ(md5_of(folder / file), sum) << file;
    }
    for (const auto& entry : fs::directory_iterator(folder)) {
        const std::string name = entry.path().filename().string();
        if (std::ranges::find(extensions, entry.path().extension().string()) != extensions.end()) {
            EXPECT_TRUE(sums.contains(name)) << name << " has no MD5 sum in the manifest of " << folder;
        }
    }
}

TEST(BundledCorpora, EveryFileHasTheMd5SumItsManifestGives) { expect_manifest_matches(kData / "corpus", {".txt"}, 4); }

TEST(PretrainedEncoders, EveryFileHasTheMd5SumItsManifestGives) {
    expect_manifest_matches(kData / "pretrained", {".ckpt", ".model"}, 4);
}

TEST(PretrainedEncoders, AreWeightsOnlyMaskedLmCheckpoints) {
    for (const auto& [file, sum] : manifest(kData / "pretrained")) {
        if (!file.ends_with(".ckpt")) continue;
        const std::string path = (kData / "pretrained" / file).string();
        const io::Checkpoint checkpoint = io::Checkpoint::load(path);  // verifies every checksum
        EXPECT_TRUE(checkpoint.metadata().contains("weights_only_from")) << file;
        for (const io::EntryInfo& entry : checkpoint.entries()) EXPECT_FALSE(entry.name.starts_with("optimizer/")) << file << ": " << entry.name;
        const tasks::TrainedCheckpoint trained = tasks::read_trained_checkpoint(path);
        EXPECT_EQ(std::string(trained.config.task->name), "mlm") << file;
        EXPECT_EQ(trained.config.model.vocab_size, trained.tokenizer.vocab_size()) << file;
    }
}

// The tokenizer shipped beside the encoders (for the same model trained from scratch) is theirs: the same
// pieces, and the same segmentation of text none of them was trained on.
TEST(PretrainedEncoders, ShareTheTokenizerShippedBesideThem) {
    const data::Tokenizer shipped = data::Tokenizer::load((kData / "pretrained" / "tokenizer.model").string());
    std::vector<std::string> lines;
    {
        std::ifstream text(kData / "finetune" / "sotu_era.test.tsv");
        for (std::string line; lines.size() < 200 && std::getline(text, line);) lines.push_back(line);
    }
    ASSERT_EQ(lines.size(), 200u);
    for (const auto& [file, sum] : manifest(kData / "pretrained")) {
        if (!file.ends_with(".ckpt")) continue;
        const data::Tokenizer own = tasks::read_trained_checkpoint((kData / "pretrained" / file).string()).tokenizer;
        ASSERT_EQ(own.vocab_size(), shipped.vocab_size()) << file;
        for (int32_t id = 0; id < own.vocab_size(); ++id) ASSERT_EQ(own.piece(id), shipped.piece(id)) << file << ": piece " << id;
        for (const std::string& line : lines) EXPECT_EQ(own.encode(line), shipped.encode(line)) << file << ": " << line;
    }
}

}  // namespace
}  // namespace hnas
