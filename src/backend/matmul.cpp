#include "backend/matmul.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "backend/kernels.h"
#include "base/check.h"
#include "base/hash.h"

namespace hnas::backend {

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

struct Engine {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
};

Engine& cpu() {
    static Engine instance;
    return instance;
}

// The calling thread's stream: ops::blocked_attention runs products on every thread of a parallel
// region at once (each then on one thread), and a stream is not to be shared by concurrent executions.
dnnl::stream& thread_stream() {
    thread_local dnnl::stream stream{cpu().engine};
    return stream;
}

struct MatmulKey {
    int64_t batch, m, n, k, heads;
    bool trans_a, trans_b, shared_b, a_interleaved, b_interleaved, c_interleaved, has_bias, accumulate, bf16,
        bf16_result, b_packed;
    float alpha;
    MatmulEpilogue epilogue;
    bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
    size_t operator()(const MatmulKey& key) const {
        size_t h = 1469598103934665603ull;
        auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
        mix(static_cast<uint64_t>(key.batch));
        mix(static_cast<uint64_t>(key.m));
        mix(static_cast<uint64_t>(key.n));
        mix(static_cast<uint64_t>(key.k));
        mix(static_cast<uint64_t>(key.heads));
        mix((key.trans_a ? 1u : 0u) | (key.trans_b ? 2u : 0u) | (key.shared_b ? 4u : 0u) |
            (key.has_bias ? 8u : 0u) | (key.accumulate ? 16u : 0u) | (key.bf16 ? 32u : 0u) |
            (key.a_interleaved ? 64u : 0u) | (key.b_interleaved ? 128u : 0u) | (key.c_interleaved ? 256u : 0u) |
            (key.bf16_result ? 512u : 0u) | (key.b_packed ? 1024u : 0u));
        mix(std::hash<float>{}(key.alpha));
        mix(static_cast<uint64_t>(key.epilogue));
        return h;
    }
};

struct CachedMatmul {
    dnnl::matmul primitive;
    dnnl::memory::desc a_desc, b_desc, bias_desc, c_desc;
    // A packed B: the f32 layout its tensor holds, reordered into b_desc, and b_desc's fingerprint.
    dnnl::memory::desc b_source_desc;
    uint64_t b_layout = 0;
    dnnl::memory::desc scratchpad_desc;  // the temporary memory one execution needs (often none)
    bool reference = false;              // oneDNN chose its reference kernel ("ref:…"), no generated code
};

// The descriptor of `batch` (rows, cols) matrices stored row-major, or transposed: stored (cols, rows).
// With heads > 1 the batch is (batch / heads, heads), and an interleaved operand's stored row r of
// head h starts at (r·heads + h)·(stored row length).
dnnl::memory::desc matrix_desc(int64_t batch, int64_t heads, int64_t rows, int64_t cols, bool transposed, bool shared,
                               bool interleaved, dt type) {
    const int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
    const int64_t row_stride = interleaved ? heads * stored_cols : stored_cols;
    const int64_t row_step = transposed ? 1 : row_stride, col_step = transposed ? row_stride : 1;
    const int64_t matrix = stored_rows * stored_cols;
    // A shared matrix is a batch of one, broadcast by its size; its batch stride stays the matrix's, as
    // a stride of 0 sorts the batch innermost and a transposed B then falls to oneDNN's reference kernel.
    if (heads == 1) return dnnl::memory::desc({shared ? 1 : batch, rows, cols}, type, dims{matrix, row_step, col_step});
    if (shared) return dnnl::memory::desc({1, 1, rows, cols}, type, dims{matrix, matrix, row_step, col_step});
    const int64_t head_stride = interleaved ? stored_cols : matrix;
    return dnnl::memory::desc({batch / heads, heads, rows, cols}, type, dims{heads * matrix, head_stride, row_step, col_step});
}

// What identifies a memory layout: its type, dimensions, padding, strides and blocks.
uint64_t layout_fingerprint(const dnnl::memory::desc& desc) {
    const dnnl_memory_desc_t& d = desc.data;
    const dnnl_blocking_desc_t& blocking = d.format_desc.blocking;
    uint64_t hash = hash_combine(static_cast<uint64_t>(d.ndims), static_cast<uint64_t>(d.data_type));
    hash = hash_combine(hash, static_cast<uint64_t>(d.format_kind));
    for (int i = 0; i < d.ndims; ++i) {
        hash = hash_combine(hash, static_cast<uint64_t>(d.dims[i]));
        hash = hash_combine(hash, static_cast<uint64_t>(d.padded_dims[i]));
        hash = hash_combine(hash, static_cast<uint64_t>(blocking.strides[i]));
    }
    for (int i = 0; i < blocking.inner_nblks; ++i) {
        hash = hash_combine(hash, static_cast<uint64_t>(blocking.inner_blks[i]));
        hash = hash_combine(hash, static_cast<uint64_t>(blocking.inner_idxs[i]));
    }
    return hash_combine(hash, static_cast<uint64_t>(d.extra.flags));
}

CachedMatmul create_matmul(const MatmulKey& key) {
    CachedMatmul cached;
    // bf16 operands keep the f32 arrays' layout (they are elementwise copies); the bias stays f32, and
    // C too unless written as bf16 alone.
    const dt operand_type = key.bf16 ? dt::bf16 : dt::f32;
    cached.a_desc = matrix_desc(key.batch, key.heads, key.m, key.k, key.trans_a, false, key.a_interleaved, operand_type);
    cached.b_desc = matrix_desc(key.batch, key.heads, key.k, key.n, key.trans_b, key.shared_b, key.b_interleaved, operand_type);
    cached.c_desc = matrix_desc(key.batch, key.heads, key.m, key.n, false, false, key.c_interleaved,
                                key.bf16_result ? dt::bf16 : dt::f32);
    if (key.has_bias) cached.bias_desc = dnnl::memory::desc({1, 1, key.n}, dt::f32, dims{key.n, key.n, 1});
    if (key.b_packed) {
        // One product of plain matrices, described in 2-D: only for those does oneDNN 2.6's kernel choose
        // a blocked B (16 × 64 blocks; bf16 with pairs of k interleaved, as its dot products read them).
        const auto matrix = [](int64_t rows, int64_t cols, bool transposed, dt type) {
            return dnnl::memory::desc({rows, cols}, type, transposed ? dims{1, rows} : dims{cols, 1});
        };
        cached.a_desc = matrix(key.m, key.k, key.trans_a, operand_type);
        cached.b_source_desc = matrix(key.k, key.n, key.trans_b, dt::f32);
        cached.b_desc = dnnl::memory::desc({key.k, key.n}, operand_type, dnnl::memory::format_tag::any);
        cached.c_desc = matrix(key.m, key.n, false, key.bf16_result ? dt::bf16 : dt::f32);
        if (key.has_bias) cached.bias_desc = dnnl::memory::desc({1, key.n}, dt::f32, dims{key.n, 1});
    }

    dnnl::primitive_attr attr;
    // The caller lends each execution its scratchpad: in oneDNN's default mode every primitive keeps
    // its own, about 90 KB on average for hnas's shapes, times the hundreds of primitives cached.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
    dnnl::post_ops post_ops;
    if (key.accumulate) post_ops.append_sum(1.0f);
    if (key.epilogue != MatmulEpilogue::none) {
        const auto function = key.epilogue == MatmulEpilogue::gelu_erf ? dnnl::algorithm::eltwise_gelu_erf
                                                                       : dnnl::algorithm::eltwise_gelu_tanh;
        post_ops.append_eltwise(1.0f, function, 0.0f, 0.0f);
    }
    attr.set_post_ops(post_ops);
    const dnnl::matmul::desc desc(cached.a_desc, cached.b_desc, cached.bias_desc, cached.c_desc);
    try {
        const dnnl::matmul::primitive_desc primitive_desc(desc, attr, cpu().engine);
        cached.scratchpad_desc = primitive_desc.scratchpad_desc();
        if (key.b_packed) {
            cached.b_desc = primitive_desc.weights_desc();
            cached.b_layout = layout_fingerprint(cached.b_desc);
        }
        cached.reference = std::string_view(primitive_desc.impl_info_str()).starts_with("ref");
        cached.primitive = dnnl::matmul(primitive_desc);
    } catch (const dnnl::error& e) {
        // oneDNN offers bf16 only on CPUs with AVX-512 (or newer); say so instead of its bare status.
        HNAS_CHECK(!key.bf16, "backend.matmul: oneDNN has no bf16 matmul on this CPU (", e.what(),
                   "); use precision f32");
        throw;
    }
    return cached;
}

}  // namespace

