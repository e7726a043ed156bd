#include "heddle/runtime/MpiEnvironment.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "heddle/support/Assert.h"

namespace heddle {

MpiEnvironment::MpiEnvironment() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  HEDDLE_ASSERT(!initialized) << "MPI initialised twice";
  int provided = 0;
  // Serialized: a device's ring steps make their MPI calls on the executor's exchange thread.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
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

namespace {

const char* first_set(std::initializer_list<const char*> vars) {
  for (const char* var : vars)
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  return nullptr;
}

}  // namespace

int64_t MpiEnvironment::launcher_size() {
  const char* v = first_set({"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"});
  // srun without an MPI plugin exports only its own variables.
  if (v == nullptr && first_set({"SLURM_STEP_ID"}) != nullptr) v = first_set({"SLURM_NTASKS"});
  return v != nullptr ? std::max<int64_t>(1, std::atoll(v)) : 1;
}

bool MpiEnvironment::launched_by_mpi() {
  return first_set({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) != nullptr;
}

std::string MpiEnvironment::host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace heddle
