// The runtime session: a plan's programs run for N steps (forward or training, SPMD or pipelined)
// with the reference check, per-step times and losses; the step loop every backend shares; and
// the host-memory figures worked out from the programs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Models.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/PipelineFeeds.h"
#include "heddle/runtime/Session.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

Graph gpt(bool loss, int64_t batch = 4) {
  zoo::ZooOverrides over;
  over.batch = batch;
  over.layers = 2;
  auto g = zoo::build_zoo_model("gpt-tiny", over, {.with_loss = loss});
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return *g;
}

std::vector<DeviceProgram> lowered(const Graph& g, const char* strategy, int64_t devices) {
  auto spec = StrategySpec::parse(strategy);
  auto mesh = spec->mesh(devices);
  auto plan = plan_from_strategy(g, *mesh, *spec);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  auto programs = lower(g, plan->plan);
  EXPECT_TRUE(programs.ok()) << programs.error().to_string();
  return *programs;
}

// Every parameter (seeded) and input (random; integers below `int_hi`) of `g` by id; `inputs`
// gets the inputs in order.
TensorMap feeds_of(const Graph& g, std::vector<Tensor>& inputs, int64_t int_hi = 64) {
  inputs = random_inputs(g, 1, int_hi);
  TensorMap feeds;
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
  for (ValueId p : g.params()) feeds.emplace(p, init_param(g.value(p).name, g.type(p), 0));
  return feeds;
}

StepLoopOptions loop_of(int steps, bool train = false, ReferenceCheck* reference = nullptr) {
  StepLoopOptions o;
  o.steps = steps;
  o.train = train;
  o.reference = reference;
  return o;
}

struct Training {
  Graph g;
  std::vector<ParamUpdate> updates;
};

Training training_step() {
  Training t{gpt(true), {}};
  auto step = build_train_step(t.g, {});
  EXPECT_TRUE(step.ok()) << step.error().to_string();
  t.g = std::move(step->graph);
  t.updates = std::move(step->updates);
  for (const auto& u : t.updates) t.g.add_output(u.grad);  // the reference compares them
  return t;
}

TEST(Session, ForwardStepsRepeatAndMatchOneExecutorRun) {
  Graph g = gpt(false);
  std::vector<Tensor> inputs;
  TensorMap feeds = feeds_of(g, inputs);
  auto programs = lowered(g, "dp=2", 2);
  auto once = run_threaded(g, programs, feeds);
  ASSERT_TRUE(once.ok());
  ReferenceCheck reference(g, {}, feeds, inputs, {});
  Session session(g, {}, programs);
  auto r = session.run(feeds, loop_of(3, false, &reference));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->step_times_s.size(), 3u);
  EXPECT_TRUE(r->losses.empty());
  EXPECT_TRUE(reference.errors().ok);
  EXPECT_GT(reference.errors().reference_time_s, 0);
  ASSERT_EQ(r->outputs.size(), once->size());
  for (const auto& [v, t] : *once) {
    const Tensor& got = r->outputs.at(v);
    ASSERT_EQ(got.numel(), t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(got.f32()[i], t.f32()[i]);
  }
}

TEST(Session, TrainingStepsFollowTheUpdatesAndPassTheCheck) {
  Training t = training_step();
  std::vector<Tensor> inputs;
  TensorMap feeds = feeds_of(t.g, inputs);
  ReferenceCheck reference(t.g, t.updates, feeds, inputs, {.adamw = true});
  Session session(t.g, t.updates, lowered(t.g, "dp=2", 2));
  int seen = 0;
  StepLoopOptions loop = loop_of(4, true, &reference);
  loop.on_step = [&](int s, const TensorMap&) { EXPECT_EQ(s, ++seen); };
  auto r = session.run(feeds, loop);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(seen, 4);
  ASSERT_EQ(r->losses.size(), 4u);
  EXPECT_LT(r->losses.back(), r->losses.front());  // the parameters moved between steps
  EXPECT_TRUE(reference.errors().ok) << reference.errors().max_abs;
  EXPECT_GE(r->wall_time_s(), r->median_step_s());
}

