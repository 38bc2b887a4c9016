#include "train/signals.h"

#include <atomic>
#include <csignal>

namespace hnas::train {

namespace {
std::atomic<int> received{0};
extern "C" void record_signal(int signal) { received.store(signal); }
}  // namespace

SignalGuard::SignalGuard() {
    received.store(0);
    previous_int_ = std::signal(SIGINT, record_signal);
    previous_term_ = std::signal(SIGTERM, record_signal);
}

SignalGuard::~SignalGuard() {
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
}

int pending_signal() { return received.load(); }

}  // namespace hnas::train
