#include "tensor/tensor.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace hnas {

namespace {

constexpr size_t kAlignment = 64;  // one cache line, and the widest AVX-512 load

// Tensor blocks of at least kLargeBlock bytes come from segments this pool maps itself and never
// unmaps; smaller ones from malloc. Freed large blocks merge with free neighbours, and a request takes
// the smallest free block that holds it, cutting off the rest: so the blocks of a batch of one length
// are cut from what a batch of another length freed, no page is faulted in twice, and the segments stay
// near the live peak. Kept apart from malloc's heap, whose small allocations would otherwise pin the
// holes. Two designs measured worse on batches of varying length (docs/performance.md): a
// cache of freed blocks by size class (it held 3.7 × the live peak, mostly of sizes no later batch
// asked for), and glibc's heap alone (each block above 32 MiB mapped and unmapped anew every step).
// Sanitizer builds take every block from malloc, for AddressSanitizer to see each use after free.
class BlockPool {
public:
    // Never destroyed: tensors in static storage may be freed after any destructor here would run.
    static BlockPool& instance() {
        static BlockPool* pool = new BlockPool;
        return *pool;
    }

    void* acquire(size_t bytes) {
        const bool large = bytes >= kLargeBlock && !kBypass;
        void* block = large ? nullptr : std::aligned_alloc(kAlignment, bytes);  // malloc outside the lock
        std::lock_guard<std::mutex> lock(mutex_);
        if (large) block = acquire_large(bytes);
        if (block == nullptr) throw AllocationError(static_cast<int64_t>(bytes), memory_);
        memory_.live += static_cast<int64_t>(bytes);
        memory_.peak_live = std::max(memory_.peak_live, memory_.live);
        return block;
    }

    void release(void* block, size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        memory_.live -= static_cast<int64_t>(bytes);
        if (bytes >= kLargeBlock && !kBypass) {
            add_free(static_cast<char*>(block), bytes);
        } else {
            std::free(block);
        }
    }

    TensorMemory memory() {
        std::lock_guard<std::mutex> lock(mutex_);
        return memory_;
    }

    void reset_peak() {
        std::lock_guard<std::mutex> lock(mutex_);
        memory_.peak_live = memory_.live;
    }

private:
#ifdef HNAS_SANITIZE
    static constexpr bool kBypass = true;
#else
    static constexpr bool kBypass = false;
#endif
    // 256 KiB, not 1 MiB: bf16 copies are half their tensors' size, and with 1 MiB those under it left
    // glibc's heap holding 77–162 MiB free (docs/performance.md, "Blocks from 256 KiB in the pool").
    static constexpr size_t kLargeBlock = size_t{256} << 10;
    static constexpr size_t kSegment = size_t{64} << 20;  // the least a new segment maps

    // Called with the mutex held: the smallest free block that holds `bytes` (mapping a new segment
    // when none does), with its rest left free; null when the system has no memory to map.
    void* acquire_large(size_t bytes) {
        auto fit = free_by_size_.lower_bound({bytes, nullptr});
        if (fit == free_by_size_.end()) {
            const size_t length = std::max(bytes, kSegment);
            void* segment = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (segment == MAP_FAILED) return nullptr;
            memory_.reserved += static_cast<int64_t>(length);
            add_free(static_cast<char*>(segment), length);
            fit = free_by_size_.lower_bound({bytes, nullptr});
        }
        const auto [size, block] = *fit;
        free_by_size_.erase(fit);
        free_by_address_.erase(block);
        if (size > bytes) insert_free(block + bytes, size - bytes);
        return block;
    }

    // Called with the mutex held: a free block, merged with the free blocks right before and after it
    // (segments mapped next to each other merge too: the memory is contiguous and stays mapped).
    void add_free(char* block, size_t bytes) {
        auto next = free_by_address_.lower_bound(block);
        if (next != free_by_address_.end() && next->first == block + bytes) {
            bytes += next->second;
            free_by_size_.erase({next->second, next->first});
            next = free_by_address_.erase(next);
        }
        if (next != free_by_address_.begin()) {
            const auto previous = std::prev(next);
            if (previous->first + previous->second == block) {
                block = previous->first;
                bytes += previous->second;
                free_by_size_.erase({previous->second, previous->first});
                free_by_address_.erase(previous);
            }
        }
        insert_free(block, bytes);
    }

    void insert_free(char* block, size_t bytes) {
        free_by_address_.emplace(block, bytes);
        free_by_size_.emplace(bytes, block);
    }

    // Blocks under kLargeBlock stay in malloc's heap (a fixed mmap threshold; glibc's moving one maps
    // some anew each step), and the heap keeps up to kHeapSlack free at its top instead of returning it
    // to the system after every step.
    BlockPool() {
        mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeBlock));
        mallopt(M_TRIM_THRESHOLD, kHeapSlack);
    }
    static constexpr int kHeapSlack = 128 << 20;

    std::mutex mutex_;
    TensorMemory memory_;
    std::map<char*, size_t> free_by_address_;           // free large blocks: start → bytes
    std::set<std::pair<size_t, char*>> free_by_size_;  // the same, ordered by size for best fit
};