bool bf16_matmul_available() {
    // One small bf16 product's primitive: oneDNN creates it only on CPUs with bf16 instructions.
    static const bool available = [] {
        try {
            create_matmul(MatmulKey{.batch = 1, .m = 2, .n = 2, .k = 2, .heads = 1, .trans_a = false, .trans_b = false,
                                    .shared_b = false, .a_interleaved = false, .b_interleaved = false, .c_interleaved = false,
                                    .has_bias = false, .accumulate = false, .bf16 = true, .bf16_result = false,
                                    .b_packed = false, .alpha = 1.0f, .epilogue = MatmulEpilogue::none});
            return true;
        } catch (const Error&) {
            return false;
        }
    }();
    return available;
}

namespace {

using Clock = std::chrono::steady_clock;

// The primitives of the most recently used shapes. Batches of varying length bring a few thousand
// shapes in a few hundred steps, each primitive holding ~35 KB of generated code and descriptors, while
// creating one takes ~0.5 ms; so the cache keeps the last kMatmulCacheCapacity and forgets the rest (oneDNN's own
// cache is off, or it would keep them alive). Measured in docs/performance.md.
class MatmulCache {
public:
    MatmulCache() { dnnl::set_primitive_cache_capacity(0); }

    std::shared_ptr<const CachedMatmul> lookup(const MatmulKey& key) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = entries_.find(key);
        if (found != entries_.end()) {
            recency_.splice(recency_.begin(), recency_, found->second.recency);
            return found->second.matmul;
        }
        const auto start = Clock::now();
        auto matmul = std::make_shared<const CachedMatmul>(create_matmul(key));
        creation_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
        ++created_;
        if (matmul->reference) ++reference_;
        if (entries_.size() == kMatmulCacheCapacity) {
            entries_.erase(recency_.back());
            recency_.pop_back();
        }
        recency_.push_front(key);
        entries_.emplace(key, Entry{matmul, recency_.begin()});
        return matmul;
    }