// StepLoopOptions::overlap_ring reaches every device's executor (`heddle run
// --no-ring-overlap`): with it each ring step is posted before the block kernel it overlaps and
// waited for after it; without it the exchange finishes before that kernel starts. The losses and
// parameters are the same bit for bit.
TEST(Session, RingOverlapSwitchReachesTheExecutors) {
  Training t = training_step();
  std::vector<Tensor> inputs;
  const TensorMap feeds = feeds_of(t.g, inputs);
  const auto programs = lowered(t.g, "cp=2,dp=2,cp_comm=ring", 4);
  std::vector<RunResult> runs;
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "blocking");
    std::mutex m;
    std::map<std::thread::id, std::vector<RingEvent::Kind>> events;  // per device thread
    StepLoopOptions loop = loop_of(2, true);
    loop.overlap_ring = overlap;
    loop.on_ring_event = [&](const RingEvent& e) {
      std::lock_guard<std::mutex> lock(m);
      events[std::this_thread::get_id()].push_back(e.kind);
    };
    Session session(t.g, t.updates, programs);
    auto r = session.run(feeds, loop);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(events.size(), 4u);
    using K = RingEvent::Kind;
    for (const auto& [thread, kinds] : events) {
      int64_t posted = 0;
      for (size_t i = 0; i < kinds.size(); ++i) {
        if (kinds[i] != K::kPosted) continue;
        ++posted;
        ASSERT_LT(i + 1, kinds.size());
        EXPECT_EQ(kinds[i + 1], overlap ? K::kKernelBegin : K::kWaited);
      }
      EXPECT_GT(posted, 0);
    }
    runs.push_back(std::move(*r));
  }
  EXPECT_EQ(runs[0].losses, runs[1].losses);
  for (const auto& [v, a] : runs[0].outputs) {
    const Tensor& b = runs[1].outputs.at(v);
    ASSERT_EQ(a.numel(), b.numel());
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.f32()[i], b.f32()[i]);
  }
}

TEST(Session, PipelinedTrainingPassesTheSameCheck) {
  Training t = training_step();
  Graph model = gpt(true, 2);  // the micro-batch model: 2 micro-batches of the batch 4
  PipelineOptions po;
  po.micro_batches = 2;
  po.train = true;
  auto P = build_pipeline(model, po);
  ASSERT_TRUE(P.ok()) << P.error().to_string();
  std::vector<Tensor> inputs;
  TensorMap feeds = feeds_of(t.g, inputs);
  ReferenceCheck reference(t.g, t.updates, feeds, inputs, {.adamw = true});
  Session session(t.g, t.updates, std::move(*P));
  auto r = session.run(feeds, loop_of(2, true, &reference));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->losses.size(), 2u);
  EXPECT_TRUE(reference.errors().ok) << reference.errors().max_abs;
  EXPECT_EQ(session.peak_bytes_per_device().size(), 2u);
}

// The check can fail: a wrong output is a mismatch with its error.
// A forward GPT run on one device: its graph, feeds, inputs and (right) outputs.
struct CheckedRun {
  Graph g = gpt(false);
  std::vector<Tensor> inputs;
  TensorMap feeds = feeds_of(g, inputs);
  Result<TensorMap> right = run_threaded(g, lowered(g, "dp=1", 1), feeds);
};

TEST(ReferenceCheck, FlagsAWrongOutput) {
  CheckedRun run;
  ASSERT_TRUE(run.right.ok());
  const Graph& g = run.g;
  const Result<TensorMap>& right = run.right;
  const std::vector<Tensor>& inputs = run.inputs;
  const TensorMap& feeds = run.feeds;
  TensorMap wrong = *right;
  wrong.at(g.outputs()[0]).f32()[0] += 1.0f;
  ReferenceCheck good(g, {}, feeds, inputs, {}), bad(g, {}, feeds, inputs, {});
  ASSERT_TRUE(good.check_step(1, *right).ok());
  ASSERT_TRUE(bad.check_step(1, wrong).ok());
  EXPECT_TRUE(good.errors().ok);
  EXPECT_FALSE(bad.errors().ok);
  EXPECT_NEAR(bad.errors().max_abs, 1.0, 1e-3);
}

