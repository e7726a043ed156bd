// Pipelines executed for real: models split into stages, micro-batches run in the order of the
// GPipe, 1F1B, interleaved and zero-bubble (ZB-H1, ZB-H2) schedules with activations and gradients
// crossing stages, data and tensor parallelism inside stages; forward outputs, gradients and
// updated parameters checked against the single-device training step on the whole batch.
#include <gtest/gtest.h>

#include <cmath>

#include "common/RandomModel.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/StageSplit.h"

namespace heddle {
namespace {

int64_t int_range(const Graph& g) {
  int64_t hi = 0;
  for (const Op& op : g.ops()) {
    int64_t n = 0;
    if (op.kind == OpKind::kEmbedding) n = g.type(op.inputs[1].value).shape()[0];
    if (op.kind == OpKind::kCrossEntropy) n = g.type(op.inputs[0].value).shape().values().back();
    if (n > 0) hi = hi == 0 ? n : std::min(hi, n);
  }
  return hi == 0 ? 2 : hi;
}

void expect_close(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double x = want.is_int() ? want.i64()[i] : want.f32()[i];
    double y = got.is_int() ? got.i64()[i] : got.f32()[i];
    worst = std::max(worst, std::fabs(x - y) / (1e-4 + 1e-3 * std::fabs(x)));
  }
  EXPECT_LE(worst, 1.0) << what << ": error beyond abs 1e-4 + rel 1e-3";
}

// Runs `full` (whole batch) as a pipeline of `micro` (the same model at 1/m of the batch) and
// compares with the single-device step: outputs (forward), or loss, gradients and SGD-updated
// parameters (training). `sharded`: each device is fed only the tiles device_loads() names, and
// the most any device holds of the parameters and optimizer state is returned as a fraction of
// the whole (else 1).
double expect_pipeline_matches(const Graph& full, const Graph& micro, const std::string& strategy,
                               int64_t m, bool train, bool sharded = false,
                               PipelineCounts* counts = nullptr,
                               const std::vector<Tactic>& tactics = {}) {
  SCOPED_TRACE(full.name() + " " + strategy + " micro-batches " + std::to_string(m));
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok()) << spec.error().to_string();
  if (!spec.ok()) return 1;
  PipelineOptions po;
  po.stages = *spec->pp;
  po.micro_batches = m;
  po.schedule = spec->schedule.value_or(pipeline::PipelineSchedule{});
  po.train = train;
  po.inner = *spec;
  po.layers = spec->layers;
  po.recompute = spec->recompute.value_or(Recompute::kNone);
  po.optimizer.optimizer = TrainStepOptions::Optimizer::kSgdMomentum;
  po.optimizer.sgd.lr = 0.1;
  po.tactics = tactics;
  auto P = build_pipeline(micro, po);
  EXPECT_TRUE(P.ok()) << P.error().to_string();
  if (!P.ok()) return 1;

