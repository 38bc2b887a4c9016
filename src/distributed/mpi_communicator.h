// The MPI communicator (see communicator.h); this header and mpi_communicator.cpp exist in a build only
// with HNAS_MPI.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace hnas::distributed {

// Initializes MPI for use by the calling thread only (MPI_THREAD_FUNNELED: the data-prefetch and
// OpenMP threads never call MPI) and returns MPI_COMM_WORLD; MPI is finalized with the object.
std::unique_ptr<Communicator> connect_mpi(double timeout_seconds);

}  // namespace hnas::distributed
