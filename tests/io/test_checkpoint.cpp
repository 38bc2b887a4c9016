// Checkpoint files: the CRC-32C against published vectors, bit-exact round trips, the documented byte
// layout, rejection of truncated, corrupted and inconsistent files with errors naming the file and the
// problem, atomic replacement (including a write that fails half-way), and the API's own errors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/rng.h"
#include "io/checkpoint.h"
#include "tensor/random.h"
#include "test_support.h"

namespace hnas::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The error Checkpoint::load raises for `path`; a file that loads is a test failure.
std::string load_error(const std::string& path) {
    try {
        Checkpoint::load(path);
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << path << " loaded without an error";
    return "";
}

std::string header_error(const std::string& path) {
    try {
        read_checkpoint_header(path);
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "the header of " << path << " was read without an error";
    return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Tensor tensor_from_bits(const Shape& shape, const std::vector<uint32_t>& bits) {
    Tensor t = Tensor::empty(shape);
    EXPECT_EQ(static_cast<size_t>(t.numel()), bits.size());
    std::memcpy(t.data(), bits.data(), bits.size() * 4);
    return t;
}

// ±0, denormals, infinities, NaNs with payloads (quiet and signalling), extremes, then random bit patterns.
Tensor special_floats(const Shape& shape, uint64_t seed) {
    std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000,
                                  0x7FC00000, 0x7FC12345, 0x7F800001, 0xFFFFFFFF, 0x7F7FFFFF, 0x00800000};
    Rng rng(seed);
    while (static_cast<int64_t>(bits.size()) < shape_numel(shape)) bits.push_back(static_cast<uint32_t>(rng.next_u64()));
    return tensor_from_bits(shape, bits);
}

Json sample_metadata() {
    return Json::parse(R"({
        "hnas_version": "0.1.0",
        "config": {"model": {"layers": 2, "d_model": 32, "attention": ["lnas", "hnas"], "hybrid_init": 0.1},
                   "optim": {"learning_rate": 2e-5, "betas": [0.9, 0.999]}},
        "step": 1234,
        "schedule": {"warmup": 4000, "last_lr": 1.2345678901234567e-7},
        "data": {"epoch": 3, "position": 987654321012},
        "rng": {"init": [0, 1, 18446744073709551615, 9223372036854775808], "dropout": [5, 6, 7, 8]},
        "note": "ünïcödé ✓ \u0000 inside",
        "empty": {}, "nothing": null, "flag": true
    })");
}

std::string all_byte_values() {
    std::string blob;
    for (int round = 0; round < 2; ++round)
        for (int byte = 0; byte < 256; ++byte) blob.push_back(static_cast<char>(byte));
    return blob + "\n\r\x1a trailing";
}

// What a trainer stores, in miniature: parameters, optimizer moments, integer state, the tokenizer
// model, a scalar and empty entries. Sizes are not multiples of 64 bytes, so there is padding.
struct Sample {
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::vector<std::pair<std::string, std::string>> blobs;
};

Sample make_sample() {
    Rng rng(11);
    Sample sample;
    sample.tensors = {
        {"encoder.layers.0.self_attn.q_proj.weight", special_floats({4, 8}, 1)},
        {"encoder.layers.0.self_attn.q_proj.bias", normal_tensor(rng, {5})},
        {"optimizer.adam.m.encoder.layers.0.self_attn.q_proj.weight", special_floats({4, 8}, 2)},
        {"data.order", Tensor::from_ints({7}, {0, -1, 1, std::numeric_limits<int32_t>::min(),
                                               std::numeric_limits<int32_t>::max(), 42, -42})},
        {"optimizer.step_scale", Tensor::scalar(-0.0f)},
        {"empty.tensor", Tensor::zeros({0, 3})},
    };
    sample.blobs = {{"tokenizer.model", all_byte_values()}, {"empty.blob", ""}};
    return sample;
}

void write_sample(const Sample& sample, const std::string& path) {
    CheckpointWriter writer(sample_metadata());
    writer.add_tensor(sample.tensors[0].first, sample.tensors[0].second);
    writer.add_bytes(sample.blobs[0].first, sample.blobs[0].second);
    for (size_t i = 1; i < sample.tensors.size(); ++i) writer.add_tensor(sample.tensors[i].first, sample.tensors[i].second);
    writer.add_bytes(sample.blobs[1].first, sample.blobs[1].second);
    writer.write(path);
}

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
    const void* pa = a.dtype() == DType::f32 ? static_cast<const void*>(a.data()) : a.ints();
    const void* pb = b.dtype() == DType::f32 ? static_cast<const void*>(b.data()) : b.ints();
    return std::memcmp(pa, pb, static_cast<size_t>(a.numel()) * 4) == 0;
}

