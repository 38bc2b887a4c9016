// The processes a training run is spread over, as the trainer sees them: a rank among `size` ranks,
// sums over all ranks, a broadcast from rank 0 and a way to end the whole job. Two implementations:
// the single process (every operation is the identity; what `hnas train` runs without mpirun) and MPI
// (mpi_communicator.cpp, compiled only when CMake found MPI: -DHNAS_MPI=ON).
//
// Failures. MPI has no timeouts, so the MPI implementation starts every operation non-blocking and
// polls it against a deadline: a rank that hangs (or whose host vanished) makes the others abort the
// job with a message naming the operation and — on rank 0, which hears an arrival note from every
// rank at each operation — the ranks that never arrived. A rank that dies is seen by mpirun itself,
// which ends the job naming it. An error (exception) on one rank must end the job too: call abort().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hnas::distributed {

class Communicator {
public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Ranks of this job on this host (they share its cores).
    virtual int local_size() const = 0;

    // Element-wise sums over all ranks, in place; every rank receives the sums. `what` names the
    // operation in timeout messages ("step 12: loss").
    virtual void sum(std::span<double> values, const std::string& what) = 0;

    // Sums started one buffer at a time while the caller goes on computing (gradient buckets during
    // the backward pass), each its own operation: open_sums names the group in timeout messages,
    // start_sum starts one buffer's sum (every rank starts the same buffers in the same order),
    // progress lets the started sums advance without blocking (MPI moves data only inside its calls),
    // and wait_sums returns when all of them are done. The buffers must live until then.
    virtual void open_sums(const std::string& what) = 0;
    virtual void start_sum(std::span<float> buffer) = 0;
    // bf16 values (kernels::round_to_bf16), each addition done in f32 and rounded: add_bf16.
    virtual void start_sum(std::span<uint16_t> bf16_buffer) = 0;
    virtual void progress() = 0;
    virtual void wait_sums() = 0;
    // Replaces `bytes` on every rank with rank 0's.
    virtual void broadcast(std::string& bytes, const std::string& what) = 0;

    // Ends every rank of the job with exit code 1 after logging `message` (never returns).
    [[noreturn]] virtual void abort(const std::string& message) = 0;
};

// inout[i] = round_to_bf16(in[i] + inout[i]) over bf16 values, the sum of bf16 gradients over ranks.
void add_bf16(const uint16_t* in, uint16_t* inout, int64_t n);

// The MPI world when the environment shows a launch by an MPI launcher (Open MPI's mpirun, MPICH's
// Hydra, or a PMIx launcher such as srun) and hnas was built with MPI, else the single process. MPI is initialized here and finalized when the returned object is destroyed. A rank waits
// at most timeout_seconds in any operation before it aborts the job.
std::unique_ptr<Communicator> connect(double timeout_seconds);

// The single process (for callers that never run distributed, e.g. the library's tests).
std::unique_ptr<Communicator> single_process();

// OpenMP threads each rank should use so that the ranks on this host never oversubscribe its cores:
// `requested` (0: as many as fit) capped at the cores this process may run on (its CPU affinity, which
// mpirun narrows when it binds ranks) and at the host's cores divided by `local_ranks`; at least 1.
int threads_per_rank(int requested, int local_ranks);

}  // namespace hnas::distributed
