// All-reduces against a local group-order reduction, then random graphs under random sharding
// plans, executed by MpiCommunicator ranks and compared bit for bit with the threaded executor on
// rank 0: covers every collective and halo layout lowering
// emits (all-gather, reduce-scatter, all-reduce, all-to-all, point-to-point halo fetches), and
// general slices (tests/common/RandomAffine.h); collectives over a pair of ranks in several steps
// (regions predicted from the step before), and a rank out of step.
// Not a gtest binary: MpiExecuteTest.cpp starts it under `mpirun -np 4`. Prints one summary line
// on rank 0; exit 0 only when every case matched and halos and collectives were exercised.
#include <cstdio>
#include <deque>
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

// Member d's values over `region` (any region: its local numbering), from d and the seed.
Tensor member_values(int64_t d, const Box& region, uint64_t seed) {
  std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(d));
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t = Tensor::tile(DType::kF32, region);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
  return t;
}

// One collective over the pair {0, 1} on a [6, 10] tensor: member d's tile and target region.
struct PairCase {
  Collective c;
  Monoid monoid;
  Box tiles[2], outs[2];
};

// Collectives over the pair {0, 1} (ranks 2 and 3 take no part): all-gathers whose tiles are
// row-major runs of the result (received in place) and ones that are not, reduce-scatters, a
// slice (local), two-rank sum and max all-reduces, a batch of all-gathers; in three steps, so from
// the second step on the regions are predicted, and with one position whose layout changes in step
// 2 (on both members). Each result is compared bit for bit with the members' tiles assembled
// locally in group order. Returns the number of mismatches.
int64_t check_pairs(MpiCommunicator& comm) {
  const int64_t r = comm.rank();
  if (r > 1) return 0;
  const std::vector<int64_t> pair{0, 1};
  const Box whole = Box::of_shape(IVec{6, 10});
  const Box rows[2] = {whole.split_part(0, 2, 0), whole.split_part(0, 2, 1)};
  const Box cols[2] = {whole.split_part(1, 2, 0), whole.split_part(1, 2, 1)};
  const Box top(IVec{0, 0}, IVec{4, 10}), rest(IVec{4, 0}, IVec{6, 10});
  int64_t bad = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    comm.set_step(step);
    // Position 0 changes its layout in step 2: rows split 3/3, then 4/2, then 3/3 again.
    const Box* split = step == 2 ? nullptr : rows;
    const Box uneven[2] = {top, rest};
    const std::vector<PairCase> cases = {
        {Collective::kAllGather,
         Monoid::kSum,
         {split ? split[0] : uneven[0], split ? split[1] : uneven[1]},
         {whole, whole}},
        {Collective::kAllGather, Monoid::kSum, {cols[0], cols[1]}, {whole, whole}},
        {Collective::kReduceScatter, Monoid::kSum, {whole, whole}, {rows[0], rows[1]}},
        {Collective::kReduceScatter, Monoid::kSum, {whole, whole}, {cols[0], cols[1]}},
        {Collective::kSlice, Monoid::kSum, {whole, whole}, {cols[0], cols[1]}},
        {Collective::kAllReduce, Monoid::kSum, {whole, whole}, {whole, whole}},
        {Collective::kAllReduce, Monoid::kMax, {whole, whole}, {whole, whole}},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      const PairCase& k = cases[i];
      const uint64_t seed = static_cast<uint64_t>(step * 100) + i;
      // A slice's tiles are replicas: the same values on both members.
      auto values = [&](int64_t d) {
        return member_values(k.c == Collective::kSlice ? 0 : d, k.tiles[d], seed);
      };
      Tensor mine = values(r);
      Tensor out = Tensor::tile(DType::kF32, k.outs[r]);
      if (!comm.collective(k.c, pair, mine, out, k.monoid).ok()) return bad + 1;
      Tensor want = Tensor::tile(DType::kF32, k.outs[r]);
      const bool reduce = k.c == Collective::kAllReduce || k.c == Collective::kReduceScatter;
      for (int64_t d = 0; d < 2; ++d) {
        if (reduce && d > 0)
          kernels::combine(k.monoid, want, values(d));
        else
          want.copy_from(values(d));
      }
      if (!(want == out)) {
        ++bad;
        std::fprintf(stderr, "rank %lld: pair case %zu of step %lld differs\n",
                     static_cast<long long>(r), i, static_cast<long long>(step));
      }
    }
    // A batch of all-gathers (one packed exchange), and in step 3 one whose last call's target
    // misses a peer's tile (so the batch goes call by call).
    std::vector<PairCase> gathers = {
        {Collective::kAllGather,
         Monoid::kSum,
         {split ? split[0] : uneven[0], split ? split[1] : uneven[1]},
         {whole, whole}},
        {Collective::kAllGather, Monoid::kSum, {cols[0], cols[1]}, {whole, whole}},
        {Collective::kAllGather, Monoid::kSum, {rows[0], rows[1]}, {whole, whole}},
    };
    if (step == 3)
      gathers.push_back(
          {Collective::kAllGather, Monoid::kSum, {cols[0], cols[1]}, {cols[0], cols[0]}});
    std::deque<Tensor> keep;
    std::vector<CollectiveCall> calls;
    for (size_t i = 0; i < gathers.size(); ++i) {
      const PairCase& k = gathers[i];
      Tensor& mine = keep.emplace_back(member_values(r, k.tiles[r], step * 1000 + i));
      Tensor& out = keep.emplace_back(Tensor::tile(DType::kF32, k.outs[r]));
      calls.push_back({k.c, &pair, &mine, &out, k.monoid});
    }
    if (!comm.collectives(calls).ok()) return bad + 1;
    for (size_t i = 0; i < gathers.size(); ++i) {
      Tensor want = Tensor::tile(DType::kF32, gathers[i].outs[r]);
      for (int64_t d = 0; d < 2; ++d)
        want.copy_from(member_values(d, gathers[i].tiles[d], step * 1000 + i));
      if (!(want == *calls[i].out)) {
        ++bad;
        std::fprintf(stderr, "rank %lld: batched all-gather %zu of step %lld differs\n",
                     static_cast<long long>(r), i, static_cast<long long>(step));
      }
    }
  }
  comm.set_step(0);
  return bad;
}