// The documented preamble, built independently of the writer.
struct Parts {
    uint32_t version;
    std::string header;
    std::string data;
};

uint32_t get_u32(const std::string& bytes, size_t at) {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    return value;
}

void put_u32(std::string& bytes, size_t at, uint64_t value) {
    for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
}

size_t data_start(const std::string& file) { return (32 + get_u32(file, 12) + 63) / 64 * 64; }

Parts split_file(const std::string& file) {
    return {get_u32(file, 8), file.substr(32, get_u32(file, 12)), file.substr(data_start(file))};
}

std::string build_file(const Parts& parts) {
    std::string file(32, '\0');
    std::memcpy(file.data(), "HNASCKPT", 8);
    put_u32(file, 8, parts.version);
    put_u32(file, 12, parts.header.size());
    put_u32(file, 16, parts.data.size());  // data length, u64: the high half stays zero
    put_u32(file, 24, crc32c(parts.header.data(), parts.header.size()));
    put_u32(file, 28, crc32c(file.data(), 28));
    file += parts.header;
    file.resize((file.size() + 63) / 64 * 64, '\0');
    return file + parts.data;
}

// A fresh directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
protected:
    std::string file(const std::string& name) const { return scratch_.path(name); }
    std::set<std::string> listing() const {
        std::set<std::string> names;
        for (const auto& item : fs::directory_iterator(scratch_.root)) names.insert(item.path().filename().string());
        return names;
    }

    const hnas::testing::ScratchDir scratch_{hnas::testing::name_for_this_test("hnas_checkpoint_")};
};

// ---- CRC-32C -----------------------------------------------------------------------------------------

uint32_t bitwise_crc32c(const unsigned char* data, size_t size) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; ++i) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