size_t element_size(DType dtype) { return dtype == DType::u8 ? 1 : 4; }

// A block's size: a multiple of kAlignment, as aligned_alloc requires and large blocks keep.
size_t block_size(size_t requested) { return std::max(kAlignment, (requested + kAlignment - 1) / kAlignment * kAlignment); }

}  // namespace

TensorMemory tensor_memory() { return BlockPool::instance().memory(); }
void reset_tensor_memory_peak() { BlockPool::instance().reset_peak(); }

AllocationError::AllocationError(int64_t bytes_, const TensorMemory& held_)
    : Error(concat_message("tensor: cannot allocate ", bytes_, " bytes with ", held_.live, " bytes held by live tensors")),
      bytes(bytes_),
      held(held_) {}

struct Tensor::Storage {
    // The f32 block is taken at once, or (bf16_only) on the first read of the values.
    Storage(size_t requested, bool with_values)
        : requested_bytes(requested),
          bytes(block_size(requested)),
          data(with_values ? BlockPool::instance().acquire(bytes) : nullptr) {}
    ~Storage() {
        if (void* block = data.load(std::memory_order_relaxed)) BlockPool::instance().release(block, bytes);
        if (bf16 != nullptr) BlockPool::instance().release(bf16, bf16_bytes);
        if (packed != nullptr) BlockPool::instance().release(packed, packed_bytes);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    // The values' block; a bf16-only tensor's is made from its copy here, exactly (bf16 → f32 is a shift).
    void* values() {
        void* block = data.load(std::memory_order_acquire);
        return block != nullptr ? block : widen();
    }

    size_t requested_bytes, bytes;
    // Null while the values exist only as the bf16 copy below (Tensor::bf16_only).
    std::atomic<void*> data;
    // Tensor::bf16_copy's block, and whether it holds the values as they are now. Atomic because an
    // OpenMP loop may call data() from several threads.
    void* bf16 = nullptr;
    size_t bf16_bytes = 0;
    std::atomic<bool> bf16_current{false};
    // Tensor::layout_copy's block, the layout it holds, and whether it holds the values as they are now.
    void* packed = nullptr;
    size_t packed_bytes = 0;
    uint64_t packed_layout = 0;
    std::atomic<bool> packed_current{false};

private:
    void* widen() {
        static std::mutex widening;  // rare: only when something reads a bf16-only result after all
        std::lock_guard<std::mutex> lock(widening);
        if (void* block = data.load(std::memory_order_acquire)) return block;  // another thread widened it
        HNAS_CHECK(bf16 != nullptr && bf16_current.load(std::memory_order_relaxed),
                   "tensor: the values of a bf16-only tensor were read before its bf16 copy was written");
        void* block = BlockPool::instance().acquire(bytes);
        const auto* in = static_cast<const uint16_t*>(bf16);
        auto* out = static_cast<uint32_t*>(block);
        for (size_t i = 0; i < requested_bytes / sizeof(float); ++i) out[i] = static_cast<uint32_t>(in[i]) << 16;
        data.store(block, std::memory_order_release);
        return block;
    }
};

Tensor Tensor::empty(const Shape& shape, DType dtype) {
    Tensor t;
    t.shape_ = shape;
    t.numel_ = shape_numel(shape);
    t.dtype_ = dtype;
    t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_) * element_size(dtype), true);
    return t;
}

Tensor Tensor::bf16_only(const Shape& shape) {
    Tensor t;
    t.shape_ = shape;
    t.numel_ = shape_numel(shape);
    t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_) * sizeof(float), false);
    return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    std::memset(t.storage_->values(), 0, static_cast<size_t>(t.numel_) * element_size(dtype));
    return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
    Tensor t = empty(shape);
    t.fill(value);
    return t;
}

Tensor Tensor::from_floats(const Shape& shape, const std::vector<float>& values) {
    HNAS_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "tensor: ", values.size(),
               " values for shape ", shape_str(shape));
    Tensor t = empty(shape);
    std::copy(values.begin(), values.end(), t.data());
    return t;
}

Tensor Tensor::from_ints(const Shape& shape, const std::vector<int32_t>& values) {
    HNAS_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "tensor: ", values.size(),
               " values for shape ", shape_str(shape));
    Tensor t = empty(shape, DType::i32);
    std::copy(values.begin(), values.end(), t.ints());
    return t;
}

int64_t Tensor::dim(int axis) const {
    return shape_[static_cast<size_t>(normalize_axis(axis, rank(), "tensor.dim"))];
}

const float* Tensor::data() const {
    HNAS_CHECK(defined() && dtype_ == DType::f32, "tensor: asked for f32 data, but the tensor is ",
               defined() ? name_of(dtype_) : "undefined");
    return static_cast<const float*>(storage_->values());
}

float* Tensor::data() {
    const float* values = std::as_const(*this).data();
    // Loaded first: the flag's cache line stays shared while threads read it.
    if (storage_->bf16_current.load(std::memory_order_relaxed)) storage_->bf16_current.store(false, std::memory_order_relaxed);
    if (storage_->packed_current.load(std::memory_order_relaxed)) storage_->packed_current.store(false, std::memory_order_relaxed);
    return const_cast<float*>(values);
}

