// All-reduces against a local group-order reduction, then random graphs under random sharding
// plans, executed by MpiCommunicator ranks and compared bit for bit with the threaded executor on
// rank 0: covers every collective and halo layout lowering
// emits (all-gather, reduce-scatter, all-reduce, all-to-all, point-to-point halo fetches), and
// general slices (tests/common/RandomAffine.h).
// Not a gtest binary: MpiExecuteTest.cpp starts it under `mpirun -np 4`. Prints one summary line
// on rank 0; exit 0 only when every case matched and halos and collectives were exercised.
#include <cstdio>
#include <random>

#include "common/RandomAffine.h"
#include "common/RandomFeeds.h"
#include "common/RandomModel.h"
#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/sharding/OpStrategy.h"

namespace heddle {
namespace {

using testing::random_feeds;

// Member d's tile of a [7, 5] all-reduce: values only d and the seed determine.
Tensor member_tile(int64_t d, uint64_t seed) {
  std::mt19937_64 rng(seed * 31 + static_cast<uint64_t>(d));
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t(DType::kF32, IVec{7, 5});
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
  return t;
}

// All-reduce over the world and over pairs, sum and max: bit-identical to combining the members'
// tiles in group order in one place. Returns the number of mismatching cases.
int64_t check_all_reduce(MpiCommunicator& comm) {
  int64_t bad = 0;
  const int64_t r = comm.rank();
  const std::vector<std::vector<int64_t>> groups = {{0, 1, 2, 3}, {r % 2, r % 2 + 2}};
  for (const auto& group : groups)
    for (Monoid m : {Monoid::kSum, Monoid::kMax})
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        Tensor mine = member_tile(r, seed);
        Tensor out(DType::kF32, IVec{7, 5});
        if (!comm.collective(Collective::kAllReduce, group, mine, out, m).ok()) return 1;
        Tensor want = member_tile(group[0], seed);
        for (size_t k = 1; k < group.size(); ++k)
          kernels::combine(m, want, member_tile(group[k], seed));
        if (!(want == out)) ++bad;
      }
  return bad;
}

int run(MpiCommunicator& comm) {
  if (int64_t bad = check_all_reduce(comm); bad > 0) {
    std::fprintf(stderr, "rank %lld: %lld all-reduce mismatches\n",
                 static_cast<long long>(comm.rank()), static_cast<long long>(bad));
    return 1;
  }
  const char* meshes[] = {"4", "2x2"};
  std::mt19937_64 rng(2026);  // the same plans on every rank
  int64_t cases = 0, mismatches = 0, collectives = 0, fetches = 0;
  // Seeds above 40: graphs reading through random affine projections (general slicing: sums,
  // reversals, strides, extents 4 does not divide).
  for (uint64_t seed = 1; seed <= 70; ++seed) {
    Graph g = seed <= 40 ? testing::random_model(8, seed) : testing::random_affine_graph(seed);
    TensorMap feeds = random_feeds(g, seed);
    for (int rep = 0; rep < 3; ++rep) {
      Mesh mesh = *Mesh::parse(meshes[rng() % 2]);
      ShardingPlan plan = ShardingPlan::replicated(g, mesh);
      for (OpId i = 0; i < g.num_ops(); ++i) {
        auto all = enumerate_strategies(g, i, mesh);
        plan.ops[i] = all[rng() % all.size()];
      }
      auto progs = lower(g, plan);
      if (!progs.ok()) {
        std::fprintf(stderr, "lower: %s\n", progs.error().to_string().c_str());
        return 2;
      }
      ProgramStats st = program_stats(g, *progs);
      collectives += st.collectives;
      fetches += st.fetches;
      auto got = run_device(g, (*progs)[comm.rank()], comm, feeds);
      if (!got.ok()) {
        std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(comm.rank()),
                     got.error().to_string().c_str());
        comm.abort_job(got.error().message);
      }
      ++cases;
      if (comm.rank() != 0) continue;
      auto want = run_threaded(g, *progs, feeds);
      if (!want.ok()) return 2;
      for (ValueId v : g.outputs())
        if (!(want->at(v) == got->at(v))) {
          ++mismatches;
          std::fprintf(stderr, "mismatch: seed %llu mesh %s output %s\n",
                       static_cast<unsigned long long>(seed), mesh.to_string().c_str(),
                       g.value(v).name.c_str());
        }
    }
  }
  if (comm.rank() != 0) return 0;
  std::printf("cases %lld, mismatches %lld, collectives %lld, fetches %lld\n",
              static_cast<long long>(cases), static_cast<long long>(mismatches),
              static_cast<long long>(collectives), static_cast<long long>(fetches));
  return mismatches == 0 && collectives > 100 && fetches > 5 ? 0 : 1;
}

}  // namespace
}  // namespace heddle

int main() {
  heddle::MpiEnvironment env;
  heddle::MpiCommunicator comm({.timeout_s = 30});
  return heddle::run(comm);
}
