#include "tensor/tensor.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace hnas {

namespace {

constexpr size_t kAlignment = 64;  // one cache line, and the widest AVX-512 load

// A cache of freed blocks by size class. A training step allocates the same sizes every step, so after
// the first steps every allocation is a reuse: no malloc, no fresh pages to fault in. Sizes round up
// to one of 8 classes per power of two (at most 12.5 % waste), so batches of varying shape (length
// bucketing) share blocks instead of filling the cache with one exact size each; keyed by exact sizes,
// a tiny model's training process was measured holding 6 GB. Sanitizer builds bypass the cache so
// AddressSanitizer sees every use after free.
class BlockPool {
public:
    // Never destroyed: tensors in static storage may be freed after any destructor here would run.
    static BlockPool& instance() {
        static BlockPool* pool = new BlockPool;
        return *pool;
    }

    void* acquire(size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto found = free_.find(bytes);
            if (found != free_.end() && !found->second.empty()) {
                void* block = found->second.back();
                found->second.pop_back();
                memory_.cached -= static_cast<int64_t>(bytes);
                count_live(bytes);
                return block;
            }
        }
        void* block = allocate(bytes);  // outside the lock: fresh pages may take a while
        std::lock_guard<std::mutex> lock(mutex_);
        count_live(bytes);
        return block;
    }

    void release(void* block, size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        memory_.live -= static_cast<int64_t>(bytes);
        if (kBypass || memory_.cached + static_cast<int64_t>(bytes) > kMaxCachedBytes) {
            std::free(block);
            return;
        }
        free_[bytes].push_back(block);
        memory_.cached += static_cast<int64_t>(bytes);
        memory_.peak_cached = std::max(memory_.peak_cached, memory_.cached);
    }

    TensorMemory memory() {
        std::lock_guard<std::mutex> lock(mutex_);
        return memory_;
    }

    void reset_peaks() {
        std::lock_guard<std::mutex> lock(mutex_);
        memory_.peak_live = memory_.live;
        memory_.peak_cached = memory_.cached;
    }

private:
#ifdef HNAS_SANITIZE
    static constexpr bool kBypass = true;
#else
    static constexpr bool kBypass = false;
#endif
    static constexpr int64_t kMaxCachedBytes = int64_t{1} << 30;

    // Called with the mutex held.
    void count_live(size_t bytes) {
        memory_.live += static_cast<int64_t>(bytes);
        memory_.peak_live = std::max(memory_.peak_live, memory_.live);
    }

    // A fresh block; when memory runs out, the cache is given back to the system and the request tried
    // once more before it fails.
    void* allocate(size_t bytes) {
        if (void* block = std::aligned_alloc(kAlignment, bytes)) return block;
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [size, blocks] : free_) {
            for (void* cached : blocks) std::free(cached);
            blocks.clear();
        }
        memory_.cached = 0;
        if (void* block = std::aligned_alloc(kAlignment, bytes)) return block;
        throw AllocationError(static_cast<int64_t>(bytes), memory_);
    }

    std::mutex mutex_;
    std::unordered_map<size_t, std::vector<void*>> free_;
    TensorMemory memory_;
};

// The block size for a request: a multiple of kAlignment, and above 512 bytes the smallest
// m·2^k ≥ requested with m in 8..15.
size_t size_class(size_t requested) {
    const size_t aligned = std::max(kAlignment, (requested + kAlignment - 1) / kAlignment * kAlignment);
    if (aligned <= 8 * kAlignment) return aligned;
    const int shift = static_cast<int>(std::bit_width(aligned)) - 4;  // keeps the top four bits
    const size_t step = size_t{1} << shift;
    return (aligned + step - 1) / step * step;
}

}  // namespace

TensorMemory tensor_memory() { return BlockPool::instance().memory(); }
void reset_tensor_memory_peaks() { BlockPool::instance().reset_peaks(); }

AllocationError::AllocationError(int64_t bytes_, const TensorMemory& held_)
    : Error(concat_message("tensor: cannot allocate ", bytes_, " bytes with ", held_.live, " bytes held by live tensors")),
      bytes(bytes_),
      held(held_) {}

struct Tensor::Storage {
    explicit Storage(size_t requested)
        : bytes(size_class(requested)),
          data(BlockPool::instance().acquire(bytes)) {}
    ~Storage() { BlockPool::instance().release(data, bytes); }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    size_t bytes;
    void* data;
};

Tensor Tensor::empty(const Shape& shape, DType dtype) {
    for (int64_t d : shape) HNAS_CHECK(d >= 0, "tensor: negative dimension in shape ", shape_str(shape));
    Tensor t;
    t.shape_ = shape;
    t.numel_ = shape_numel(shape);
    t.dtype_ = dtype;
    t.storage_ = std::make_shared<Storage>(static_cast<size_t>(t.numel_) * 4);
    return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    std::memset(t.storage_->data, 0, static_cast<size_t>(t.numel_) * 4);
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

float* Tensor::data() {
    HNAS_CHECK(defined() && dtype_ == DType::f32, "tensor: f32 data of an ", defined() ? "i32" : "undefined",
               " tensor");
    return static_cast<float*>(storage_->data);
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

int32_t* Tensor::ints() {
    HNAS_CHECK(defined() && dtype_ == DType::i32, "tensor: i32 data of an ", defined() ? "f32" : "undefined",
               " tensor");
    return static_cast<int32_t*>(storage_->data);
}

const int32_t* Tensor::ints() const { return const_cast<Tensor*>(this)->ints(); }

float Tensor::item() const {
    HNAS_CHECK(numel_ == 1, "tensor.item: tensor of shape ", shape_str(shape_), " is not a single value");
    return data()[0];
}

Tensor Tensor::reshape(const Shape& shape) const {
    Shape resolved = shape;
    int64_t known = 1;
    int inferred = -1;
    for (size_t i = 0; i < resolved.size(); ++i) {
        if (resolved[i] == -1) {
            HNAS_CHECK(inferred < 0, "reshape: more than one -1 in ", shape_str(shape));
            inferred = static_cast<int>(i);
        } else {
            known *= resolved[i];
        }
    }
    if (inferred >= 0) {
        HNAS_CHECK(known > 0 && numel_ % known == 0, "reshape: cannot view ", shape_str(shape_), " as ",
                   shape_str(shape));
        resolved[static_cast<size_t>(inferred)] = numel_ / known;
    }
    HNAS_CHECK(shape_numel(resolved) == numel_, "reshape: cannot view ", shape_str(shape_), " as ",
               shape_str(shape));
    Tensor view = *this;
    view.shape_ = resolved;
    return view;
}

Tensor Tensor::clone() const {
    Tensor copy = empty(shape_, dtype_);
    std::memcpy(copy.storage_->data, storage_->data, static_cast<size_t>(numel_) * 4);
    return copy;
}

Tensor Tensor::take_rows(const std::vector<int64_t>& rows) const {
    HNAS_CHECK(rank() >= 1, "take_rows: a scalar has no rows");
    const int64_t count = shape_[0], row_bytes = (count > 0 ? numel_ / count : 0) * 4;
    Shape shape = shape_;
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor taken = empty(shape, dtype_);
    auto* out = static_cast<char*>(taken.storage_->data);
    const auto* in = static_cast<const char*>(storage_->data);
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
