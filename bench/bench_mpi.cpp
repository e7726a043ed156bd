// MPI collective latency and bandwidth through MpiCommunicator (the path `heddle run --backend
// mpi` takes): all-gather and all-reduce over all ranks, tensors of 8 B to 16 MiB; and the
// point-to-point messages pipeline stages exchange (ranks 0 and 1, ping-pong). Run under
// mpirun, e.g. `mpirun -np 4 build/bench/bench_mpi` (docs/benchmarks.md, "MPI backend").
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <numeric>

#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/MpiEnvironment.h"

namespace heddle {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of collective `c` on a tensor of `elems` floats (all-gather: each rank holds
// 1/n of it; all-reduce: each holds all of it), the mean of enough back-to-back calls.
double time_collective(MpiCommunicator& comm, Collective c, int64_t elems) {
  const int64_t n = comm.size(), r = comm.rank();
  std::vector<int64_t> group(static_cast<size_t>(n));
  std::iota(group.begin(), group.end(), 0);
  Box whole = Box::of_shape(IVec{elems});
  Box part = c == Collective::kAllGather ? whole.split_part(0, n, r) : whole;
  Tensor mine = Tensor::tile(DType::kF32, part);
  mine.fill(1.0);
  Tensor out = Tensor::tile(DType::kF32, whole);
  auto once = [&] {
    auto st = comm.collective(c, group, mine, out, Monoid::kSum);
    if (!st.ok()) {
      std::fprintf(stderr, "bench_mpi: %s\n", st.error().message.c_str());
      comm.abort_job(st.error().message);
    }
  };
  for (int i = 0; i < 3; ++i) once();
  int64_t reps = std::max<int64_t>(5, std::min<int64_t>(2000, (int64_t{64} << 20) / (elems * 4)));
  (void)comm.agree_on_failure(true);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < reps; ++i) once();
  (void)comm.agree_on_failure(true);
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(reps);
}

// The same as MPI's own blocking collective on MPI_COMM_WORLD (no regions, no fixed reduction
// order): the baseline MpiCommunicator's layer is measured against.
double time_raw(Collective c, int64_t elems, int64_t n) {
  std::vector<float> mine(static_cast<size_t>(c == Collective::kAllGather ? elems / n : elems),
                          1.0f);
  std::vector<float> out(static_cast<size_t>(elems));
  auto once = [&] {
    if (c == Collective::kAllGather)
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, out.data(),
                    static_cast<int>(mine.size()), MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Allreduce(mine.data(), out.data(), static_cast<int>(elems), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
  };
  for (int i = 0; i < 3; ++i) once();
  int64_t reps = std::max<int64_t>(5, std::min<int64_t>(2000, (int64_t{64} << 20) / (elems * 4)));
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < reps; ++i) once();
  MPI_Barrier(MPI_COMM_WORLD);
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(reps);
}

// Seconds per one-way message of `elems` floats between ranks 0 and 1 through
// MpiCommunicator::send/recv (half a round trip), the mean of enough round trips.
double time_p2p(MpiCommunicator& comm, int64_t elems) {
  const int64_t r = comm.rank();
  Tensor msg(DType::kF32, IVec{elems});
  msg.fill(1.0);
  auto check = [&](const Status& st) {
    if (!st.ok()) comm.abort_job(st.error().message);
  };
  auto round_trip = [&] {
    if (r == 0) {
      check(comm.send(1, 5, msg));
      check(comm.recv(1, 6, msg));
    } else if (r == 1) {
      check(comm.recv(0, 5, msg));
      check(comm.send(0, 6, msg));
    }
  };
  for (int i = 0; i < 3; ++i) round_trip();
  int64_t reps = std::max<int64_t>(5, std::min<int64_t>(2000, (int64_t{64} << 20) / (elems * 4)));
  (void)comm.agree_on_failure(true);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < reps; ++i) round_trip();
  double t = std::chrono::duration<double>(Clock::now() - t0).count();
  check(comm.flush_sends());
  (void)comm.agree_on_failure(true);
  return t / static_cast<double>(reps) / 2;
}

std::string human_bytes(double b) {
  if (b >= 1 << 20) return fmt::format("{:g} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:g} KiB", b / (1 << 10));
  return fmt::format("{:g} B", b);
}

}  // namespace
}  // namespace heddle

int main() {
  using namespace heddle;
  MpiEnvironment env;
  {
    MpiCommunicator comm;
    const bool root = comm.rank() == 0;
    if (root) {
      fmt::print(
          "{} ranks; tensor size S; all-gather: each rank holds S/{}; all-reduce: each "
          "holds S\n",
          comm.size(), comm.size());
      fmt::print(
          "| S | all-gather | S/time | MPI_Allgather | all-reduce | S/time | MPI_Allreduce "
          "|\n|---|---|---|---|---|---|---|\n");
    }
    for (int64_t bytes :
         {int64_t{8} * comm.size(), int64_t{1} << 10, int64_t{16} << 10, int64_t{256} << 10,
          int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}) {
      int64_t elems = bytes / 4;
      double ag = time_collective(comm, Collective::kAllGather, elems);
      double ar = time_collective(comm, Collective::kAllReduce, elems);
      double raw_ag = time_raw(Collective::kAllGather, elems, comm.size());
      double raw_ar = time_raw(Collective::kAllReduce, elems, comm.size());
      if (root)
        fmt::print(
            "| {} | {:.1f} us | {:.2f} GB/s | {:.1f} us | {:.1f} us | {:.2f} GB/s | {:.1f} us |\n",
            human_bytes(static_cast<double>(bytes)), ag * 1e6,
            static_cast<double>(bytes) / ag / 1e9, raw_ag * 1e6, ar * 1e6,
            static_cast<double>(bytes) / ar / 1e9, raw_ar * 1e6);
    }
    if (comm.size() >= 2) {
      if (root)
        fmt::print(
            "\npoint to point, rank 0 <-> rank 1 (pipeline stages' send/recv)\n| S | one way | "
            "S/time |\n|---|---|---|\n");
      for (int64_t bytes : {int64_t{8}, int64_t{1} << 10, int64_t{16} << 10, int64_t{256} << 10,
                            int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}) {
        double t = time_p2p(comm, bytes / 4);
        if (root)
          fmt::print("| {} | {:.1f} us | {:.2f} GB/s |\n", human_bytes(static_cast<double>(bytes)),
                     t * 1e6, static_cast<double>(bytes) / t / 1e9);
      }
    }
  }
  return 0;
}
