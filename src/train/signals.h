// SIGINT and SIGTERM ask a training run to write a checkpoint and stop after its current step: while a
// SignalGuard lives, the handler only records the signal, and the loop polls pending_signal().
#pragma once

namespace hnas::train {

class SignalGuard {
public:
    SignalGuard();  // clears any signal recorded before
    ~SignalGuard();
    SignalGuard(const SignalGuard&) = delete;
    SignalGuard& operator=(const SignalGuard&) = delete;

private:
    void (*previous_int_)(int);
    void (*previous_term_)(int);
};

// The signal received since the guard was made; 0: none.
int pending_signal();

}  // namespace hnas::train
