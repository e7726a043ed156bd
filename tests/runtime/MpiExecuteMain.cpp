// Random graphs under random sharding plans, executed by MpiCommunicator ranks and compared bit
// for bit with the threaded executor on rank 0: covers every collective and halo layout lowering
// emits (all-gather, reduce-scatter, all-reduce, all-to-all, point-to-point halo fetches).
// Not a gtest binary: MpiExecuteTest.cpp starts it under `mpirun -np 4`. Prints one summary line
// on rank 0; exit 0 only when every case matched and halos and collectives were exercised.
#include <cstdio>
#include <random>

#include "common/RandomModel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/sharding/OpStrategy.h"

namespace heddle {
namespace {

TensorMap random_feeds(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  TensorMap feeds;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      Tensor t(g.type(v));
      if (t.is_int()) {
        for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = static_cast<int64_t>(rng() % 3);
      } else {
        for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
      }
      feeds.emplace(v, std::move(t));
    }
  return feeds;
}

int run(MpiCommunicator& comm) {
  const char* meshes[] = {"4", "2x2"};
  std::mt19937_64 rng(2026);  // the same plans on every rank
  int64_t cases = 0, mismatches = 0, collectives = 0, fetches = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Graph g = testing::random_model(8, seed);
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