TEST(Crc32c, MatchesPublishedVectors) {
    EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
    std::string bytes(32, '\0');
    EXPECT_EQ(crc32c(bytes.data(), 32), 0x8A9136AAu);  // RFC 3720, B.4
    bytes.assign(32, '\xFF');
    EXPECT_EQ(crc32c(bytes.data(), 32), 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) bytes[i] = static_cast<char>(i);
    EXPECT_EQ(crc32c(bytes.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

// crc32c (the CPU's instruction where it has one) and crc32c_portable (slicing-by-8) both equal the
// bitwise definition.
TEST(Crc32c, SlicingMatchesBitwiseAtEveryLengthAndAlignmentAndContinues) {
    Rng rng(3);
    std::vector<unsigned char> data(300);
    for (auto& byte : data) byte = static_cast<unsigned char>(rng.next_u64());
    for (size_t start = 0; start < 9; ++start) {
        for (size_t length = 0; start + length <= 120; ++length) {
            ASSERT_EQ(crc32c(data.data() + start, length), bitwise_crc32c(data.data() + start, length))
                << "start " << start << " length " << length;
            ASSERT_EQ(hnas::crc32c_portable(data.data() + start, length), bitwise_crc32c(data.data() + start, length))
                << "portable, start " << start << " length " << length;
        }
    }
    for (size_t split = 0; split <= data.size(); split += 37) {
        EXPECT_EQ(crc32c(data.data() + split, data.size() - split, crc32c(data.data(), split)),
                  crc32c(data.data(), data.size()));
    }
}

// ---- round trip and layout -----------------------------------------------------------------------------

TEST_F(CheckpointTest, RoundTripIsBitExact) {
    const Sample sample = make_sample();
    const std::string path = file("model.ckpt");
    write_sample(sample, path);
    const Checkpoint loaded = Checkpoint::load(path);

    EXPECT_EQ(loaded.path(), path);
    EXPECT_EQ(loaded.metadata(), sample_metadata());
    EXPECT_EQ(loaded.metadata().at("rng").at("init").at(2).get<uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(loaded.header().at("format_version"), 1);
    for (const auto& [name, tensor] : sample.tensors) {
        ASSERT_TRUE(loaded.has(name)) << name;
        EXPECT_TRUE(same_bits(loaded.tensor(name), tensor)) << name;
        EXPECT_TRUE(same_bits(loaded.tensor(name, tensor.shape(), tensor.dtype()), tensor)) << name;
    }
    for (const auto& [name, blob] : sample.blobs) EXPECT_EQ(loaded.bytes(name), blob) << name;
    EXPECT_FALSE(loaded.has("missing"));

    // Entries in the order added, at 64-byte-aligned offsets, with their checksums.
    const std::vector<std::string> order = {sample.tensors[0].first, sample.blobs[0].first,  sample.tensors[1].first,
                                            sample.tensors[2].first, sample.tensors[3].first, sample.tensors[4].first,
                                            sample.tensors[5].first, sample.blobs[1].first};
    ASSERT_EQ(loaded.entries().size(), order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        const EntryInfo& entry = loaded.entries()[i];
        EXPECT_EQ(entry.name, order[i]);
        EXPECT_EQ(entry.offset % 64, 0u) << entry.name;
        const bool is_bytes = entry.type == EntryType::bytes;
        const std::string blob = is_bytes ? loaded.bytes(entry.name) : std::string();
        const Tensor t = is_bytes ? Tensor() : loaded.tensor(entry.name);
        const void* bytes = is_bytes ? static_cast<const void*>(blob.data())
                            : t.dtype() == DType::f32 ? static_cast<const void*>(t.data()) : t.ints();
        EXPECT_EQ(entry.crc32c, crc32c(bytes, entry.length)) << entry.name;
    }
    EXPECT_EQ(loaded.entries()[1].type, EntryType::bytes);
    EXPECT_EQ(loaded.entries()[1].shape, (Shape{static_cast<int64_t>(all_byte_values().size())}));
    EXPECT_EQ(loaded.entries()[4].type, EntryType::i32);
    EXPECT_EQ(read_checkpoint_header(path), loaded.header());
}

TEST_F(CheckpointTest, FileFollowsTheDocumentedLayout) {
    const std::string path = file("model.ckpt");
    write_sample(make_sample(), path);
    const std::string bytes = hnas::read_file(path, "checkpoint");
    EXPECT_EQ(bytes.substr(0, 8), "HNASCKPT");
    EXPECT_EQ(get_u32(bytes, 8), kCheckpointFormatVersion);
    // Re-encoding the header and data with the documented preamble reproduces the file byte for byte.
    EXPECT_EQ(build_file(split_file(bytes)), bytes);
    const Json header = Json::parse(split_file(bytes).header);
    EXPECT_EQ(header, read_checkpoint_header(path));
    const Json& last = header.at("entries").back();
    EXPECT_EQ(split_file(bytes).data.size(), last.at("offset").get<size_t>() + last.at("length").get<size_t>());
}

TEST_F(CheckpointTest, EmptyCheckpointRoundTrips) {
    const std::string path = file("empty.ckpt");
    CheckpointWriter(Json::object()).write(path);
    const Checkpoint loaded = Checkpoint::load(path);
    EXPECT_TRUE(loaded.entries().empty());
    EXPECT_EQ(loaded.metadata(), Json::object());
}

// ---- damaged files -------------------------------------------------------------------------------------

TEST_F(CheckpointTest, TruncationAtRandomOffsetsIsRejected) {
    const std::string path = file("model.ckpt");
    write_sample(make_sample(), path);
    const std::string bytes = hnas::read_file(path, "checkpoint");
    const size_t start = data_start(bytes);
    ASSERT_GT(start, 32u);
    ASSERT_GT(bytes.size(), start);
    // 20 seeded offsets: 4 inside the preamble, 6 inside the header and its padding, 10 inside the data.
    Rng rng(20);
    std::vector<size_t> offsets;
    for (int i = 0; i < 4; ++i) offsets.push_back(rng.below(32));
    for (int i = 0; i < 6; ++i) offsets.push_back(32 + rng.below(start - 32));
    for (int i = 0; i < 10; ++i) offsets.push_back(start + rng.below(bytes.size() - start));
    const std::string truncated = file("truncated.ckpt");
    for (size_t offset : offsets) {
        SCOPED_TRACE(concat_message("truncated to ", offset, " of ", bytes.size(), " bytes"));
        hnas::testing::write_file(truncated, bytes.substr(0, offset));
        for (const std::string& message : {load_error(truncated), header_error(truncated)}) {
            EXPECT_TRUE(contains(message, "checkpoint " + truncated + ": truncated")) << message;
        }
    }
}

TEST_F(CheckpointTest, OneFlippedByteAnywhereIsRejectedNamingTheProblem) {
    const std::string path = file("model.ckpt");
    write_sample(make_sample(), path);
    const std::string bytes = hnas::read_file(path, "checkpoint");
    const Checkpoint good = Checkpoint::load(path);
    const size_t start = data_start(bytes);
    const size_t header_end = 32 + get_u32(bytes, 12);

    // (position, what the error must say)
    std::vector<std::pair<size_t, std::string>> cases;
    for (size_t i = 0; i < 8; ++i) cases.emplace_back(i, "not an hnas checkpoint (bad magic bytes)");
    for (size_t i = 8; i < 32; ++i) cases.emplace_back(i, "preamble checksum mismatch");
    Rng rng(5);
    for (int i = 0; i < 8; ++i) cases.emplace_back(32 + rng.below(header_end - 32), "header checksum mismatch");
    cases.emplace_back(32, "header checksum mismatch");
    cases.emplace_back(header_end - 1, "header checksum mismatch");
    if (header_end < start) {
        cases.emplace_back(header_end, "nonzero padding between the header and the data section");
        cases.emplace_back(start - 1, "nonzero padding between the header and the data section");
    }
    bool data_padding = false;
    const auto& entries = good.entries();
    for (size_t i = 0; i < entries.size(); ++i) {
        const EntryInfo& entry = entries[i];
        const std::string problem = "checksum mismatch in entry '" + entry.name + "'";
        if (entry.length > 0) {
            for (uint64_t at : {uint64_t{0}, entry.length / 2, entry.length - 1}) cases.emplace_back(start + entry.offset + at, problem);
        }
        if (i + 1 < entries.size() && entries[i + 1].offset > entry.offset + entry.length) {
            const size_t padding = start + entry.offset + entry.length;
            cases.emplace_back(padding, "nonzero padding before entry '" + entries[i + 1].name + "'");
            data_padding = true;
        }
    }
    ASSERT_TRUE(data_padding) << "the sample should have padding between entries";

    const std::string corrupt = file("corrupt.ckpt");
    const unsigned char masks[] = {0x01, 0x80, 0xFF, 0x5A};
    for (size_t k = 0; k < cases.size(); ++k) {
        const auto& [position, problem] = cases[k];
        SCOPED_TRACE(concat_message("byte ", position, " flipped"));
        std::string damaged = bytes;
        damaged[position] = static_cast<char>(damaged[position] ^ masks[k % 4]);
        hnas::testing::write_file(corrupt, damaged);
        const std::string message = load_error(corrupt);
        EXPECT_TRUE(contains(message, "checkpoint " + corrupt + ": ")) << message;
        EXPECT_TRUE(contains(message, problem)) << message;
        if (position < start) {
            EXPECT_TRUE(contains(header_error(corrupt), problem));
        }
    }
}

// Files whose checksums are all valid but whose header breaks the format's rules (a writer bug, or a
// deliberate edit) are still rejected, before anything is allocated for them.
TEST_F(CheckpointTest, InconsistentHeadersAreRejected) {
    const std::string path = file("model.ckpt");
    write_sample(make_sample(), path);
    const Parts original = split_file(hnas::read_file(path, "checkpoint"));
    const std::string edited = file("edited.ckpt");

    auto expect_rejected = [&](const Parts& parts, const std::string& problem) {
        hnas::testing::write_file(edited, build_file(parts));
        const std::string message = load_error(edited);
        EXPECT_TRUE(contains(message, "checkpoint " + edited + ": ")) << message;
        EXPECT_TRUE(contains(message, problem)) << message;
    };
    auto with_header = [&](const std::function<void(Json&)>& edit) {
        Json header = Json::parse(original.header);
        edit(header);
        return Parts{original.version, header.dump(), original.data};
    };
    auto entry = [](Json& header, size_t i) -> Json& { return header.at("entries").at(i); };

    expect_rejected({2, original.header, original.data}, "format version 2 is not supported");
    expect_rejected({1, "not json", original.data}, "the header is not valid JSON");
    expect_rejected({1, original.header, original.data + std::string(64, '\0')}, "but its entries end at byte");
    expect_rejected(with_header([](Json& h) { h["format_version"] = 2; }), "differs from the preamble's 1");
    expect_rejected(with_header([](Json& h) { h["metadata"] = Json::array(); }), "'metadata' is not a JSON object");
    expect_rejected(with_header([](Json& h) { h.erase("entries"); }), "the header has no 'entries'");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["shape"] = {4, 9}; }),
                    "128 bytes do not hold a f32 tensor of shape (4, 9)");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["shape"] = {4611686018427387904ull, 4}; }),
                    "'): the shape [4611686018427387904,4] must list integers in [0, 68719476736]");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["shape"] = {uint64_t{1} << 20, uint64_t{1} << 20}; }),
                    "'): shape (1048576, 1048576) has more than 68719476736 elements");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["shape"] = {4, -8}; }), "must list integers in [0, ");
    expect_rejected(with_header([&](Json& h) { entry(h, 1)["shape"] = {3}; }), "a bytes entry of");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["dtype"] = "f16"; }), "unknown dtype \"f16\"");
    expect_rejected(with_header([&](Json& h) { entry(h, 1)["name"] = entry(h, 0)["name"]; }), "the name appears twice");
    expect_rejected(with_header([&](Json& h) { entry(h, 1)["offset"] = entry(h, 1)["offset"].get<uint64_t>() + 64; }),
                    "starts at data offset 192, expected 128");
    expect_rejected(with_header([&](Json& h) { entry(h, 2)["length"] = uint64_t{1} << 60; }), "must be an integer in [0, ");
    expect_rejected(with_header([&](Json& h) { entry(h, 0)["crc32c"] = "0x1234"; }), "must be an integer in [0, 4294967295]");
    expect_rejected(with_header([&](Json& h) {
                        Json& last = h.at("entries").back();
                        last["length"] = 64;
                        last["shape"] = {64};
                    }),
                    "extend past the data section");
}