    // Primitives created so far (evicted ones included), those on oneDNN's reference kernel, and the
    // seconds creating them took.
    std::tuple<int64_t, int64_t, double> created() {
        std::lock_guard<std::mutex> lock(mutex_);
        return {created_, reference_, creation_seconds_};
    }

private:
    struct Entry {
        std::shared_ptr<const CachedMatmul> matmul;
        std::list<MatmulKey>::iterator recency;
    };
    std::mutex mutex_;
    std::list<MatmulKey> recency_;  // most recent first
    std::unordered_map<MatmulKey, Entry, MatmulKeyHash> entries_;
    int64_t created_ = 0, reference_ = 0;
    double creation_seconds_ = 0.0;
};

MatmulCache& matmul_cache() {
    static MatmulCache cache;
    return cache;
}

std::atomic<int64_t> calls{0};
std::atomic<double> flops{0.0}, seconds{0.0};

// A calling thread's scratch memory: grows to the largest request seen and keeps its memory, so the
// hot path allocates nothing. 64-byte aligned like hnas's f32 tensors.
class GrowingBuffer {
public:
    void* reserve(size_t bytes) {
        if (bytes > capacity_) {
            const size_t rounded = (bytes + 63) / 64 * 64;
            storage_.reset(std::aligned_alloc(64, rounded));
            HNAS_CHECK(storage_ != nullptr, "backend.matmul: cannot allocate ", rounded, " bytes of scratch memory");
            capacity_ = rounded;
        }
        return storage_.get();
    }

private:
    struct Free {
        void operator()(void* pointer) const { std::free(pointer); }
    };
    std::unique_ptr<void, Free> storage_;
    size_t capacity_ = 0;
};

