#include "heddle/runtime/MpiEnvironment.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "heddle/support/Assert.h"

namespace heddle {

MpiEnvironment::MpiEnvironment() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  HEDDLE_ASSERT(!initialized) << "MPI initialised twice";
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rank_ = r;
  size_ = n;
}

MpiEnvironment::~MpiEnvironment() { MPI_Finalize(); }

int64_t MpiEnvironment::launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoll(v);
  return 0;
}

}  // namespace heddle
