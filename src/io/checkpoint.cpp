// Checkpoint files: the CRC-32C, the atomic writer and the verifying reader. The layout is documented
// in checkpoint.h. The reader trusts nothing in the file until its checksum has passed, and bounds
// every length by the file's size before allocating for it.
#include "io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "base/atomic_file.h"
#include "base/hash.h"
#include "base/json.h"
#include "io/file_shape.h"

namespace hnas::io {

static_assert(std::endian::native == std::endian::little,
              "checkpoints store tensors in memory order, defined as little-endian");

namespace {

using Json = nlohmann::ordered_json;

// ---- little-endian fields and layout arithmetic ---------------------------------------------------------

void store_u32(unsigned char* out, uint32_t value) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

void store_u64(unsigned char* out, uint64_t value) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

uint32_t load_u32(const unsigned char* in) {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
    return value;
}

uint64_t load_u64(const unsigned char* in) {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
    return value;
}

uint64_t align_up(uint64_t offset) {
    return (offset + kCheckpointAlignment - 1) / kCheckpointAlignment * kCheckpointAlignment;
}

constexpr size_t kPreambleChecked = 28;  // bytes covered by the preamble checksum

std::string hex32(uint32_t value) {
    char text[11];
    std::snprintf(text, sizeof text, "0x%08x", value);
    return text;
}

std::string errno_text() { return std::system_category().message(errno); }

template <typename... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
    throw Error(concat_message("checkpoint ", path, ": ", args...));
}

// ---- reading -----------------------------------------------------------------------------------------

class InputFile {
public:
    explicit InputFile(const std::string& path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) fail(path, "cannot open: ", errno_text());
        struct stat info {};
        if (::fstat(fd_, &info) != 0) {
            const std::string reason = errno_text();
            ::close(fd_);
            fail(path, "cannot stat: ", reason);
        }
        if (!S_ISREG(info.st_mode)) {
            ::close(fd_);
            fail(path, "not a regular file");
        }
        size_ = static_cast<uint64_t>(info.st_size);
    }
    ~InputFile() { ::close(fd_); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }

    void read_at(uint64_t offset, void* buffer, uint64_t length) const {
        auto* out = static_cast<char*>(buffer);
        while (length > 0) {
            const size_t chunk = static_cast<size_t>(std::min<uint64_t>(length, uint64_t{1} << 30));
            const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) fail(path_, "read failed at byte ", offset, ": ", errno_text());
            if (got == 0) fail(path_, "truncated: no data at byte ", offset, " (the file shrank while being read)");
            out += got;
            offset += static_cast<uint64_t>(got);
            length -= static_cast<uint64_t>(got);
        }
    }

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

bool all_zero(const char* bytes, size_t length) {
    return std::all_of(bytes, bytes + length, [](char c) { return c == 0; });
}

struct Layout {
    Json header;
    std::vector<EntryInfo> entries;
    uint64_t data_start = 0;
};

const Json& required_field(const Json& object, const char* key, const std::string& path, const std::string& where) {
    const auto found = object.find(key);
    if (found == object.end()) fail(path, where, " has no '", key, "'");
    return *found;
}

// A header field that must be an unsigned integer no larger than `limit`.
uint64_t unsigned_field(const Json& object, const char* key, uint64_t limit, const std::string& path,
                        const std::string& where) {
    const Json& value = required_field(object, key, path, where);
    if (!value.is_number_unsigned() || value.get<uint64_t>() > limit)
        fail(path, where, ": '", key, "' must be an integer in [0, ", limit, "], not ", value.dump());
    return value.get<uint64_t>();
}