  Graph ref = full;
  std::vector<ParamUpdate> updates;
  if (train) {
    auto step = build_train_step(full, po.optimizer);
    EXPECT_TRUE(step.ok()) << step.error().to_string();
    if (!step.ok()) return 1;
    ref = std::move(step->graph);
    updates = step->updates;
    for (const auto& u : updates) ref.add_output(u.grad);
  }
  PipelineFeeds feeds;
  for (ValueId p : ref.params())
    feeds.params.emplace(ref.value(p).name, init_param(ref.value(p).name, ref.type(p), 3));
  std::vector<Tensor> inputs = random_inputs(full, 4, int_range(full));
  feeds.inputs.resize(static_cast<size_t>(m));
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int64_t k = 0; k < m; ++k)
      feeds.inputs[k].emplace(full.value(full.inputs()[i]).name,
                              m == 1 ? inputs[i] : micro_batch_of(inputs[i], m, k));
  // Sharded: device d gets only its tiles (cropped from the whole tensors).
  const int64_t n = P->num_devices();
  std::vector<PipelineFeeds> tiles(static_cast<size_t>(sharded ? n : 0));
  double held = sharded ? 0 : 1, whole = 0;
  for (const auto& [name, t] : feeds.params) whole += static_cast<double>(t.numel());
  for (int64_t d = 0; d < static_cast<int64_t>(tiles.size()); ++d) {
    PipelineFeeds& f = tiles[d];
    f.inputs.resize(feeds.inputs.size());
    double mine = 0;
    for (const auto& [name, box] : P->device_loads(d)) {
      if (auto it = feeds.params.find(name); it != feeds.params.end()) {
        f.params.emplace(name, it->second.crop(box));
        mine += static_cast<double>(box.volume());
      }
      for (size_t k = 0; k < feeds.inputs.size(); ++k)
        if (auto it = feeds.inputs[k].find(name); it != feeds.inputs[k].end())
          f.inputs[k].emplace(name, it->second.crop(box));
    }
    held = std::max(held, mine / whole);
  }
  auto got = sharded ? run_pipeline_threaded(
                           *P, [&](int64_t d) -> const PipelineFeeds& { return tiles[d]; },
                           {.optimizer_step = train ? 1 : 0})
                     : run_pipeline_threaded(*P, feeds, {.optimizer_step = train ? 1 : 0});
  EXPECT_TRUE(got.ok()) << got.error().to_string();
  if (!got.ok()) return held;
  if (counts) *counts = got->counts;
  EXPECT_EQ(got->counts.kernel_calls, P->step_counts().kernel_calls);
  EXPECT_EQ(got->counts.recompute_calls, P->step_counts().recompute_calls);

  Interpreter interp(ref, {.seed = 3, .blas_threads = 1});
  auto want = interp.run(inputs, 1);
  EXPECT_TRUE(want.ok()) << want.error().to_string();
  if (!want.ok()) return held;
  const std::string out0 = full.value(full.outputs()[0]).name;
  if (!train) {
    for (size_t k = 0; k < full.outputs().size(); ++k) {
      std::vector<Tensor> parts;
      for (const auto& mo : got->outputs)
        parts.push_back(mo.at(full.value(full.outputs()[k]).name));
      expect_close((*want)[k], m == 1 ? parts[0] : concat_micro_batches(parts), "output");
    }
    return held;
  }
  double loss = 0;
  for (const auto& mo : got->outputs) loss += mo.at(out0).f32()[0];
  EXPECT_NEAR((*want)[0].f32()[0], loss / static_cast<double>(m), 1e-4 + 1e-3 * std::fabs(loss));
  std::map<ValueId, size_t> index;
  for (size_t k = 0; k < ref.outputs().size(); ++k) index[ref.outputs()[k]] = k;
  EXPECT_FALSE(updates.empty());
  for (const auto& u : updates) {
    const std::string& p = ref.value(u.param).name;
    EXPECT_TRUE(got->grads.count(p)) << p;
    if (!got->grads.count(p)) continue;
    expect_close((*want)[index.at(u.grad)], got->grads.at(p), "gradient of " + p);
    expect_close((*want)[index.at(u.updated)], got->updated.at(p), "updated " + p);
    for (const auto& [st, next] : u.state)
      expect_close((*want)[index.at(next)], got->updated.at(ref.value(st).name),
                   "state " + ref.value(st).name);
  }
  return held;
}

Graph zoo_model(const std::string& name, int64_t batch, bool loss, int64_t layers = 4) {
  zoo::ZooOverrides over;
  over.batch = batch;
  over.layers = layers;
  auto g = zoo::build_zoo_model(name, over, {.with_loss = loss});
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return *g;
}