// A calling thread's bf16 copy of one operand.
class Bf16Scratch {
public:
    const uint16_t* convert(const float* values, int64_t count) {
        auto* out = static_cast<uint16_t*>(buffer_.reserve(static_cast<size_t>(count) * sizeof(uint16_t)));
        kernels::convert_to_bf16(values, out, count);
        return out;
    }

private:
    GrowingBuffer buffer_;
};

thread_local Bf16Scratch a_scratch, b_scratch;
thread_local GrowingBuffer scratchpad;

MatmulKey key_of(const MatmulCall& call) {
    const MatmulShape& s = call.shape;
    return {s.batch, s.m, s.n, s.k, s.heads, s.trans_a, s.trans_b, s.shared_b, s.a_interleaved, s.b_interleaved,
            s.c_interleaved, call.bias, call.accumulate, call.precision == MatmulPrecision::bf16, call.bf16_result,
            call.b_packed, call.alpha, call.epilogue};
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const void* pointer) {
    return dnnl::memory(desc, cpu().engine, const_cast<void*>(pointer));
}

// The execution arguments of one product: operands, result, the bias when given, and the calling
// thread's scratchpad when the primitive needs one.
std::unordered_map<int, dnnl::memory> execution_args(const CachedMatmul& cached, const void* a, const void* b, void* c,
                                                     const float* bias) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(cached.a_desc, a)},
                                               {DNNL_ARG_WEIGHTS, wrap(cached.b_desc, b)},
                                               {DNNL_ARG_DST, wrap(cached.c_desc, c)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, wrap(cached.bias_desc, bias));
    const size_t scratch_bytes = cached.scratchpad_desc.get_size();
    if (scratch_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, wrap(cached.scratchpad_desc, scratchpad.reserve(scratch_bytes)));
    return args;
}

// The active MatmulRecorder's calls; empty when none records.
std::mutex recording_mutex;
std::optional<std::vector<MatmulCall>> recording;
std::atomic<bool> recording_on{false};

void record(const MatmulCall& call) {
    if (!recording_on.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(recording_mutex);
    if (recording) recording->push_back(call);
}

// oneDNN's bf16 matmul gives a product with A transposed to one thread when its result is small: every
// 256 × 256 weight gradient dW = dYᵀ X of the headline decoder's 512 rows, 24 a step, 3.7 ms of 126.5 on
// one core of two (`scripts/bench.sh regions`, docs/performance.md). Such a product runs as one batch
// entry per thread, A's columns as interleaved heads and B shared, which oneDNN spreads over the
// threads; the sums are the same terms.
MatmulShape spread_over_threads(MatmulShape s, const MatmulCall& call) {
    constexpr int64_t kSmallResult = 256 * 256;
    const int64_t threads = num_threads();
    if (call.precision != MatmulPrecision::bf16 || call.b_packed || threads < 2 || omp_in_parallel() || s.batch != 1 || s.heads != 1 ||
        !s.trans_a || call.bias || s.m % threads != 0 || s.m * s.n > kSmallResult)
        return s;
    s.batch = s.heads = threads;
    s.m /= threads;
    s.shared_b = s.a_interleaved = true;
    return s;
}

}  // namespace

MatmulRecorder::MatmulRecorder() {
    std::lock_guard<std::mutex> lock(recording_mutex);
    HNAS_CHECK(!recording, "backend.matmul: a MatmulRecorder is already recording");
    recording.emplace();
    recording_on.store(true);
}

MatmulRecorder::~MatmulRecorder() {
    std::lock_guard<std::mutex> lock(recording_mutex);
    recording_on.store(false);
    recording.reset();
}

std::vector<MatmulCall> MatmulRecorder::calls() const {
    std::lock_guard<std::mutex> lock(recording_mutex);
    return *recording;
}

