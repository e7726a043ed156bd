// The per-instruction profile (ExecOptions::instr_times, Session with StepLoopOptions::profile,
// `heddle run --profile`): every timed instruction lands in one row of its label, the rows count
// the program's instructions, and the timed steps are the ones after the first.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/InstrProfile.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/Session.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

struct Step {
  Graph g;
  std::vector<ParamUpdate> updates;
  std::vector<DeviceProgram> programs;
};

// gpt-tiny's training step lowered for `strategy` on `devices` devices.
Step training_step(const char* strategy, int64_t devices) {
  zoo::ZooOverrides over;
  over.layers = 1;
  over.batch = 4;
  auto model = zoo::build_zoo_model("gpt-tiny", over, {.with_loss = true});
  EXPECT_TRUE(model.ok());
  auto step = build_train_step(*model, {});
  EXPECT_TRUE(step.ok());
  Step s{std::move(step->graph), std::move(step->updates), {}};
  auto spec = StrategySpec::parse(strategy);
  auto plan = plan_from_strategy(s.g, *spec->mesh(devices), *spec);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  auto programs = lower(s.g, plan->plan);
  EXPECT_TRUE(programs.ok());
  s.programs = *programs;
  return s;
}

TensorMap feeds_of(const Graph& g) {
  std::vector<Tensor> inputs = random_inputs(g, 1, 64);
  TensorMap feeds;
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
  for (ValueId p : g.params()) feeds.emplace(p, init_param(g.value(p).name, g.type(p), 0));
  return feeds;
}

TEST(InstrProfile, RowsCountEveryInstructionOnceAndTimeTheStepsAfterTheFirst) {
  for (const auto& [strategy, devices] : {std::pair{"dp=1", 1}, std::pair{"dp=2", 2}}) {
    SCOPED_TRACE(strategy);
    Step s = training_step(strategy, devices);
    Session session(s.g, s.updates, s.programs);
    StepLoopOptions loop;
    loop.steps = 4;
    loop.train = true;
    loop.profile = true;
    auto r = session.run(feeds_of(s.g), loop);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(session.instr_times().size(), static_cast<size_t>(devices));
    for (int64_t d = 0; d < devices; ++d) {
      const InstrTimes& t = session.instr_times()[static_cast<size_t>(d)];
      const DeviceProgram& p = s.programs[static_cast<size_t>(d)];
      EXPECT_EQ(t.runs, 3);  // steps 2..4
      ASSERT_EQ(t.seconds.size(), p.instrs.size());
      // Rows per label: the program's instructions of that label, frees left out.
      std::map<std::string, int64_t> want;
      for (const Instr& in : p.instrs)
        if (in.kind != Instr::Kind::kFree) ++want[instr_label(s.g, in)];
      std::vector<ProfileRow> rows = profile_rows(s.g, p, t);
      std::map<std::string, int64_t> got;
      double total = 0, share = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        got[rows[i].label] += rows[i].calls;
        EXPECT_GE(rows[i].seconds, 0.0);
        if (i > 0) {
          EXPECT_LE(rows[i].seconds, rows[i - 1].seconds);  // slowest first
        }
        total += rows[i].seconds;
        share += rows[i].share;
      }
      EXPECT_EQ(got, want);
      EXPECT_NEAR(share, 1.0, 1e-9);
      // The timed instructions are within the timed steps (per step on average).
      const double steps = std::accumulate(r->step_times_s.begin() + 1, r->step_times_s.end(), 0.0);
      EXPECT_GT(total, 0.0);
      EXPECT_LE(total, steps / 3 * 1.0001);
      // What the step runs is named: its products, and with dp=2 the gradients' all-reduces.
      EXPECT_TRUE(got.count("adamw"));
      EXPECT_TRUE(std::any_of(got.begin(), got.end(),
                              [](const auto& kv) { return kv.first.rfind("einsum \"", 0) == 0; }));
      EXPECT_EQ(got.count("all-reduce") > 0, devices == 2);
    }
  }
}

TEST(InstrProfile, AOneStepRunTimesItsStepAndAnUnprofiledRunNothing) {
  Step s = training_step("dp=1", 1);
  for (bool profile : {false, true}) {
    Session session(s.g, s.updates, s.programs);
    StepLoopOptions loop;
    loop.train = true;
    loop.profile = profile;
    ASSERT_TRUE(session.run(feeds_of(s.g), loop).ok());
    if (!profile) {
      EXPECT_TRUE(session.instr_times().empty());
      continue;
    }
    ASSERT_EQ(session.instr_times().size(), 1u);
    EXPECT_EQ(session.instr_times()[0].runs, 1);
  }
}

TEST(InstrProfile, LabelsNameTheKernelAndItsShape) {
  Step s = training_step("dp=1", 1);
  std::set<std::string> labels;
  for (const Instr& in : s.programs[0].instrs) labels.insert(instr_label(s.g, in));
  EXPECT_TRUE(labels.count("load"));
  EXPECT_TRUE(labels.count("free"));
  EXPECT_TRUE(labels.count("norm_grad layernorm")) << "the gradient's function";
  EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](const std::string& l) {
    return l.rfind("fused einsum \"", 0) == 0;  // a product with its epilogue
  }));
  // Windows: a convolution's taps from its weight, attributes other than the defaults.
  Graph g("conv");
  Ops ops(g);
  ValueId x = ops.param("x", TensorType(DType::kF32, IVec{2, 8, 9, 9}));
  ValueId w = ops.param("w", TensorType(DType::kF32, IVec{8, 2, 3, 5}));
  ValueId y =
      ops.conv2d(x, w, {.stride = {2, 2}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 4});
  ops.output(ops.maxpool2d(y, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {0, 0}}));
  ASSERT_TRUE(ops.status().ok());
  auto grads = build_gradients(g, ops.reduce(OpKind::kReduceSum, g.outputs()[0], {0, 1, 2, 3}));
  ASSERT_TRUE(grads.ok()) << grads.error().to_string();
  std::set<std::string> kernels;
  for (OpId id = 0; id < grads->graph.num_ops(); ++id) {
    Instr in;
    in.kind = Instr::Kind::kKernel;
    in.calls.push_back({id, grads->graph.op(id).space.box()});
    kernels.insert(instr_label(grads->graph, in));
  }
  for (const char* want :
       {"conv2d 3x5 stride [2, 2] groups 4", "conv2d_grad_weight 3x5 stride [2, 2] groups 4",
        "conv2d_grad_input 3x5 stride [2, 2] groups 4", "maxpool2d kernel [2, 2] stride [2, 2]",
        "pool2d_grad kernel [2, 2] stride [2, 2] max"})
    EXPECT_TRUE(kernels.count(want)) << want;
}

}  // namespace
}  // namespace heddle