TEST(StageSplit, BalancesLayersLikeTheSimulator) {
  Graph g = zoo_model("gpt-tiny", 2, true, 5);
  EXPECT_EQ(layer_of_param("h3.attn.w"), "h3");
  EXPECT_EQ(layer_of_param("wte"), "");
  EXPECT_EQ(layer_of_param("norm.gamma"), "");
  auto s = split_stages(g, 2);
  ASSERT_TRUE(s.ok());
  // 5 layers on 2 chunks: 3 then 2; chunk 1 starts at the first op reading a layer-3 parameter.
  int64_t first_h3 = -1;
  for (OpId i = 0; i < g.num_ops() && first_h3 < 0; ++i)
    for (const auto& in : g.op(i).inputs)
      if (g.value(in.value).name.rfind("h3.", 0) == 0) first_h3 = i;
  EXPECT_EQ(*s, (std::vector<int64_t>{0, first_h3, g.num_ops()}));
  // An uneven split (layers=1/4): chunk 1 starts at the first op reading a layer-1 parameter.
  auto uneven = split_stages(g, 2, {1, 4});
  ASSERT_TRUE(uneven.ok()) << uneven.error().to_string();
  int64_t first_h1 = -1;
  for (OpId i = 0; i < g.num_ops() && first_h1 < 0; ++i)
    for (const auto& in : g.op(i).inputs)
      if (g.value(in.value).name.rfind("h1.", 0) == 0) first_h1 = i;
  EXPECT_EQ(*uneven, (std::vector<int64_t>{0, first_h1, g.num_ops()}));
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{2, 2}, std::vector<int64_t>{5, 0}, std::vector<int64_t>{1, 1, 3}}) {
    auto r = split_stages(g, 2, bad);
    EXPECT_FALSE(r.ok());
  }
}

TEST(Pipeline, TrainingStepsOfZooModelsMatchTheReference) {
  // gpt-tiny ties its embedding and head: the two stages share the table's gradient.
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                          "pp=2,schedule=1f1b", 2, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 1, true),
                          "pp=2,schedule=gpipe", 4, true);
  expect_pipeline_matches(zoo_model("llama-tiny", 4, true), zoo_model("llama-tiny", 2, true),
                          "pp=2,dp=2,schedule=1f1b", 2, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                          "pp=2,tp=2,schedule=1f1b", 2, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 1, true),
                          "pp=4,schedule=1f1b", 4, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true, 8), zoo_model("gpt-tiny", 1, true, 8),
                          "pp=2,schedule=interleaved:2", 4, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                          "pp=2,layers=3/1", 2, true);
}

TEST(Pipeline, ZeroBubbleSchedulesSplitTheBackwardAndMatchTheReference) {
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 1, true),
                          "pp=4,schedule=zb-h1", 4, true);
  expect_pipeline_matches(zoo_model("llama-tiny", 8, true), zoo_model("llama-tiny", 2, true),
                          "pp=2,dp=2,schedule=zb-h1", 4, true);
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                          "pp=2,tp=2,schedule=zb-h2", 2, true);
  // The split: B computes only the gradients of received values, W only the parameters'; each
  // keeps only the ops its outputs need, so each is smaller than the whole backward.
  PipelineOptions po;
  po.stages = 2;
  po.micro_batches = 2;
  po.train = true;
  auto whole = build_pipeline(zoo_model("gpt-tiny", 2, true), po);
  po.schedule = {pipeline::ScheduleKind::kZbH1, 1};
  auto zb = build_pipeline(zoo_model("gpt-tiny", 2, true), po);
  ASSERT_TRUE(whole.ok() && zb.ok());
  EXPECT_FALSE(whole->split_backward);
  EXPECT_TRUE(zb->split_backward);
  for (size_t c = 0; c < zb->chunks.size(); ++c) {
    const PipelineChunk& z = zb->chunks[c];
    const int64_t ops = whole->chunks[c].backward.graph.num_ops();
    EXPECT_EQ(z.grads.size() + z.weight_grads.size(), whole->chunks[c].grads.size());
    for (const auto& [name, v] : z.weight_grads)
      EXPECT_EQ(std::count(z.params.begin(), z.params.end(), name), 1) << name;
    for (const auto& [name, v] : z.grads)
      EXPECT_EQ(std::count(z.params.begin(), z.params.end(), name), 0) << name;
    EXPECT_FALSE(z.weight.programs.empty());
    EXPECT_LE(z.weight.graph.num_ops(), ops);
    if (c == 0) {
      EXPECT_TRUE(z.backward.programs.empty());  // the first chunk receives no float values
    } else {
      EXPECT_LT(z.backward.graph.num_ops(), ops);
      EXPECT_LT(z.weight.graph.num_ops(), ops);
    }
  }
  // W reads what B computed: a zero-bubble step runs exactly 1F1B's kernel calls, whatever
  // the recompute mode (B and W never both recompute the forward).
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    PipelineOptions a = po, b = po;
    a.recompute = b.recompute = r;
    a.schedule = {pipeline::ScheduleKind::k1f1b, 1};
    auto pa = build_pipeline(zoo_model("gpt-tiny", 2, true), a);
    auto pb = build_pipeline(zoo_model("gpt-tiny", 2, true), b);
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_EQ(pa->step_counts().kernel_calls, pb->step_counts().kernel_calls) << to_string(r);
    EXPECT_EQ(pa->step_counts().recompute_calls, pb->step_counts().recompute_calls);
  }
  // Every stage runs one W per micro-batch, after that micro-batch's B.
  for (const auto& order : zb->order) {
    int64_t b = 0, w = 0;
    for (const PipelineStep& st : order) {
      if (st.weight) {
        EXPECT_LT(w++, b);
      }
      if (st.backward && !st.weight) ++b;
    }
    EXPECT_EQ(w, po.micro_batches);
  }
}