double matmul_only_seconds(const std::vector<MatmulCall>& calls, int repeats, size_t evict_bytes) {
    HNAS_CHECK(repeats >= 1, "backend.matmul: the matmul-only bound needs at least one timed repeat, got ", repeats);
    // One set of operand buffers per precision present, as large as its largest call's layout needs (a
    // packed B's may be padded); the values only must be normal numbers (0.5, exact in bf16).
    std::vector<std::shared_ptr<const CachedMatmul>> entries;
    size_t a_f32 = 0, b_f32 = 0, a_bf16 = 0, b_bf16 = 0, c_bytes = 0, bias_bytes = 0;
    for (const MatmulCall& call : calls) {
        entries.push_back(matmul_cache().lookup(key_of(call)));
        const CachedMatmul& entry = *entries.back();
        const bool bf16 = call.precision == MatmulPrecision::bf16;
        size_t& a_bytes = bf16 ? a_bf16 : a_f32;
        size_t& b_bytes = bf16 ? b_bf16 : b_f32;
        a_bytes = std::max(a_bytes, entry.a_desc.get_size());
        b_bytes = std::max(b_bytes, entry.b_desc.get_size());
        c_bytes = std::max(c_bytes, entry.c_desc.get_size());
        if (call.bias) bias_bytes = std::max(bias_bytes, entry.bias_desc.get_size());
    }
    constexpr uint16_t kBf16Half = 0x3F00;
    std::vector<float> a32(a_f32 / sizeof(float), 0.5f), b32(b_f32 / sizeof(float), 0.5f);
    std::vector<uint16_t> a16(a_bf16 / sizeof(uint16_t), kBf16Half), b16(b_bf16 / sizeof(uint16_t), kBf16Half);
    std::vector<float> c(c_bytes / sizeof(float), 0.0f), bias(bias_bytes / sizeof(float), 0.5f);
    std::vector<unsigned char> evictor(evict_bytes);
    double total = 0.0;
    std::vector<double> times(static_cast<size_t>(repeats));
    for (size_t i = 0; i < calls.size(); ++i) {
        const MatmulCall& call = calls[i];
        const CachedMatmul& entry = *entries[i];
        const bool bf16 = call.precision == MatmulPrecision::bf16;
        const auto args = execution_args(entry, bf16 ? static_cast<const void*>(a16.data()) : a32.data(),
                                         bf16 ? static_cast<const void*>(b16.data()) : b32.data(), c.data(),
                                         call.bias ? bias.data() : nullptr);
        entry.primitive.execute(thread_stream(), args);
        thread_stream().wait();
        for (double& seconds : times) {
            std::fill(evictor.begin(), evictor.end(), static_cast<unsigned char>(&seconds - times.data()));
            const auto start = Clock::now();
            entry.primitive.execute(thread_stream(), args);
            thread_stream().wait();
            seconds = std::chrono::duration<double>(Clock::now() - start).count();
        }
        std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
        total += times[static_cast<size_t>(repeats / 2)];
    }
    return total;
}

MatmulOperand packed_operand(const Tensor& matrix) {
    MatmulOperand packed(nullptr);
    packed.packable = &matrix;
    return packed;
}

namespace {

// A packed B's values in the primitive's layout, reordered from the tensor's f32 values (rounded to bf16
// on the way under bf16, to nearest even as convert_to_bf16) when they changed since.
const void* packed_values(const Tensor& matrix, const CachedMatmul& cached) {
    const auto [block, current] = matrix.layout_copy(cached.b_layout, cached.b_desc.get_size());
    if (!current) {
        dnnl::memory source = wrap(cached.b_source_desc, matrix.data());
        dnnl::memory packed = wrap(cached.b_desc, block);
        dnnl::reorder(source, packed).execute(thread_stream(), source, packed);
        thread_stream().wait();
    }
    return block;
}

}  // namespace

MatmulOperand operand(const Tensor& tensor) {
    if (matmul_precision() != MatmulPrecision::bf16) return tensor.data();
    const auto [rounded, current] = tensor.bf16_copy();
    if (current) return {nullptr, rounded};  // no f32 values needed: a bf16-only tensor need not make them
    const auto start = Clock::now();
    kernels::convert_to_bf16(tensor.data(), rounded, tensor.numel());
    seconds.fetch_add(std::chrono::duration<double>(Clock::now() - start).count());
    return {tensor.data(), rounded};
}

