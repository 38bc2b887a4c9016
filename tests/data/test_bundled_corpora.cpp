// The bundled pretraining corpora are the files their manifest describes: every file named in
// data/corpus/README.md's MD5 block exists with that MD5 sum (computed by coreutils' md5sum), and every
// .txt file of data/corpus/ is named there.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

namespace {

namespace fs = std::filesystem;
const fs::path kCorpus = fs::path(HNAS_SOURCE_DIR) / "data" / "corpus";

// file name → MD5 sum, from the README's lines of the form "<32 hex digits>  <file>".
std::map<std::string, std::string> manifest() {
    std::ifstream readme(kCorpus / "README.md");
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

TEST(BundledCorpora, EveryFileHasTheMd5SumItsManifestGives) {
    const std::map<std::string, std::string> sums = manifest();
    ASSERT_GE(sums.size(), 4u) << "the MD5 block of " << (kCorpus / "README.md");
    for (const auto& [file, sum] : sums) {
        ASSERT_TRUE(fs::exists(kCorpus / file)) << file << " is in the manifest but not in data/corpus";
        EXPECT_EQ(md5_of(kCorpus / file), sum) << file;
    }
    for (const auto& entry : fs::directory_iterator(kCorpus)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() == ".txt") {
            EXPECT_TRUE(sums.contains(name)) << name << " has no MD5 sum in the manifest";
        }
    }
}

}  // namespace