// Generated cases: schedules x stage counts x micro-batch counts x recompute modes, each matching
// the reference; the kernel calls each run executed prove what it recomputed: nothing under
// none, attention's scores and probabilities under selective, the chunk under full.
TEST(Pipeline, RecomputeModesRunWhatTheySayAndMatchTheReference) {
  struct Case {
    std::string model, schedule;
    int64_t pp, m, layers;
  };
  const std::vector<Case> cases = {
      {"gpt-tiny", "1f1b", 2, 2, 4},          {"gpt-tiny", "gpipe", 4, 4, 4},
      {"llama-tiny", "zb-h1", 2, 4, 4},       {"gpt-tiny", "zb-h2", 2, 2, 4},
      {"gpt-tiny", "interleaved:2", 2, 2, 8}, {"llama-tiny", "1f1b", 4, 1, 4},
  };
  for (const Case& c : cases) {
    std::map<std::string, PipelineCounts> by;
    for (std::string r : {"none", "selective", "full"}) {
      const std::string strategy =
          "pp=" + std::to_string(c.pp) + ",schedule=" + c.schedule + ",recompute=" + r;
      expect_pipeline_matches(zoo_model(c.model, 4, true, c.layers),
                              zoo_model(c.model, 4 / c.m, true, c.layers), strategy, c.m, true,
                              false, &by[r]);
    }
    SCOPED_TRACE(c.model + " " + c.schedule);
    EXPECT_GT(by["none"].kernel_calls, 0);
    EXPECT_EQ(by["none"].recompute_calls, 0);
    EXPECT_GT(by["selective"].recompute_calls, 0);
    EXPECT_LT(by["selective"].recompute_calls, by["full"].recompute_calls);
    // What each mode runs beyond none is exactly what it recomputes.
    for (std::string r : {"selective", "full"})
      EXPECT_EQ(by[r].kernel_calls - by[r].recompute_calls, by["none"].kernel_calls) << r;
  }
  // Selective recomputes only attention's score chain; full the whole chunk from its inputs.
  PipelineOptions po;
  po.train = true;
  po.recompute = Recompute::kSelective;
  po.schedule = {pipeline::ScheduleKind::kZbH1, 1};
  auto P = build_pipeline(zoo_model("gpt-tiny", 2, true), po);
  ASSERT_TRUE(P.ok()) << P.error().to_string();
  int64_t softmaxes = 0;
  for (const PipelineChunk& ch : P->chunks) {
    EXPECT_FALSE(ch.stashed.empty());
    for (const StageBlock* b : {&ch.backward, &ch.weight})
      for (OpId op : b->recomputed) {
        OpKind k = b->graph.op(op).kind;
        softmaxes += k == OpKind::kSoftmax;
        EXPECT_TRUE(k == OpKind::kSoftmax || k == OpKind::kEinsum || is_elementwise(k))
            << op_kind_name(k);
      }
  }
  EXPECT_EQ(softmaxes, 4) << "one softmax per layer, recomputed once (W reads B's)";
}

