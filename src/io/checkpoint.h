// Checkpoint files: everything a run needs to resume exactly (parameters, optimizer moments, the
// resolved config, step, schedule, data position and RNG states) and to decode with the right
// vocabulary (the SentencePiece model), in one self-verifying file that is replaced atomically.
//
// Layout (all integers little-endian; tensor data is stored as in memory, which a static_assert
// requires to be little-endian too):
//
//   offset  size  field
//   0       8     magic "HNASCKPT"
//   8       4     format version (u32, currently 1)
//   12      4     header length H in bytes (u32)
//   16      8     data length D in bytes (u64)
//   24      4     CRC-32C of the header bytes
//   28      4     CRC-32C of bytes 0..27 (the preamble checksum)
//   32      H     the header: UTF-8 JSON
//   32 + H        zero bytes up to the next multiple of 64: the data section starts at S = align64(32 + H)
//   S       D     the data: every entry's raw bytes, the first at 0, each next one at the first multiple
//                 of 64 after the previous one's end, zero bytes in between; D is the last entry's end
//
// The file is exactly S + D bytes. The preamble layout is the same in every format version; the version
// governs the header and the data. The header is
//
//   {"format_version": 1,
//    "metadata": {...},       // a JSON object chosen by the caller (config, step, RNG states, ...)
//    "entries": [{"name": "encoder.layers.0.self_attn.q_proj.weight", "dtype": "f32", "shape": [512, 512],
//                 "offset": 0, "length": 1048576, "crc32c": 3817275042}, ...]}
//
// dtype is "f32" or "i32" (row-major tensors, length = 4 · product of shape) or "bytes" (an opaque blob
// such as the tokenizer model, shape = [length]); offset is relative to the data section; crc32c is
// the CRC-32C (Castagnoli) of the entry's bytes. Names are unique and entries are stored in the order
// they were added.
//
// Every byte is covered: the preamble and the header by their checksums, the entries by theirs, and
// the padding by the rule that it is zero. Loading checks all of it, plus the file's size against the
// preamble, that every entry lies inside the data section at its canonical offset and that its
// length matches dtype × shape, so no length read from the file is allocated before it is bounded by
// the file's size. Every failure is an hnas::Error that names the file and the problem.
//
// Writes are atomic: the file is written next to the destination as "<path>.tmp.<pid>", fsynced,
// renamed over the destination and the directory fsynced, so a crash or a full disk leaves either the
// old checkpoint or the new one, never a mixture; on failure the temporary file is removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/enum_names.h"
#include "tensor/tensor.h"

namespace hnas::io {

inline constexpr char kCheckpointMagic[8] = {'H', 'N', 'A', 'S', 'C', 'K', 'P', 'T'};
inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr size_t kCheckpointPreambleBytes = 32;
inline constexpr size_t kCheckpointAlignment = 64;

enum class EntryType { f32, i32, bytes };
inline constexpr EnumName<EntryType> kEntryTypeNames[]{{EntryType::f32, "f32"}, {EntryType::i32, "i32"}, {EntryType::bytes, "bytes"}};
constexpr const auto& enum_names(EntryType) { return kEntryTypeNames; }

// One entry as the header describes it.
struct EntryInfo {
    std::string name;
    EntryType type = EntryType::f32;
    Shape shape;          // for bytes: {length}
    uint64_t offset = 0;  // from the start of the data section
    uint64_t length = 0;  // in bytes
    uint32_t crc32c = 0;
};

// Collects named tensors and byte blobs, then writes them in one atomic file.
// Tensors are held by reference to their storage, not copied: do not modify them before write().
class CheckpointWriter {
public:
    explicit CheckpointWriter(nlohmann::ordered_json metadata);  // must be a JSON object

    void add_tensor(std::string name, const Tensor& tensor);  // f32 or i32
    void add_bytes(std::string name, std::string bytes);

    // Throws naming `path` (and the temporary file) on any failure; an existing file at `path` is
    // then left as it was.
    void write(const std::string& path) const;

private:
    struct Pending {
        std::string name;
        EntryType type;
        Tensor tensor;      // f32 / i32
        std::string bytes;  // bytes
    };
    void check_new_name(const std::string& name) const;

    nlohmann::ordered_json metadata_;
    std::vector<Pending> entries_;
    std::unordered_set<std::string> names_;
};

// A fully loaded and verified checkpoint.
class Checkpoint {
public:
    // Reads the whole file and verifies every checksum; throws hnas::Error naming the file and the problem.
    static Checkpoint load(const std::string& path);

    const std::string& path() const { return path_; }
    const nlohmann::ordered_json& header() const { return header_; }
    const nlohmann::ordered_json& metadata() const { return header_.at("metadata"); }
    const std::vector<EntryInfo>& entries() const { return entries_; }
    bool has(const std::string& name) const { return index_.contains(name); }

    // The stored tensor (shared, not copied). Throws naming the entry and the file when it is missing
    // or is a byte blob; the second form also requires the shape and dtype and names both shapes.
    Tensor tensor(const std::string& name) const;
    Tensor tensor(const std::string& name, const Shape& expected, DType dtype = DType::f32) const;
    // A byte blob; throws naming the entry and the file when it is missing or is a tensor.
    const std::string& bytes(const std::string& name) const;

private:
    Checkpoint() = default;
    size_t find(const std::string& name, bool want_bytes) const;  // the entry's index, checked

    std::string path_;
    nlohmann::ordered_json header_;
    std::vector<EntryInfo> entries_;
    std::vector<Tensor> tensors_;     // parallel to entries_; undefined for byte blobs
    std::vector<std::string> blobs_;  // parallel to entries_; empty for tensors
    std::unordered_map<std::string, size_t> index_;
};

// Checks a checkpoint file as load() does, holding one entry in memory at a time; throws hnas::Error
// naming the file and the problem.
void verify_checkpoint(const std::string& path);

// The verified header alone (preamble, header checksum, entry layout, file size), without reading or
// checksumming the data: what `hnas inspect` prints.
nlohmann::ordered_json read_checkpoint_header(const std::string& path);

}  // namespace hnas::io