TEST_F(CheckpointTest, FilesThatAreNotCheckpointsAreRejected) {
    const std::string missing = file("missing.ckpt");
    EXPECT_TRUE(contains(load_error(missing), "checkpoint " + missing + ": cannot open: "));
    const std::string text = file("config.json");
    hnas::testing::write_file(text, R"({"model": {"layers": 2, "d_model": 32, "heads": 4}})");
    EXPECT_TRUE(contains(load_error(text), "checkpoint " + text + ": not an hnas checkpoint"));
    const std::string directory = file("a_directory");
    fs::create_directory(directory);
    EXPECT_TRUE(contains(load_error(directory), "checkpoint " + directory + ": not a regular file"));
}

// ---- atomic writes -------------------------------------------------------------------------------------

TEST_F(CheckpointTest, WritingOverACheckpointReplacesItAndLeavesNoTemporaryFile) {
    const std::string path = file("model.ckpt");
    CheckpointWriter first(Json{{"step", 1}});
    first.add_tensor("w", Tensor::full({3}, 1.0f));
    first.write(path);
    CheckpointWriter second(Json{{"step", 2}});
    second.add_tensor("w", Tensor::full({3}, 2.0f));
    second.write(path);

    const Checkpoint loaded = Checkpoint::load(path);
    EXPECT_EQ(loaded.metadata().at("step"), 2);
    EXPECT_EQ(loaded.tensor("w", {3}).to_floats(), std::vector<float>(3, 2.0f));
    EXPECT_EQ(listing(), std::set<std::string>{"model.ckpt"});
}