std::pair<uint16_t*, bool> Tensor::bf16_copy() const {
    HNAS_CHECK(defined() && dtype_ == DType::f32, "tensor: asked for a bf16 copy, but the tensor is ",
               defined() ? name_of(dtype_) : "undefined");
    Storage& storage = *storage_;
    if (storage.bf16 == nullptr) {
        storage.bf16_bytes = block_size(static_cast<size_t>(numel_) * sizeof(uint16_t));
        storage.bf16 = BlockPool::instance().acquire(storage.bf16_bytes);
    }
    const bool current = storage.bf16_current.exchange(true, std::memory_order_relaxed);
    return {static_cast<uint16_t*>(storage.bf16), current};
}

std::pair<void*, bool> Tensor::layout_copy(uint64_t layout, size_t bytes) const {
    HNAS_CHECK(defined() && dtype_ == DType::f32, "tensor: asked for a copy in another layout, but the tensor is ",
               defined() ? name_of(dtype_) : "undefined");
    Storage& storage = *storage_;
    if (storage.packed != nullptr && (storage.packed_layout != layout || storage.packed_bytes != block_size(bytes))) {
        BlockPool::instance().release(storage.packed, storage.packed_bytes);
        storage.packed = nullptr;
    }
    if (storage.packed == nullptr) {
        storage.packed_bytes = block_size(bytes);
        storage.packed = BlockPool::instance().acquire(storage.packed_bytes);
        storage.packed_layout = layout;
        storage.packed_current.store(false, std::memory_order_relaxed);
    }
    const bool current = storage.packed_current.exchange(true, std::memory_order_relaxed);
    return {storage.packed, current};
}

int32_t* Tensor::ints() {
    HNAS_CHECK(defined() && dtype_ == DType::i32, "tensor: asked for i32 data, but the tensor is ",
               defined() ? name_of(dtype_) : "undefined");
    return static_cast<int32_t*>(storage_->values());
}

const int32_t* Tensor::ints() const { return const_cast<Tensor*>(this)->ints(); }

uint8_t* Tensor::bytes() {
    HNAS_CHECK(defined() && dtype_ == DType::u8, "tensor: asked for u8 data, but the tensor is ",
               defined() ? name_of(dtype_) : "undefined");
    return static_cast<uint8_t*>(storage_->values());
}

const uint8_t* Tensor::bytes() const { return const_cast<Tensor*>(this)->bytes(); }

float Tensor::item() const {
    HNAS_CHECK(numel_ == 1, "tensor.item: tensor of shape ", shape_str(shape_), " is not a single value");
    return data()[0];
}

Tensor Tensor::reshape(const Shape& shape) const {
    Shape resolved = shape;
    const auto inferred = std::find(resolved.begin(), resolved.end(), -1);
    if (inferred != resolved.end()) {
        HNAS_CHECK(std::find(inferred + 1, resolved.end(), -1) == resolved.end(), "reshape: more than one -1 in ", shape_str(shape));
        *inferred = 1;
        const int64_t known = shape_numel(resolved, "reshape");
        HNAS_CHECK(known > 0 && numel_ % known == 0, "reshape: cannot view ", shape_str(shape_), " as ", shape_str(shape));
        *inferred = numel_ / known;
    }
    HNAS_CHECK(shape_numel(resolved, "reshape") == numel_, "reshape: cannot view ", shape_str(shape_), " as ",
               shape_str(shape));
    Tensor view = *this;
    view.shape_ = resolved;
    return view;
}

Tensor Tensor::clone() const {
    Tensor copy = empty(shape_, dtype_);
    std::memcpy(copy.storage_->values(), storage_->values(), static_cast<size_t>(numel_) * element_size(dtype_));
    return copy;
}

Tensor Tensor::take_rows(const std::vector<int64_t>& rows) const {
    HNAS_CHECK(rank() >= 1, "take_rows: a scalar has no rows");
    const int64_t count = shape_[0],
                  row_bytes = (count > 0 ? numel_ / count : 0) * static_cast<int64_t>(element_size(dtype_));
    Shape shape = shape_;
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor taken = empty(shape, dtype_);
    auto* out = static_cast<char*>(taken.storage_->values());
    const auto* in = static_cast<const char*>(storage_->values());
    for (size_t i = 0; i < rows.size(); ++i) {
        HNAS_CHECK(rows[i] >= 0 && rows[i] < count, "take_rows: row ", rows[i], " of a tensor ", shape_str(shape_));
        std::memcpy(out + static_cast<int64_t>(i) * row_bytes, in + rows[i] * row_bytes, static_cast<size_t>(row_bytes));
    }
    return taken;
}

std::vector<float> Tensor::to_floats() const {
    const float* values = data();
    return std::vector<float>(values, values + numel_);
}

void Tensor::fill(float value) {
    float* values = data();
    std::fill(values, values + numel_, value);
}

}  // namespace hnas
