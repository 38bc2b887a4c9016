// MPI behind the Communicator interface: every operation non-blocking, polled against a deadline.
#include "distributed/mpi_communicator.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/number_format.h"

namespace hnas::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// Ranks other than 0 wait this much longer than the timeout, so that when a rank hangs, rank 0 — the
// only one that knows who arrived — is the one that reports it.
constexpr double kGraceSeconds = 5.0;

// When every rank arrived at an operation that still did not complete, rank 0 pings the others and
// names those that do not answer within this time: a rank waiting in an operation answers at once,
// a stopped or dead one never. It ends the job before the other ranks' grace runs out.
constexpr double kPingReplySeconds = 2.0;
static_assert(kPingReplySeconds < kGraceSeconds);

// progress() tests the open sums at most this often: often enough to keep a link busy, seldom enough
// that the tests cost nothing beside the backward pass that calls it after every node.
constexpr std::chrono::microseconds kProgressInterval{200};

void add_bf16_op(void* in, void* inout, int* length, MPI_Datatype*) {
    add_bf16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *length);
}

class MpiCommunicator final : public Communicator {
public:
    explicit MpiCommunicator(double timeout_seconds) : timeout_(timeout_seconds) {
        HNAS_CHECK(timeout_seconds > 0, "MPI: the collective timeout must be positive, got ", timeout_seconds);
        // Open MPI's non-blocking all-reduce (coll/libnbc) sums in place on fewer than 4 ranks along a
        // binomial tree: each bucket travels whole to rank 0, then whole back, one direction at a time.
        // A ring keeps both directions of every link busy: over a 1 Gb/s link gigaword's step with bf16
        // sums went from 0.457 to 0.407 s (docs/distributed.md). A value set by the user or mpirun wins.
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
        // Open MPI's TCP transport writes to its peers' sockets without MSG_NOSIGNAL: when one rank
        // dies mid-transfer, SIGPIPE would kill the rank writing to it too, and mpirun could name the
        // survivor as the cause. Ignored, the write fails instead and the dead rank is the one named.
        std::signal(SIGPIPE, SIG_IGN);
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm host;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host);
        MPI_Comm_size(host, &local_size_);
        MPI_Comm_free(&host);
        // Arrival notes and pings travel on communicators of their own so they can never match
        // collective traffic.
        MPI_Comm_dup(MPI_COMM_WORLD, &notes_);
        MPI_Comm_dup(MPI_COMM_WORLD, &pings_);
        note_values_.resize(static_cast<size_t>(size_));
        ping_answers_.resize(static_cast<size_t>(size_));
        if (rank_ != 0) MPI_Irecv(&ping_value_, 1, MPI_INT, 0, 0, pings_, &ping_);
        MPI_Op_create(&add_bf16_op, /*commute=*/1, &add_bf16_);
    }
    ~MpiCommunicator() override {
        if (ping_ != MPI_REQUEST_NULL) {
            MPI_Cancel(&ping_);
            MPI_Wait(&ping_, MPI_STATUS_IGNORE);
        }
        MPI_Op_free(&add_bf16_);
        MPI_Comm_free(&pings_);
        MPI_Comm_free(&notes_);
        MPI_Finalize();
    }
    MpiCommunicator(const MpiCommunicator&) = delete;
    MpiCommunicator& operator=(const MpiCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int local_size() const override { return local_size_; }

    void open_sums(const std::string& what) override {
        HNAS_CHECK(open_what_.empty(), "MPI: sums '", what, "' opened while '", open_what_, "' are still open");
        open_what_ = what;
        open_requests_ = arrive();
    }

    void start_sum(std::span<float> buffer) override { start_allreduce(buffer.data(), buffer.size(), MPI_FLOAT, MPI_SUM); }

    void start_sum(std::span<uint16_t> bf16_buffer) override {
        start_allreduce(bf16_buffer.data(), bf16_buffer.size(), MPI_UINT16_T, add_bf16_);
    }

    void progress() override {
        // A test costs microseconds; between two of them a link moves far less than its socket buffers hold.
        const auto now = Clock::now();
        if (now - last_progress_ < kProgressInterval) return;
        last_progress_ = now;
        for (MPI_Request& request : open_requests_) {
            if (request == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
            if (!flag) return;  // one test drives the progress engine; later requests can wait
        }
    }

    void wait_sums() override {
        HNAS_CHECK(!open_what_.empty(), "MPI: wait_sums without open_sums");
        wait(open_requests_, open_what_);
        open_requests_.clear();
        open_what_.clear();
    }

    void sum(std::span<double> values, const std::string& what) override {
        std::vector<MPI_Request> requests = arrive();
        requests.push_back(MPI_REQUEST_NULL);
        MPI_Iallreduce(MPI_IN_PLACE, values.data(), count(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                       &requests.back());
        wait(requests, what);
    }

    void broadcast(std::string& bytes, const std::string& what) override {
        uint64_t length = bytes.size();
        std::vector<MPI_Request> requests = arrive();
        requests.push_back(MPI_REQUEST_NULL);
        MPI_Ibcast(&length, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &requests.back());
        wait(requests, what);
        bytes.resize(length);
        requests = arrive();
        requests.push_back(MPI_REQUEST_NULL);
        MPI_Ibcast(bytes.data(), count(length), MPI_CHAR, 0, MPI_COMM_WORLD, &requests.back());
        wait(requests, what);
    }

    [[noreturn]] void abort(const std::string& message) override {
        spdlog::critical("rank {} of {}: {}", rank_, size_, message);
        spdlog::default_logger()->flush();
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::_Exit(1);  // MPI_Abort does not return; this states it to the compiler
    }

private:
    void start_allreduce(void* values, size_t elements, MPI_Datatype type, MPI_Op sum) {
        HNAS_CHECK(!open_what_.empty(), "MPI: start_sum outside open_sums/wait_sums");
        if (elements == 0) return;
        open_requests_.push_back(MPI_REQUEST_NULL);
        MPI_Iallreduce(MPI_IN_PLACE, values, count(elements), type, sum, MPI_COMM_WORLD, &open_requests_.back());
    }

    static int count(size_t elements) {
        HNAS_CHECK(elements <= static_cast<size_t>(std::numeric_limits<int>::max()), "MPI: a buffer of ", elements,
                   " elements is too large for one operation");
        return static_cast<int>(elements);
    }

    // Posts this rank's arrival note for the next operation: every rank sends one to rank 0, which
    // receives one from each. On a timeout rank 0 names the ranks whose note is missing. The notes of
    // operation k carry tag k (mod the smallest tag bound MPI guarantees), and all ranks run the same
    // sequence of operations.
    std::vector<MPI_Request> arrive() {
        const int tag = static_cast<int>(operations_++ % 32768);
        std::vector<MPI_Request> requests;
        if (rank_ == 0) {
            for (int source = 1; source < size_; ++source) {
                requests.push_back(MPI_REQUEST_NULL);
                MPI_Irecv(&note_values_[static_cast<size_t>(source)], 1, MPI_INT, source, tag, notes_, &requests.back());
            }
        } else {
            requests.push_back(MPI_REQUEST_NULL);
            MPI_Isend(&rank_, 1, MPI_INT, 0, tag, notes_, &requests.back());
        }
        return requests;
    }

    // Polls the requests until all completed; aborts the job past the deadline. On rank 0 the first
    // size - 1 requests are the arrival notes of ranks 1, 2, ...
    void wait(std::vector<MPI_Request>& requests, const std::string& what) {
        const auto start = Clock::now();
        const double limit = rank_ == 0 ? timeout_ : timeout_ + kGraceSeconds;
        for (int polls = 0;; ++polls) {
            bool done = true;
            for (MPI_Request& request : requests) {
                if (request == MPI_REQUEST_NULL) continue;
                int flag = 0;
                MPI_Test(&request, &flag, MPI_STATUS_IGNORE);  // a completed request becomes MPI_REQUEST_NULL
                done = done && flag != 0;
            }
            if (done) return;
            if (rank_ != 0) answer_ping();
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            if (waited > limit) timed_out(requests, what, waited);
            // Spin briefly (gradient sums between ranks of one host finish in microseconds), then
            // sleep so that a long wait — rank 0 validating — leaves the cores to the other ranks.
            if (polls < 1000) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(polls < 100000 ? 50 : 1000));
            }
        }
    }

    // Rank 0 pings only when it is about to end the job, so one answer is all a rank ever gives.
    void answer_ping() {
        int pinged = 0;
        MPI_Test(&ping_, &pinged, MPI_STATUS_IGNORE);
        if (!pinged) return;
        MPI_Request answer = MPI_REQUEST_NULL;
        MPI_Isend(&rank_, 1, MPI_INT, 0, 0, pings_, &answer);
        MPI_Request_free(&answer);  // rank_ outlives the send
    }

    // Rank 0: the ranks (as "1, 3") that do not answer a ping within kPingReplySeconds.
    std::string silent_ranks() {
        std::vector<MPI_Request> pings(static_cast<size_t>(size_), MPI_REQUEST_NULL),
            answers(static_cast<size_t>(size_), MPI_REQUEST_NULL);
        for (int other = 1; other < size_; ++other) {
            const auto at = static_cast<size_t>(other);
            MPI_Irecv(&ping_answers_[at], 1, MPI_INT, other, 0, pings_, &answers[at]);
            MPI_Isend(&rank_, 1, MPI_INT, other, 0, pings_, &pings[at]);
        }
        const auto start = Clock::now();
        while (std::chrono::duration<double>(Clock::now() - start).count() < kPingReplySeconds) {
            bool all_answered = true;
            for (int other = 1; other < size_; ++other) {
                const auto at = static_cast<size_t>(other);
                int flag = 0;
                MPI_Test(&pings[at], &flag, MPI_STATUS_IGNORE);
                MPI_Test(&answers[at], &flag, MPI_STATUS_IGNORE);
                all_answered = all_answered && answers[at] == MPI_REQUEST_NULL;
            }
            if (all_answered) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::string silent;
        for (int other = 1; other < size_; ++other) {
            if (answers[static_cast<size_t>(other)] != MPI_REQUEST_NULL) {
                silent += (silent.empty() ? "" : ", ") + std::to_string(other);
            }
        }
        return silent;  // the job ends next: the requests still open go with it
    }

    [[noreturn]] void timed_out(const std::vector<MPI_Request>& requests, const std::string& what, double waited) {
        if (rank_ != 0) {
            abort(fmt::format("'{}' did not complete within {:.0f} s: another rank died or hangs (rank 0 reports "
                              "which ranks did not arrive, unless rank 0 itself is the one)",
                              what, portable(waited)));
        }
        std::string missing;
        for (int source = 1; source < size_; ++source) {
            if (requests[static_cast<size_t>(source - 1)] != MPI_REQUEST_NULL) {
                missing += (missing.empty() ? "" : ", ") + std::to_string(source);
            }
        }
        if (missing.empty()) {
            const std::string silent = silent_ranks();
            if (!silent.empty()) {
                abort(fmt::format("rank(s) {} stopped responding in '{}': every rank arrived, the operation did not "
                                  "complete within {:.0f} s, and rank(s) {} did not answer a ping within {:.0f} s (dead or "
                                  "hung); ending the job",
                                  silent, what, portable(waited), silent, portable(kPingReplySeconds)));
            }
            abort(fmt::format("'{}' did not complete within {:.0f} s although every rank arrived and answers: the "
                              "network between the ranks failed during the operation",
                              what, portable(waited)));
        }
        abort(fmt::format("rank(s) {} did not arrive at '{}' within {:.0f} s (dead or hung); ending the job", missing,
                          what, portable(waited)));
    }

    double timeout_;
    int rank_ = 0, size_ = 1, local_size_ = 1;
    MPI_Comm notes_ = MPI_COMM_NULL;
    MPI_Comm pings_ = MPI_COMM_NULL;
    MPI_Request ping_ = MPI_REQUEST_NULL;  // ranks other than 0: the ping from rank 0, posted at the start
    int ping_value_ = 0;
    std::vector<int> ping_answers_;  // rank 0: where the answers land (they may outlive silent_ranks())
    std::vector<int> note_values_;
    uint64_t operations_ = 0;
    MPI_Op add_bf16_ = MPI_OP_NULL;  // sums of bf16 values carried as MPI_UINT16_T
    Clock::time_point last_progress_;
    std::string open_what_;                    // the group of sums open_sums opened, until wait_sums
    std::vector<MPI_Request> open_requests_;   // its arrival notes (see arrive()), then its sums
};

}  // namespace

std::unique_ptr<Communicator> connect_mpi(double timeout_seconds) {
    return std::make_unique<MpiCommunicator>(timeout_seconds);
}

}  // namespace hnas::distributed
