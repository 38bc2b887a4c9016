// The single-process communicator, the choice between it and MPI, and the per-rank thread budget.
#include "distributed/communicator.h"

#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "backend/kernels.h"
#include "base/check.h"

#ifdef HNAS_MPI
#include "distributed/mpi_communicator.h"
#endif

namespace hnas::distributed {

namespace {

class SingleProcess final : public Communicator {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    int local_size() const override { return 1; }
    void sum(std::span<double>, const std::string&) override {}
    void open_sums(const std::string&) override {}
    void start_sum(std::span<float>) override {}
    void start_sum(std::span<uint16_t>) override {}
    void progress() override {}
    void wait_sums() override {}
    void broadcast(std::string&, const std::string&) override {}
    [[noreturn]] void abort(const std::string& message) override {
        spdlog::critical("{}", message);
        std::exit(1);
    }
};

// The world size the launcher announced, 0 when there is none.
int announced_world_size() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
        if (const char* value = std::getenv(name)) return std::atoi(value);
    }
    return 0;
}

bool launched_by_mpi() {
    return announced_world_size() > 0 || std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
}

}  // namespace

void add_bf16(const uint16_t* in, uint16_t* inout, int64_t n) {
    for (int64_t i = 0; i < n; ++i) inout[i] = kernels::round_to_bf16(kernels::bf16_to_float(in[i]) + kernels::bf16_to_float(inout[i]));
}

std::unique_ptr<Communicator> single_process() { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Communicator> connect(double timeout_seconds) {
    if (!launched_by_mpi()) return single_process();
#ifdef HNAS_MPI
    return connect_mpi(timeout_seconds);
#else
    (void)timeout_seconds;
    // Without MPI every rank would train alone, all writing the same run directory.
    HNAS_CHECK(announced_world_size() <= 1, "started by an MPI launcher with ", announced_world_size(),
               " ranks, but this hnas was built without MPI (install libopenmpi-dev and rebuild with -DHNAS_MPI=ON)");
    return single_process();
#endif
}

int threads_per_rank(int requested, int local_ranks) {
    cpu_set_t affinity;
    CPU_ZERO(&affinity);
    const int allowed = sched_getaffinity(0, sizeof affinity, &affinity) == 0 ? CPU_COUNT(&affinity) : 1;
    const int host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int fair_share = std::max(1, host / std::max(1, local_ranks));
    const int limit = std::max(1, std::min(allowed, fair_share));
    return requested > 0 ? std::min(requested, limit) : limit;
}

}  // namespace hnas::distributed