// Relative errors are judged against at least 1% of the tensor's scale: fp32 rounding of the
// size a cancelled element's terms had passes, an error ten times the floor does not.
TEST(ReferenceCheck, JudgesCancelledElementsAgainstTheTensorsScale) {
  CheckedRun run;
  ASSERT_TRUE(run.right.ok());
  const Tensor& out = run.right->at(run.g.outputs()[0]);
  int64_t small = 0;
  float scale = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    scale = std::max(scale, std::fabs(out.f32()[i]));
    if (std::fabs(out.f32()[i]) < std::fabs(out.f32()[small])) small = i;
  }
  ASSERT_LT(std::fabs(out.f32()[small]), 1e-3f * scale);  // an element that cancelled
  auto perturbed = [&](float by) {
    TensorMap got = *run.right;
    got.at(run.g.outputs()[0]).f32()[small] += by * scale;
    ReferenceCheck check(run.g, {}, run.feeds, run.inputs, {.atol = 0});
    EXPECT_TRUE(check.check_step(1, got).ok());
    return check.errors();
  };
  EXPECT_TRUE(perturbed(1e-6f).ok);  // beyond 1e-3 of the element itself
  CheckErrors wrong = perturbed(1e-4f);
  EXPECT_FALSE(wrong.ok);
  EXPECT_NEAR(wrong.max_rel, 1e-2, 2e-3);  // measured against 1% of the scale
}

// The loop: a step's diagnostic stops it; a process without outputs records times only.
TEST(RunSteps, StopsAtAFailedStepAndTimesStepsWithoutOutputs) {
  Graph g = gpt(false);
  int calls = 0;
  auto failing = run_steps(
      g,
      [&](int s) -> Result<std::optional<TensorMap>> {
        ++calls;
        if (s == 2) return Diagnostic("step 2 broke");
        return std::optional<TensorMap>();
      },
      loop_of(5));
  ASSERT_FALSE(failing.ok());
  EXPECT_EQ(failing.error().message, "step 2 broke");
  EXPECT_EQ(calls, 2);
  auto quiet = run_steps(
      g, [](int) -> Result<std::optional<TensorMap>> { return std::optional<TensorMap>(); },
      loop_of(3));
  ASSERT_TRUE(quiet.ok());
  EXPECT_EQ(quiet->step_times_s.size(), 3u);
  EXPECT_TRUE(quiet->outputs.empty());
  RunResult r;
  r.step_times_s = {3, 1, 2, 10};
  EXPECT_DOUBLE_EQ(r.median_step_s(), 2.5);
  EXPECT_DOUBLE_EQ(r.wall_time_s(), 16);
}

