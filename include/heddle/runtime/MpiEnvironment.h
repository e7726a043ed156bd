// The MPI library's lifetime in a process (MPI_Init_thread ... MPI_Finalize) and the rank a
// launcher announces before MPI starts, so bad input can be reported once, before any messages.
#pragma once

#include <cstdint>
#include <string>

namespace heddle {

/// Initialises MPI on construction and finalises it on destruction. At most one per process;
/// every MpiCommunicator must be destroyed before it.
class MpiEnvironment {
 public:
  MpiEnvironment();
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  /// This process's rank in MPI_COMM_WORLD.
  int64_t rank() const { return rank_; }
  /// Number of ranks in MPI_COMM_WORLD.
  int64_t size() const { return size_; }

  /// The rank the launcher put in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK),
  /// readable before MPI is initialised; 0 when none is set (not started by a launcher).
  static int64_t launcher_rank();
  /// The number of ranks the launcher announced (OMPI_COMM_WORLD_SIZE, PMIX_SIZE, PMI_SIZE,
  /// SLURM_NTASKS under srun); 1 when none is set.
  static int64_t launcher_size();
  /// True when a launcher (mpirun, srun) started this process: one of its rank variables is set.
  static bool launched_by_mpi();
  /// This machine's host name (gethostname), for messages naming where a rank runs.
  static std::string host_name();

 private:
  int64_t rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace heddle