// A write that fails half-way (the file size limit stands in for a full disk) throws naming the
// destination, removes its temporary file and leaves the previous checkpoint as it was.
TEST_F(CheckpointTest, FailedWriteKeepsTheOldCheckpoint) {
    const std::string path = file("model.ckpt");
    const Sample sample = make_sample();
    write_sample(sample, path);
    const std::string before = hnas::read_file(path, "checkpoint");

    CheckpointWriter big(Json{{"step", 2}});
    big.add_tensor("big", Tensor::zeros({64, 1024}));
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    rlimit limited = saved;
    limited.rlim_cur = 16 * 1024;
    const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // fail the write with EFBIG instead
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
    std::string message;
    try {
        big.write(path);
    } catch (const Error& e) {
        message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, previous_handler);

    EXPECT_TRUE(contains(message, "checkpoint " + path + ": cannot write temporary file " + path + ".tmp.")) << message;
    EXPECT_EQ(listing(), std::set<std::string>{"model.ckpt"});
    EXPECT_EQ(hnas::read_file(path, "checkpoint"), before);
    EXPECT_TRUE(same_bits(Checkpoint::load(path).tensor(sample.tensors[0].first), sample.tensors[0].second));
}

TEST_F(CheckpointTest, FailedRenameRemovesTheTemporaryFile) {
    const std::string path = file("occupied");
    fs::create_directory(path);
    hnas::testing::write_file(path + "/keep", "x");
    CheckpointWriter writer(Json::object());
    writer.add_tensor("w", Tensor::zeros({2}));
    try {
        writer.write(path);
        ADD_FAILURE() << "renaming over a non-empty directory succeeded";
    } catch (const Error& e) {
        EXPECT_TRUE(contains(e.what(), "checkpoint " + path + ": cannot rename over the destination")) << e.what();
    }
    EXPECT_EQ(listing(), std::set<std::string>{"occupied"});
}

