// Resharding: shortest paths between placements, and every pair of placements on 1-D and 2-D
// meshes executed on integer data by a small reference model of the collectives.
#include <gtest/gtest.h>

#include <map>

#include "heddle/sharding/Reshard.h"

namespace heddle {
namespace {

Mesh mesh(const char* text) { return *Mesh::parse(text); }

TEST(Reshard, ClassicTransitions) {
  BytesMovedCost cost;
  TensorType t(DType::kF32, IVec{8, 8});
  Mesh m = mesh("4");
  auto S = [](int64_t d) { return TensorSharding({Placement::shard(d)}); };
  TensorSharding R({Placement::replicate()}), P({Placement::partial(Monoid::kSum)});
  EXPECT_EQ(plan_reshard(t, m, S(0), R, cost)->to_string(m),
            "all-gather(x): [Shard(0)] -> [Replicate]");
  EXPECT_EQ(plan_reshard(t, m, P, R, cost)->to_string(m),
            "all-reduce(x): [Partial(sum)] -> [Replicate]");
  EXPECT_EQ(plan_reshard(t, m, P, S(1), cost)->to_string(m),
            "reduce-scatter(x): [Partial(sum)] -> [Shard(1)]");
  EXPECT_EQ(plan_reshard(t, m, R, S(1), cost)->to_string(m), "slice(x): [Replicate] -> [Shard(1)]");
  EXPECT_EQ(plan_reshard(t, m, S(0), S(1), cost)->to_string(m),
            "all-to-all(x): [Shard(0)] -> [Shard(1)]");
  EXPECT_EQ(plan_reshard(t, m, S(0), S(0), cost)->steps.size(), 0u);
  // Bytes moved per device follow the ring formulas: all-gather (n-1)/n of 256 bytes.
  EXPECT_DOUBLE_EQ(plan_reshard(t, m, S(0), R, cost)->cost, 0.75 * 256);
  EXPECT_DOUBLE_EQ(plan_reshard(t, m, P, R, cost)->cost, 2 * 0.75 * 256);
  // Reduce-scatter beats all-reduce followed by a slice.
  EXPECT_LT(plan_reshard(t, m, P, S(1), cost)->cost, plan_reshard(t, m, P, R, cost)->cost);
}

TEST(Reshard, MinorAxisFirstOnSharedDims) {
  BytesMovedCost cost;
  TensorType t(DType::kF32, IVec{8, 8});
  Mesh m = mesh("2x2");
  TensorSharding from({Placement::shard(0), Placement::shard(0)});
  TensorSharding to({Placement::replicate(), Placement::shard(0)});
  ReshardPlan p = *plan_reshard(t, m, from, to, cost);
  // Axis x cannot let go of dim 0 while y (minor) still cuts it, so y moves first; moving y's
  // cut to dim 1 and back (all-to-all) is cheaper than gathering and re-slicing.
  ASSERT_EQ(p.steps.size(), 3u) << p.to_string(m);
  EXPECT_EQ(p.steps[0].axis, 1);
  EXPECT_EQ(p.to_string(m),
            "all-to-all(y): [Shard(0), Shard(0)] -> [Shard(0), Shard(1)]; all-gather(x): "
            "[Shard(0), Shard(1)] -> [Replicate, Shard(1)]; all-to-all(y): [Replicate, Shard(1)] "
            "-> [Replicate, Shard(0)]");
  EXPECT_DOUBLE_EQ(p.cost, 0.5 * 64 + 0.5 * 128 + 0.5 * 128);
  // 3 rows on 2 devices: uneven blocks [0:2] and [2:3], a local slice.
  EXPECT_TRUE(
      plan_reshard(TensorType(DType::kF32, IVec{3, 8}), m, TensorSharding::replicated(2), to, cost)
          .ok());
  // 10 rows cut 2 x 3: blocks of 5 on x but of 2 on both, which x's blocks do not nest.
  TensorSharding both({Placement::shard(0), Placement::shard(0)});
  auto bad = plan_reshard(TensorType(DType::kF32, IVec{10, 8}), mesh("a=2,b=3"),
                          TensorSharding::replicated(2), both, cost);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "no resharding of f32[10, 8] on mesh a=2,b=3 from [Replicate, Replicate] to "
            "[Shard(0), Shard(0)]: a tensor dim cut by several axes has blocks that do not nest");
}

// A reference model of the collectives on integer data: each device holds a box of the tensor
// (or of a partial contribution) as a dense buffer. Collectives combine the buffers of a group.
struct Local {
  Box box;
  std::vector<int64_t> data;  // row-major over box
};

int64_t at(const Local& l, const IVec& p) {
  int64_t flat = 0;
  for (int64_t d = 0; d < l.box.rank(); ++d)
    flat = flat * l.box.shape()[d] + (p[d] - l.box.start()[d]);
  return l.data[static_cast<size_t>(flat)];
}

std::vector<IVec> points(const Box& b) {
  std::vector<IVec> out;
  if (b.empty()) return out;
  std::vector<int64_t> p(b.start().values());
  while (true) {
    out.emplace_back(p);
    int64_t d = b.rank() - 1;
    while (d >= 0 && ++p[d] == b.end()[d]) p[d] = b.start()[d], --d;
    if (d < 0) return out;
  }
}

Local make(const Box& box, const std::function<int64_t(const IVec&)>& f) {
  Local l{box, {}};
  for (const auto& p : points(box)) l.data.push_back(f(p));
  return l;
}

int64_t global_value(const IVec& p) {
  int64_t v = 7;
  for (int64_t x : p.values()) v = v * 31 + x;
  return v;
}

// Initial buffers for `s`: Partial(sum) axes hold contributions that sum to the global value.
std::vector<Local> distribute(const IVec& shape, const Mesh& m, const TensorSharding& s) {
  std::vector<Local> out;
  for (int64_t dev = 0; dev < m.num_devices(); ++dev) {
    IVec c = m.coords(dev);
    out.push_back(make(s.local_box(shape, m, dev), [&](const IVec& p) {
      int64_t v = global_value(p);
      for (int64_t a = 0; a < m.rank(); ++a) {
        if (!s.at(a).is_partial()) continue;
        // Coordinate 0 keeps v - (n-1)*k, the others k: the sum over the axis is v.
        int64_t k = 1000 + p.sum() + a;
        v = c[a] == 0 ? v - (m.size(a) - 1) * k : k;
      }
      return v;
    }));
  }
  return out;
}

std::vector<Local> apply(const ReshardStep& step, const IVec& shape, const Mesh& m,
                         const std::vector<Local>& in) {
  std::vector<Local> out(in.size());
  for (int64_t dev = 0; dev < m.num_devices(); ++dev) {
    std::vector<int64_t> group = m.group(step.axis, dev);
    Box target = step.to.local_box(shape, m, dev);
    auto from_group = [&](const IVec& p, bool sum) {
      int64_t acc = 0;
      for (int64_t g : group) {
        const Local& l = in[static_cast<size_t>(g)];
        if (!l.box.contains(p)) continue;
        if (!sum) return at(l, p);
        acc += at(l, p);
      }
      EXPECT_TRUE(sum) << "no device of the group holds " << p.to_string();
      return acc;
    };
    switch (step.op) {
      case Collective::kAllGather:
      case Collective::kAllToAll:
        out[dev] = make(target, [&](const IVec& p) { return from_group(p, false); });
        break;
      case Collective::kAllReduce:
      case Collective::kReduceScatter:
        out[dev] = make(target, [&](const IVec& p) { return from_group(p, true); });
        break;
      case Collective::kSlice:
        EXPECT_TRUE(in[dev].box.contains(target));
        out[dev] = make(target, [&](const IVec& p) { return at(in[dev], p); });
        break;
      default:
        ADD_FAILURE() << "unexpected step";
    }
  }
  return out;
}

std::vector<TensorSharding> all_shardings(const Mesh& m, int64_t rank, bool partial) {
  std::vector<Placement> choices = {Placement::replicate()};
  for (int64_t d = 0; d < rank; ++d) choices.push_back(Placement::shard(d));
  if (partial) choices.push_back(Placement::partial(Monoid::kSum));
  std::vector<TensorSharding> out = {TensorSharding(std::vector<Placement>{})};
  for (int64_t a = 0; a < m.rank(); ++a) {
    std::vector<TensorSharding> next;
    for (const auto& s : out)
      for (const auto& p : choices) {
        auto v = s.placements();
        v.push_back(p);
        next.emplace_back(v);
      }
    out = next;
  }
  return out;
}

TEST(Reshard, EveryPairRoundTripsTheDataExactly) {
  BytesMovedCost cost;
  IVec shape{8, 4};
  TensorType t(DType::kF32, shape);
  int64_t pairs = 0;
  for (const char* ms : {"2", "4", "2x2", "2x4"}) {
    Mesh m = mesh(ms);
    for (const auto& from : all_shardings(m, 2, true))
      for (const auto& to : all_shardings(m, 2, false)) {
        auto planned = plan_reshard(t, m, from, to, cost);
        bool divisible = true;
        for (int64_t d = 0; d < 2; ++d)
          divisible &=
              shape[d] % to.shards_of_dim(d, m) == 0 && shape[d] % from.shards_of_dim(d, m) == 0;
        ASSERT_EQ(planned.ok(), divisible) << from.to_string() << " -> " << to.to_string();
        if (!planned.ok()) continue;
        const ReshardPlan& plan = *planned;
        std::vector<Local> data = distribute(shape, m, from);
        TensorSharding cur = from;
        for (const auto& step : plan.steps) {
          ASSERT_EQ(step.from, cur);
          data = apply(step, shape, m, data);
          cur = step.to;
        }
        ASSERT_EQ(cur, to);
        for (int64_t dev = 0; dev < m.num_devices(); ++dev) {
          const Local& l = data[static_cast<size_t>(dev)];
          ASSERT_EQ(l.box, to.local_box(shape, m, dev));
          for (const auto& p : points(l.box))
            ASSERT_EQ(at(l, p), global_value(p))
                << ms << " " << from.to_string() << " -> " << to.to_string() << " via "
                << plan.to_string(m) << " at " << p.to_string();
        }
        ++pairs;
      }
  }
  EXPECT_GE(pairs, 280);  // 312 pairs, less the targets and sources 2x4 cannot divide
}

}  // namespace
}  // namespace heddle