// Checks every entry's description against the format's rules and the data section's length.
std::vector<EntryInfo> parse_entries(const Json& header, uint64_t data_length, const std::string& path) {
    const Json& list = required_field(header, "entries", path, "the header");
    if (!list.is_array()) fail(path, "the header's 'entries' is not a list");
    std::vector<EntryInfo> entries;
    std::unordered_set<std::string> names;
    uint64_t end = 0;
    for (size_t i = 0; i < list.size(); ++i) {
        const Json& item = list[i];
        std::string where = concat_message("header entry ", i);
        if (!item.is_object()) fail(path, where, " is not an object");
        EntryInfo entry;
        const Json& name = required_field(item, "name", path, where);
        if (!name.is_string() || name.get_ref<const std::string&>().empty())
            fail(path, where, ": 'name' must be a non-empty string");
        entry.name = name.get<std::string>();
        where += concat_message(" ('", entry.name, "')");
        if (!names.insert(entry.name).second) fail(path, where, ": the name appears twice");

        const Json& dtype = required_field(item, "dtype", path, where);
        if (dtype == "f32") {
            entry.type = EntryType::f32;
        } else if (dtype == "i32") {
            entry.type = EntryType::i32;
        } else if (dtype == "bytes") {
            entry.type = EntryType::bytes;
        } else {
            fail(path, where, ": unknown dtype ", dtype.dump(), " (expected \"f32\", \"i32\" or \"bytes\")");
        }

        entry.offset = unsigned_field(item, "offset", data_length, path, where);
        entry.length = unsigned_field(item, "length", data_length, path, where);
        entry.crc32c = static_cast<uint32_t>(unsigned_field(item, "crc32c", 0xFFFFFFFFu, path, where));
        if (entry.offset != align_up(end))
            fail(path, where, " starts at data offset ", entry.offset, ", expected ", align_up(end));
        if (entry.length > data_length - entry.offset)
            fail(path, where, ": ", entry.length, " bytes at data offset ", entry.offset,
                 " extend past the data section of ", data_length, " bytes");
        end = entry.offset + entry.length;

        const Json& shape = required_field(item, "shape", path, where);
        entry.shape = read_shape(shape, concat_message("checkpoint ", path, ": ", where));
        const auto numel = static_cast<uint64_t>(shape_numel(entry.shape));
        if (entry.type == EntryType::bytes) {
            if (entry.shape != Shape{static_cast<int64_t>(entry.length)})
                fail(path, where, ": a bytes entry of ", entry.length, " bytes must have shape [", entry.length,
                     "], not ", shape.dump());
        } else if (numel * 4 != entry.length) {  // no overflow: read_shape bounds numel
            fail(path, where, ": ", entry.length, " bytes do not hold a ", name_of(entry.type),
                 " tensor of shape ", shape_str(entry.shape));
        }
        entries.push_back(std::move(entry));
    }
    if (end != data_length)
        fail(path, "the data section is ", data_length, " bytes but its entries end at byte ", end);
    return entries;
}

// Verifies the preamble, the file's size, the header's checksum and structure and the padding after
// it; reads no entry data.
Layout read_layout(const InputFile& file) {
    const std::string& path = file.path();
    if (file.size() < kCheckpointPreambleBytes)
        fail(path, "truncated: the file has ", file.size(), " bytes, fewer than the ", kCheckpointPreambleBytes,
             "-byte preamble");
    unsigned char preamble[kCheckpointPreambleBytes];
    file.read_at(0, preamble, sizeof preamble);
    if (std::memcmp(preamble, kCheckpointMagic, sizeof kCheckpointMagic) != 0)
        fail(path, "not an hnas checkpoint (bad magic bytes)");
    const uint32_t stored_preamble_crc = load_u32(preamble + 28);
    const uint32_t preamble_crc = crc32c(preamble, kPreambleChecked);
    if (stored_preamble_crc != preamble_crc)
        fail(path, "preamble checksum mismatch (stored ", hex32(stored_preamble_crc), ", computed ",
             hex32(preamble_crc), ")");
    const uint32_t version = load_u32(preamble + 8);
    if (version != kCheckpointFormatVersion)
        fail(path, "format version ", version, " is not supported (this build reads version ",
             kCheckpointFormatVersion, ")");
    const uint64_t header_length = load_u32(preamble + 12);
    const uint64_t data_length = load_u64(preamble + 16);
    const uint32_t stored_header_crc = load_u32(preamble + 24);

    Layout layout;
    layout.data_start = align_up(kCheckpointPreambleBytes + header_length);
    // data_length is bounded by the file's size before it is added to anything.
    if (data_length > file.size() || file.size() - data_length < layout.data_start)
        fail(path, "truncated: the file has ", file.size(), " bytes, its preamble describes ",
             layout.data_start, " + ", data_length);
    if (file.size() != layout.data_start + data_length)
        fail(path, "the file has ", file.size(), " bytes, its preamble describes ", layout.data_start + data_length,
             " (trailing bytes after the data section)");

    std::string text(layout.data_start - kCheckpointPreambleBytes, '\0');
    file.read_at(kCheckpointPreambleBytes, text.data(), text.size());
    const uint32_t header_crc = crc32c(text.data(), header_length);
    if (stored_header_crc != header_crc)
        fail(path, "header checksum mismatch (stored ", hex32(stored_header_crc), ", computed ", hex32(header_crc),
             ")");
    if (!all_zero(text.data() + header_length, text.size() - header_length))
        fail(path, "nonzero padding between the header and the data section");
    text.resize(header_length);

    layout.header = parse_json(text, "checkpoint " + path + ": the header is not valid JSON:");
    if (!layout.header.is_object()) fail(path, "the header is not a JSON object");
    const Json& format_version = required_field(layout.header, "format_version", path, "the header");
    if (format_version != version)
        fail(path, "the header's format_version ", format_version.dump(), " differs from the preamble's ", version);
    if (!required_field(layout.header, "metadata", path, "the header").is_object())
        fail(path, "the header's 'metadata' is not a JSON object");
    layout.entries = parse_entries(layout.header, data_length, path);
    return layout;
}

