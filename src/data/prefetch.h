// A background thread that runs a producer ahead of its consumer into a bounded queue, so reading,
// tokenizing and padding overlap with training. An exception thrown by the producer is carried to
// the consumer and rethrown by next() after the items produced before it; it never terminates the
// program. PrefetchedPipeline puts a batch engine behind it and keeps the consumer's data position.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "base/check.h"
#include "data/batching.h"

namespace hnas::data {

template <typename Item>
class Prefetcher {
public:
    // Calls `producer` on a background thread until it returns std::nullopt (the end) or throws,
    // keeping at most `capacity` items ready. The producer must not be touched by anyone else while
    // this object lives.
    Prefetcher(std::function<std::optional<Item>()> producer, size_t capacity)
        : producer_(std::move(producer)), capacity_(capacity) {
        HNAS_CHECK(capacity_ >= 1, "prefetch: the queue needs room for at least one item");
        thread_ = std::thread([this] { run(); });
    }

    // Stops the thread; an item being produced is finished and dropped.
    ~Prefetcher() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        space_.notify_all();
        thread_.join();
    }

    Prefetcher(const Prefetcher&) = delete;
    Prefetcher& operator=(const Prefetcher&) = delete;

    // The next item, waiting for it if needed; std::nullopt once the producer has ended. Rethrows the
    // producer's exception (on this and every later call) once the items before it are consumed.
    std::optional<Item> next() {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty() || finished_; });
        if (!queue_.empty()) {
            std::optional<Item> item(std::move(queue_.front()));
            queue_.pop_front();
            space_.notify_one();
            return item;
        }
        if (error_) std::rethrow_exception(error_);
        return std::nullopt;
    }

private:
    void run() {
        try {
            while (true) {
                {
                    std::unique_lock<std::mutex> lock(mutex_);
                    space_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
                    if (stop_) return;
                }
                std::optional<Item> item = producer_();
                std::lock_guard<std::mutex> lock(mutex_);
                if (!item) {
                    finished_ = true;
                    ready_.notify_all();
                    return;
                }
                queue_.push_back(std::move(*item));
                ready_.notify_one();
            }
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            error_ = std::current_exception();
            finished_ = true;
            ready_.notify_all();
        }
    }

    std::function<std::optional<Item>()> producer_;
    size_t capacity_;
    std::mutex mutex_;
    std::condition_variable ready_;  // an item or the end is available
    std::condition_variable space_;  // the queue has room, or stop_
    std::deque<Item> queue_;
    bool finished_ = false;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;  // last: starts after every other member is constructed
};

// Drives an Engine (produce() → std::optional<Batch>, position(), restore()) either on the caller's
// thread (prefetch 0) or through a Prefetcher. The engine runs ahead of the consumer, so the
// position reported is the one recorded with the last batch handed out, not the engine's.
template <typename Engine, typename Batch>
class PrefetchedPipeline {
public:
    PrefetchedPipeline(Engine engine, size_t prefetch)
        : engine_(std::move(engine)), prefetch_(prefetch), position_(engine_.position()) {}

    std::optional<Batch> next() {
        if (prefetch_ == 0) {
            std::optional<Batch> batch = engine_.produce();
            position_ = engine_.position();
            return batch;
        }
        if (!prefetcher_) {
            prefetcher_ = std::make_unique<Prefetcher<Delivered>>(
                [this]() -> std::optional<Delivered> {
                    std::optional<Batch> batch = engine_.produce();
                    if (!batch) return std::nullopt;
                    return Delivered{std::move(*batch), engine_.position()};
                },
                prefetch_);
        }
        std::optional<Delivered> delivered = prefetcher_->next();
        if (!delivered) return std::nullopt;
        position_ = delivered->after;
        return std::move(delivered->batch);
    }

    DataPosition position() const { return position_; }

    void restore(const DataPosition& position) {
        prefetcher_.reset();  // joins the thread: the engine is ours again
        engine_.restore(position);
        position_ = engine_.position();
    }

    const Engine& engine() const { return engine_; }
    // The engine to set up, before the first batch is asked for (the background thread then owns it).
    Engine& engine_before_start() {
        HNAS_CHECK(!prefetcher_, "prefetch: the pipeline has started; set it up before the first batch");
        return engine_;
    }

private:
    struct Delivered {
        Batch batch;
        DataPosition after;
    };
    Engine engine_;
    size_t prefetch_;
    DataPosition position_;
    std::unique_ptr<Prefetcher<Delivered>> prefetcher_;  // last: destroyed first, stopping the thread
};

}  // namespace hnas::data