TEST(Pipeline, StagesOnUnequalSubMeshesMatchTheReference) {
  // What plan may choose: per-stage meshes of different sizes and shapes. Activations and
  // gradients cross between stages of different dp and tp, shared parameters (gpt-tiny's tied
  // embedding) between stages of different sizes.
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"meshes=2x1/1x1,schedule=1f1b", 2},
      {"meshes=1x1/1x2,schedule=gpipe", 2},
      {"meshes=1x2/2x1,schedule=zb-h1", 2},
      {"meshes=2x1/1x1/1x2,schedule=1f1b,recompute=selective", 2},
  };
  for (const auto& [strategy, m] : cases) {
    PipelineCounts counts;
    for (const char* model : {"gpt-tiny", "llama-tiny"})
      expect_pipeline_matches(zoo_model(model, 8, true), zoo_model(model, 8 / m, true), strategy, m,
                              true, false, &counts);
  }
  auto spec = StrategySpec::parse("meshes=2x1/1x2/1x1");
  ASSERT_TRUE(spec.ok());
  PipelineOptions po;
  po.stages = 3;
  po.inner = *spec;
  auto P = build_pipeline(zoo_model("gpt-tiny", 2, false), po);
  ASSERT_TRUE(P.ok()) << P.error().to_string();
  EXPECT_EQ(P->num_devices(), 5);
  EXPECT_EQ(P->stage_devices, 0);
  EXPECT_EQ(P->stage_of_device(2), 1);
  EXPECT_EQ(P->stage_of_device(4), 2);
  EXPECT_EQ(P->devices_of(1), 2);
  // Forward only, each device fed only its tiles.
  expect_pipeline_matches(zoo_model("llama-tiny", 4, false), zoo_model("llama-tiny", 2, false),
                          "meshes=2x1/1x2", 2, false, true);
}

TEST(Pipeline, EachDeviceHoldsOnlyItsShardOfItsStage) {
  // pp=2 halves the model, tp=2 halves each stage's weights and their optimizer state: a device
  // is fed only its tiles (about a quarter; norms and some biases stay whole) and the step still
  // matches the reference.
  double held =
      expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                              "pp=2,tp=2,recompute=full", 2, true, true);
  EXPECT_GT(held, 0.2);
  EXPECT_LT(held, 0.3) << "not a quarter of the parameters and state";
  // Stashing (recompute=none): backward blocks plan without the forward's placements of what
  // they read from the stash, so a few more weights stay whole (0.30 here, against 0.26).
  held = expect_pipeline_matches(zoo_model("gpt-tiny", 4, true), zoo_model("gpt-tiny", 2, true),
                                 "pp=2,tp=2", 2, true, true);
  EXPECT_GT(held, 0.2);
  EXPECT_LT(held, 0.32);
  // Forward only, data parallel inside the stages: weights replicated, inputs split.
  held = expect_pipeline_matches(zoo_model("llama-tiny", 4, false),
                                 zoo_model("llama-tiny", 2, false), "pp=2,dp=2", 2, false, true);
  EXPECT_GT(held, 0.4);
  EXPECT_LT(held, 0.6);
}

TEST(Pipeline, BoundaryValuesCrossAsTheReceiversTiles) {
  // With dp=2 inside the stages a received activation is split over dp: each device of the
  // receiving stage gets its half, and the two halves tile the value. (Those runs match the
  // reference in TrainingStepsOfZooModelsMatchTheReference.)
  PipelineOptions po;
  po.micro_batches = 2;
  po.train = true;
  po.inner = *StrategySpec::parse("pp=2,dp=2");
  auto P = build_pipeline(zoo_model("gpt-tiny", 2, true), po);
  ASSERT_TRUE(P.ok()) << P.error().to_string();
  ASSERT_FALSE(P->edges.empty());
  for (size_t e = 0; e < P->edges.size(); ++e) {
    const Graph& g = P->chunks[P->edges[e].to].forward.graph;
    const TensorType& t = g.type(*g.find_value(P->edges[e].value));
    for (bool grad : {false, true}) {
      if (grad && !dtype_is_float(t.dtype())) continue;  // integers carry no gradient
      Box a = P->receive_box(e, 0, grad), b = P->receive_box(e, 1, grad);
      EXPECT_EQ(a.volume() + b.volume(), t.shape().product()) << P->edges[e].value;
      EXPECT_TRUE(a.intersect(b).empty()) << a.to_string() << " " << b.to_string();
    }
  }
}