// ---- writing -----------------------------------------------------------------------------------------

const void* entry_bytes(const Tensor& tensor) {
    return tensor.dtype() == DType::f32 ? static_cast<const void*>(tensor.data())
                                        : static_cast<const void*>(tensor.ints());
}

}  // namespace

// ---- CheckpointWriter ----------------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(nlohmann::ordered_json metadata) : metadata_(std::move(metadata)) {
    HNAS_CHECK(metadata_.is_object(), "checkpoint: metadata must be a JSON object, not ", metadata_.type_name());
}

void CheckpointWriter::check_new_name(const std::string& name) const {
    HNAS_CHECK(!name.empty(), "checkpoint: entry names must not be empty");
    HNAS_CHECK(!names_.contains(name), "checkpoint: duplicate entry name '", name, "'");
}

void CheckpointWriter::add_tensor(std::string name, const Tensor& tensor) {
    check_new_name(name);
    HNAS_CHECK(tensor.defined(), "checkpoint: tensor '", name, "' is undefined");
    names_.insert(name);
    const EntryType type = tensor.dtype() == DType::f32 ? EntryType::f32 : EntryType::i32;
    entries_.push_back({std::move(name), type, tensor, {}});
}

void CheckpointWriter::add_bytes(std::string name, std::string bytes) {
    check_new_name(name);
    names_.insert(name);
    entries_.push_back({std::move(name), EntryType::bytes, {}, std::move(bytes)});
}

void CheckpointWriter::write(const std::string& path) const {
    HNAS_CHECK(!path.empty(), "checkpoint: empty path");
    struct Span {
        const void* data;
        uint64_t length;
    };
    std::vector<Span> spans;
    Json list = Json::array();
    uint64_t end = 0;
    for (const Pending& entry : entries_) {
        const bool is_bytes = entry.type == EntryType::bytes;
        const Span span = is_bytes ? Span{entry.bytes.data(), entry.bytes.size()}
                                   : Span{entry_bytes(entry.tensor), static_cast<uint64_t>(entry.tensor.numel()) * 4};
        const uint64_t offset = align_up(end);
        list.push_back({{"name", entry.name},
                        {"dtype", name_of(entry.type)},
                        {"shape", is_bytes ? Shape{static_cast<int64_t>(span.length)} : entry.tensor.shape()},
                        {"offset", offset},
                        {"length", span.length},
                        {"crc32c", crc32c(span.data, span.length)}});
        spans.push_back(span);
        end = offset + span.length;
    }
    const Json header = {{"format_version", kCheckpointFormatVersion}, {"metadata", metadata_}, {"entries", list}};
    std::string text;
    try {
        text = header.dump();
    } catch (const Json::exception& e) {
        fail(path, "cannot encode the header: ", e.what());
    }
    if (text.size() > std::numeric_limits<uint32_t>::max())
        fail(path, "the header is ", text.size(), " bytes, more than the format's 4 GiB limit");

    std::string prefix(align_up(kCheckpointPreambleBytes + text.size()), '\0');
    auto* preamble = reinterpret_cast<unsigned char*>(prefix.data());
    std::memcpy(preamble, kCheckpointMagic, sizeof kCheckpointMagic);
    store_u32(preamble + 8, kCheckpointFormatVersion);
    store_u32(preamble + 12, static_cast<uint32_t>(text.size()));
    store_u64(preamble + 16, end);
    store_u32(preamble + 24, crc32c(text.data(), text.size()));
    store_u32(preamble + 28, crc32c(preamble, kPreambleChecked));
    std::memcpy(prefix.data() + kCheckpointPreambleBytes, text.data(), text.size());

    static constexpr char kZeros[kCheckpointAlignment] = {};
    AtomicFile file(path, "checkpoint");
    file.write(prefix.data(), prefix.size());
    uint64_t written = 0;
    for (const Span& span : spans) {
        file.write(kZeros, align_up(written) - written);
        file.write(span.data, span.length);
        written = align_up(written) + span.length;
    }
    file.commit();
}