void matmul(MatmulOperand a, MatmulOperand b, MatmulResult c, const MatmulShape& shape, const MatmulOptions& options) {
    HNAS_CHECK(shape.batch > 0 && shape.m > 0 && shape.n > 0 && shape.k > 0, "backend.matmul: empty problem (batch ",
               shape.batch, ", m ", shape.m, ", n ", shape.n, ", k ", shape.k, ")");
    HNAS_CHECK(shape.heads >= 1 && shape.batch % shape.heads == 0 && (shape.heads == 1 || !options.bias),
               "backend.matmul: ", shape.heads, " heads for a batch of ", shape.batch,
               " (heads must divide the batch, and products of heads take no bias)");
    HNAS_CHECK(options.alpha == 1.0f || options.bias == nullptr,
               "backend.matmul: alpha with a bias is not supported (oneDNN would scale the bias too)");
    const auto start = Clock::now();
    HNAS_CHECK(options.epilogue == MatmulEpilogue::none || (options.alpha == 1.0f && !options.accumulate),
               "backend.matmul: an epilogue function needs alpha 1 and no accumulation");
    MatmulCall call{shape,           options.alpha,         options.bias != nullptr, options.accumulate,
                    matmul_precision(), c.bf16 != nullptr, options.epilogue, b.packable != nullptr};
    call.shape = spread_over_threads(shape, call);
    HNAS_CHECK(!a.packable, "backend.matmul: a packed operand is B only; A was given one");
    HNAS_CHECK(!b.packable || (shape.batch == 1 && shape.heads == 1 && !shape.a_interleaved && !shape.c_interleaved &&
                               b.packable->numel() == shape.k * shape.n),
               "backend.matmul: a packed operand is one ", shape.k, " x ", shape.n, " matrix, got a tensor of ",
               b.packable->numel(), " values for a batch of ", shape.batch, " with ", shape.heads, " heads");
    const bool bf16 = call.precision == MatmulPrecision::bf16;
    HNAS_CHECK(!call.bf16_result || (bf16 && !call.accumulate && c.f32 == nullptr),
               "backend.matmul: a bf16 result needs bf16 precision, no accumulation and no f32 result beside it");
    const std::shared_ptr<const CachedMatmul> matmul_entry = matmul_cache().lookup(key_of(call));
    const CachedMatmul& cached = *matmul_entry;
    const void* a_operand = a.f32;
    const void* b_operand = b.packable ? packed_values(*b.packable, cached) : b.f32;
    if (bf16) {
        // The stored arrays are contiguous (any transpose lives in the descriptors' strides).
        a_operand = a.bf16 ? a.bf16 : a_scratch.convert(a.f32, shape.batch * shape.m * shape.k);
        if (!b.packable)
            b_operand = b.bf16 ? b.bf16 : b_scratch.convert(b.f32, (shape.shared_b ? 1 : shape.batch) * shape.k * shape.n);
    }
    void* result = call.bf16_result ? static_cast<void*>(c.bf16) : static_cast<void*>(c.f32);
    cached.primitive.execute(thread_stream(), execution_args(cached, a_operand, b_operand, result, options.bias));
    thread_stream().wait();
    record(call);
    calls.fetch_add(1);
    flops.fetch_add(shape.flops());
    seconds.fetch_add(std::chrono::duration<double>(Clock::now() - start).count());
}

MatmulStats matmul_stats() {
    const auto [created, reference, creation_seconds] = matmul_cache().created();
    return {calls.load(), created, reference, flops.load(), seconds.load(), creation_seconds};
}

void set_num_threads(int threads) {
    HNAS_CHECK(threads > 0, "threads must be positive, got ", threads);
    omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

void choose_openmp_waiting(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    setenv("GOMP_SPINCOUNT", std::to_string(kOpenmpSpinCount).c_str(), 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run with libgomp's defaults
}

std::string describe() {
    const dnnl_version_t* version = dnnl_version();
    std::ostringstream out;
    out << "oneDNN " << version->major << "." << version->minor << "." << version->patch << " (cpu runtime "
        << (version->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") << ", "
        << (bf16_matmul_available() ? "bf16 matmuls available" : "no bf16 matmul on this CPU") << ", " << num_threads() << " threads";
    for (const char* variable : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
        if (const char* value = std::getenv(variable)) out << ", " << variable << "=" << value;
    }
    out << ")";
    return out.str();
}

}  // namespace hnas::backend