TEST_F(CheckpointTest, UnwritableDestinationIsNamed) {
    const std::string path = file("no/such/directory/model.ckpt");
    try {
        CheckpointWriter(Json::object()).write(path);
        ADD_FAILURE() << "writing into a missing directory succeeded";
    } catch (const Error& e) {
        EXPECT_TRUE(contains(e.what(), "checkpoint " + path + ": cannot create temporary file")) << e.what();
    }
}

// ---- API errors ----------------------------------------------------------------------------------------

TEST_F(CheckpointTest, WriterRejectsDuplicateAndInvalidEntries) {
    CheckpointWriter writer(Json::object());
    writer.add_tensor("encoder.weight", Tensor::zeros({2}));
    writer.add_bytes("tokenizer.model", "abc");
    for (const auto& add : std::vector<std::function<void()>>{
             [&] { writer.add_tensor("encoder.weight", Tensor::zeros({3})); },
             [&] { writer.add_bytes("encoder.weight", "x"); },
             [&] { writer.add_tensor("tokenizer.model", Tensor::zeros({3})); }}) {
        try {
            add();
            ADD_FAILURE() << "a duplicate name was accepted";
        } catch (const Error& e) {
            EXPECT_TRUE(contains(e.what(), "duplicate entry name '")) << e.what();
        }
    }
    EXPECT_THROW(writer.add_tensor("", Tensor::zeros({1})), Error);
    EXPECT_THROW(writer.add_tensor("undefined", Tensor()), Error);
    EXPECT_THROW(CheckpointWriter(Json::array()), Error);
    // The rejected additions left the writer as it was.
    const std::string path = file("model.ckpt");
    writer.write(path);
    EXPECT_EQ(Checkpoint::load(path).entries().size(), 2u);
}

TEST_F(CheckpointTest, ReaderNamesMissingEntriesAndWrongShapes) {
    const std::string path = file("model.ckpt");
    write_sample(make_sample(), path);
    const Checkpoint loaded = Checkpoint::load(path);
    const std::string prefix = "checkpoint " + path + ": ";
    auto message_of = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message_of([&] { loaded.tensor("decoder.weight"); }), prefix + "no entry 'decoder.weight'");
    EXPECT_EQ(message_of([&] { loaded.bytes("sentencepiece"); }), prefix + "no entry 'sentencepiece'");
    EXPECT_EQ(message_of([&] { loaded.tensor("encoder.layers.0.self_attn.q_proj.weight", {8, 4}); }),
              prefix + "entry 'encoder.layers.0.self_attn.q_proj.weight' is a f32 tensor of shape (4, 8), expected f32 (8, 4)");
    EXPECT_EQ(message_of([&] { loaded.tensor("data.order", {7}); }),
              prefix + "entry 'data.order' is a i32 tensor of shape (7), expected f32 (7)");
    EXPECT_EQ(message_of([&] { loaded.tensor("tokenizer.model"); }),
              prefix + "entry 'tokenizer.model' is a byte blob, not a tensor");
    EXPECT_EQ(message_of([&] { loaded.bytes("data.order"); }), prefix + "entry 'data.order' is a tensor, not a byte blob");
}

}  // namespace
}  // namespace hnas::io