// Rank 1 runs a collective with other regions than in the step before at the same position
// while rank 0 does not: rank 0, which sent its data along the predicted regions, says the
// devices are out of step. Leaves rank 0's communicator failed, so it comes last. Returns
// whether rank 0 said so (true on the other ranks).
bool check_out_of_step(MpiCommunicator& comm) {
  const int64_t r = comm.rank();
  if (r > 1) return true;
  const std::vector<int64_t> pair{0, 1};
  const Box whole = Box::of_shape(IVec{6, 10});
  Status last;
  for (int64_t step = 10; step <= 11; ++step) {
    comm.set_step(step);
    // Rank 1's tile moves up a row in step 11 (the same size, so the transfer itself matches).
    Box tile = whole.split_part(0, 2, r);
    if (r == 1 && step == 11) tile = Box(IVec{2, 0}, IVec{5, 10});
    Tensor mine = member_values(r, tile, 7);
    Tensor out = Tensor::tile(DType::kF32, whole);
    last = comm.collective(Collective::kAllGather, pair, mine, out, Monoid::kSum);
  }
  if (r == 1) return true;
  if (last.ok()) return false;
  return last.error().message.find("out of step") != std::string::npos;
}

int run(MpiCommunicator& comm) {
  if (int64_t bad = check_all_reduce(comm); bad > 0) {
    std::fprintf(stderr, "rank %lld: %lld all-reduce mismatches\n",
                 static_cast<long long>(comm.rank()), static_cast<long long>(bad));
    return 1;
  }
  if (int64_t bad = check_pairs(comm); bad > 0) {
    std::fprintf(stderr, "rank %lld: %lld pair mismatches\n", static_cast<long long>(comm.rank()),
                 static_cast<long long>(bad));
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
  if (!check_out_of_step(comm)) {
    std::fprintf(stderr, "rank 0 did not notice rank 1 out of step\n");
    return 1;
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