// A ReLU input within fp32 rounding of zero may fall on either side in a run whose sums round
// differently (an imported ResNet-50's did), and every gradient before it then differs by its dy.
// Here an MLP's first bias is moved so one hidden pre-activation (the one with the largest dy)
// cancels to ~0, and the "run" is the interpreter with that input on the other side: the plain
// comparison fails, the check's kink search (CheckOptions::kink_tries) passes it, and a wrong
// output still fails.
TEST(ReferenceCheck, TakesReluInputsWithinRoundingOfZeroFromTheRun) {
  auto forward = zoo::build_mlp({.batch = 4, .inputs = 8, .hidden = 16, .layers = 2, .classes = 4},
                                {.with_loss = true});
  ASSERT_TRUE(forward.ok()) << forward.error().to_string();
  auto step = build_train_step(*forward, {});
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  Graph g = std::move(step->graph);
  for (const auto& u : step->updates) g.add_output(u.grad);
  std::vector<Tensor> inputs;
  TensorMap feeds = feeds_of(g, inputs, 4);  // labels in the 4 classes
  // The ReLU gradient behind fc0: elementwise_grad{fn="relu"}(dy, x), x = x0 W + fc0.bias.
  ValueId bias = kNoValue, x = kNoValue, dy = kNoValue;
  for (ValueId p : g.params())
    if (g.value(p).name == "fc0.bias") bias = p;
  ASSERT_NE(bias, kNoValue);
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    auto fn = op.attrs.find("fn");
    if (op.kind != OpKind::kElementwiseGrad || fn == op.attrs.end() ||
        std::get<std::string>(fn->second) != "relu")
      continue;
    OpId add = g.value(op.inputs[1].value).producer;
    for (const auto& in : g.op(add).inputs)
      if (in.value == bias) x = op.inputs[1].value, dy = op.inputs[0].value;
  }
  ASSERT_NE(x, kNoValue);
  auto run = [&](Interpreter& interp) {
    for (ValueId p : g.params()) interp.set_param(p, feeds.at(p));
    auto outs = interp.run(inputs, 1);
    EXPECT_TRUE(outs.ok());
    return *outs;
  };
  Interpreter probe(g);
  run(probe);
  const Tensor &x0 = probe.value(x), &dy0 = probe.value(dy);
  int64_t at = 0;
  for (int64_t i = 0; i < dy0.numel(); ++i)
    if (x0.f32()[i] > 0 && std::fabs(dy0.f32()[i]) > std::fabs(dy0.f32()[at])) at = i;
  ASSERT_GT(x0.f32()[at], 0);
  const int64_t hidden = x0.shape()[1];
  feeds.at(bias).f32()[at % hidden] -= x0.f32()[at];  // x[at] cancels to (about) zero
  Interpreter runner(g);
  runner.set_after_op([&](ValueId v, Tensor& t) {
    if (v != x) return;
    ASSERT_LT(std::fabs(t.f32()[at]), 1e-5f);
    t.f32()[at] = t.f32()[at] != 0 ? -t.f32()[at] : std::numeric_limits<float>::min();
  });
  TensorMap got;
  std::vector<Tensor> outs = run(runner);
  for (size_t k = 0; k < outs.size(); ++k) got.insert_or_assign(g.outputs()[k], outs[k]);
  auto check = [&](const TensorMap& run_outputs, int kink_tries) {
    ReferenceCheck c(g, step->updates, feeds, inputs, {.adamw = true, .kink_tries = kink_tries});
    EXPECT_TRUE(c.check_step(1, run_outputs).ok());
    return c.errors();
  };
  CheckErrors plain = check(got, 0), searched = check(got, 16);
  EXPECT_FALSE(plain.ok) << plain.max_abs;
  EXPECT_TRUE(searched.ok) << searched.max_abs;
  EXPECT_EQ(searched.kinks_flipped, 1);
  TensorMap wrong = got;
  wrong.at(step->updates[0].grad).f32()[0] += 1.0f;
  EXPECT_FALSE(check(wrong, 16).ok);
}

TEST(HostMemory, PeaksShrinkWithMoreDevicesAndTheErrorNamesBothFigures) {
  Graph g = gpt(false, 8);
  const auto one = peak_bytes_per_device(g, lowered(g, "dp=1", 1));
  const auto four = peak_bytes_per_device(g, lowered(g, "dp=4", 4));
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(four.size(), 4u);
  // At least the whole parameters and the largest activation; data parallel splits activations.
  int64_t params = 0;
  for (ValueId p : g.params())
    params += tensor_storage_bytes(g.type(p).dtype(), g.type(p).shape().product());
  EXPECT_GE(one[0], params);
  EXPECT_LT(four[0], one[0]);
  HostMemoryNeed need{.devices = 3 << 20, .feeds = 1 << 20};
  EXPECT_TRUE(check_host_memory(need, 4 << 20).ok());
  EXPECT_TRUE(check_host_memory(need, 0).ok());  // unknown: no limit
  auto st = check_host_memory(need, 2 << 20);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("needs 4.00 MiB"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("has 2.00 MiB"), std::string::npos) << st.error().message;
  EXPECT_GT(physical_memory_bytes(), 0);
}

}  // namespace
}  // namespace heddle