// ---- Checkpoint ----------------------------------------------------------------------------------------

namespace {

// Reads every entry of the data section into destination(i, entry), checking the zero padding before
// it and its checksum.
template <typename Destination>
void read_entries(const InputFile& file, const Layout& layout, const std::string& path, Destination destination) {
    uint64_t end = 0;
    for (size_t i = 0; i < layout.entries.size(); ++i) {
        const EntryInfo& entry = layout.entries[i];
        char padding[kCheckpointAlignment];
        file.read_at(layout.data_start + end, padding, entry.offset - end);
        if (!all_zero(padding, entry.offset - end))
            fail(path, "nonzero padding before entry '", entry.name, "'");
        void* bytes = destination(i, entry);
        file.read_at(layout.data_start + entry.offset, bytes, entry.length);
        const uint32_t crc = crc32c(bytes, entry.length);
        if (crc != entry.crc32c)
            fail(path, "checksum mismatch in entry '", entry.name, "' (stored ", hex32(entry.crc32c), ", computed ",
                 hex32(crc), ")");
        end = entry.offset + entry.length;
    }
}

}  // namespace

Checkpoint Checkpoint::load(const std::string& path) {
    const InputFile file(path);
    Layout layout = read_layout(file);
    Checkpoint checkpoint;
    checkpoint.path_ = path;
    checkpoint.tensors_.resize(layout.entries.size());
    checkpoint.blobs_.resize(layout.entries.size());
    read_entries(file, layout, path, [&](size_t i, const EntryInfo& entry) -> void* {
        checkpoint.index_.emplace(entry.name, i);
        if (entry.type == EntryType::bytes) {
            checkpoint.blobs_[i].resize(entry.length);
            return checkpoint.blobs_[i].data();
        }
        const DType dtype = entry.type == EntryType::f32 ? DType::f32 : DType::i32;
        Tensor& tensor = checkpoint.tensors_[i] = Tensor::empty(entry.shape, dtype);
        return const_cast<void*>(entry_bytes(tensor));
    });
    checkpoint.header_ = std::move(layout.header);
    checkpoint.entries_ = std::move(layout.entries);
    return checkpoint;
}

void verify_checkpoint(const std::string& path) {
    const InputFile file(path);
    const Layout layout = read_layout(file);
    std::vector<char> scratch;
    read_entries(file, layout, path, [&](size_t, const EntryInfo& entry) -> void* {
        scratch.resize(entry.length);
        return scratch.data();
    });
}

size_t Checkpoint::find(const std::string& name, bool want_bytes) const {
    const auto found = index_.find(name);
    if (found == index_.end()) fail(path_, "no entry '", name, "'");
    const EntryType type = entries_[found->second].type;
    if ((type == EntryType::bytes) != want_bytes)
        fail(path_, "entry '", name, "' is ", want_bytes ? "a tensor" : "a byte blob", ", not ",
             want_bytes ? "a byte blob" : "a tensor");
    return found->second;
}

Tensor Checkpoint::tensor(const std::string& name) const { return tensors_[find(name, false)]; }

Tensor Checkpoint::tensor(const std::string& name, const Shape& expected, DType dtype) const {
    const Tensor& stored = tensors_[find(name, false)];
    if (stored.shape() != expected || stored.dtype() != dtype)
        fail(path_, "entry '", name, "' is a ", name_of(stored.dtype()), " tensor of shape ",
             shape_str(stored.shape()), ", expected ", name_of(dtype), " ", shape_str(expected));
    return stored;
}

const std::string& Checkpoint::bytes(const std::string& name) const { return blobs_[find(name, true)]; }

nlohmann::ordered_json read_checkpoint_header(const std::string& path) {
    const InputFile file(path);
    return read_layout(file).header;
}

}  // namespace hnas::io