// A tactic pins the channel split of a batch norm inside each tp=2 stage (the preset splits the
// image height): the stages load and split %img by channels and the step matches the reference.
TEST(Pipeline, TacticsPinEachStagesSplitAndMatchTheReference) {
  auto g = parse_graph_file(std::string(HEDDLE_SOURCE_DIR) + "/examples/batchnorm.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  const std::vector<Tactic> tactics = {*Tactic::parse("%img:1=tp")};
  auto img_load = [&](const std::vector<Tactic>& ts) {
    PipelineOptions po;
    po.inner = *StrategySpec::parse("pp=2,tp=2");
    po.tactics = ts;
    auto P = build_pipeline(*g, po);
    EXPECT_TRUE(P.ok()) << P.error().to_string();
    if (!P.ok()) return IVec();
    const StageBlock& b = P->chunks[1].forward;  // %d = %y - %img
    for (const Instr& in : b.programs[0].instrs)
      if (in.kind == Instr::Kind::kLoad && b.graph.value(in.value).name == "img")
        return in.box.shape();
    return IVec();
  };
  EXPECT_EQ(img_load({}), IVec({8, 16, 8, 16}));  // the preset: h
  EXPECT_EQ(img_load(tactics), IVec({8, 8, 16, 16}));
  for (bool train : {false, true})
    expect_pipeline_matches(*g, *g, "pp=2,tp=2", 1, train, false, nullptr, tactics);
  // A tactic on no value of the model is a diagnostic, not dropped.
  PipelineOptions po;
  po.inner = *StrategySpec::parse("pp=2,tp=2");
  po.tactics = {*Tactic::parse("%imgs:1=tp")};
  auto bad = build_pipeline(*g, po);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "--tactic '%imgs:1=tp': %imgs is not a value of batchnorm");
}

TEST(Pipeline, ForwardOnlyZooModelsMatchTheReference) {
  expect_pipeline_matches(zoo_model("gpt-tiny", 4, false), zoo_model("gpt-tiny", 2, false), "pp=2",
                          2, false);
  expect_pipeline_matches(zoo_model("llama-tiny", 4, false), zoo_model("llama-tiny", 1, false),
                          "pp=4,dp=1", 4, false);
}

// `g` with its output replaced by the scalar mean(y * y).
Graph with_square_loss(const Graph& g) {
  Graph out(g.name() + "_loss");
  std::map<ValueId, ValueId> remap;
  for (ValueId v : g.inputs()) remap[v] = out.add_input(g.value(v).name, g.type(v));
  for (ValueId v : g.params()) remap[v] = out.add_param(g.value(v).name, g.type(v));
  for (const Op& src : g.ops()) {
    Op op = src;
    for (auto& in : op.inputs) in.value = remap.at(in.value);
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (const auto& r : src.results) {
      names.push_back(g.value(r.value).name);
      types.push_back(g.type(r.value));
    }
    auto ids = out.add_op(std::move(op), names, types);
    for (size_t k = 0; k < ids.size(); ++k) remap[src.results[k].value] = ids[k];
  }
  Ops o(out);
  ValueId y = remap.at(g.outputs()[0]);
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < out.type(y).rank(); ++d) axes.push_back(d);
  o.output(o.reduce(OpKind::kReduceMean, o.mul(y, y), axes));
  EXPECT_TRUE(o.ok());
  return out;
}

TEST(Pipeline, RandomModelsSplitAnywhereMatchTheReference) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Graph g = testing::random_model(10, seed);
    expect_pipeline_matches(g, g, seed % 2 ? "pp=2" : "pp=4", 1, false);
    Graph t = with_square_loss(g);
    expect_pipeline_matches(t, t, seed % 2 ? "pp=2,schedule=gpipe" : "pp=4", 1, true);
    expect_pipeline_matches(t, t, seed % 2 ? "pp=2,schedule=zb-h1" : "pp=4,schedule=zb-h2", 1,
                            true);
  }
}

}  // namespace
}  // namespace heddle
