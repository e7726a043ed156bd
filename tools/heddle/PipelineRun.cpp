#include "PipelineRun.h"

#include <fmt/format.h>

#include <algorithm>

#include "Command.h"
#include "Planning.h"
#include "heddle/ops/TileInit.h"
#include "heddle/support/Assert.h"

namespace heddle::cli {

Result<StrategySpec> requested_strategy(const std::string& mesh_text,
                                        const std::string& strategy_text) {
  std::string text = strategy_text;
  if (text.empty() && mesh_text.find('=') != std::string::npos) text = mesh_text;
  if (text.empty()) return StrategySpec{};
  auto spec = StrategySpec::parse(text);
  if (!spec.ok()) return Diagnostic("--strategy: " + spec.error().message);
  HEDDLE_TRY(runnable_strategy(*spec));
  return spec;
}

Result<PipelinePlan> plan_pipeline(const RunOptions& o, const Graph& full,
                                   const StrategySpec& spec) {
  auto given = Mesh::parse(o.mesh);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  auto mesh = spec.mesh(given->num_devices());
  HEDDLE_TRY(mesh);
  const int64_t pp = *spec.pp, dp = spec.dp.value_or(1);
  const bool zoo = zoo::is_zoo_model(o.model);
  // Top-2 gating sizes expert capacity from the tokens it sees: split into micro-batches, the
  // model drops other tokens than on the whole batch, a different computation.
  bool gating = false;
  for (const Op& op : full.ops()) gating |= op.kind == OpKind::kTop2Gating;
  const int64_t B = full.inputs().empty() || full.type(full.inputs()[0]).rank() == 0
                        ? 1
                        : full.type(full.inputs()[0]).shape()[0];
  // Micro-batches, as heddle simulate counts them: mb samples per dp replica each.
  int64_t m = 1;
  if (spec.microbatches) {
    m = *spec.microbatches;
  } else if (spec.micro_batch) {
    if (*spec.micro_batch * dp <= 0 || B % (*spec.micro_batch * dp) != 0)
      return Diagnostic(
          fmt::format("mb={} x dp={} does not divide the batch {}", *spec.micro_batch, dp, B));
    m = B / (*spec.micro_batch * dp);
  } else if (zoo && !gating) {
    m = B % dp == 0 ? B / dp : 1;
  }
  if (gating && m > 1)
    return Diagnostic(fmt::format(
        "{} has top-2 gating, whose expert capacity depends on the tokens of a batch: {} "
        "micro-batches would route differently from the whole batch; use microbatches=1",
        full.name(), m));
  if (m < 1 || B % m != 0 || (B / m) % dp != 0)
    return Diagnostic(fmt::format(
        "{} micro-batches of the batch {} do not split evenly over dp={}; pick microbatches so "
        "that microbatches x dp divides {}",
        m, B, dp, B));
  if (m > 1 && !zoo)
    return Diagnostic(fmt::format(
        "{} micro-batches need the model rebuilt at batch {}; only zoo models can be, so a model "
        "from a file runs as one micro-batch (microbatches=1)",
        m, B / m));
  Graph micro = full;
  if (m > 1) {
    zoo::ZooOverrides over = o.overrides;
    over.batch = B / m;
    auto g = zoo::build_zoo_model(o.model, over, {.with_loss = o.train});
    HEDDLE_TRY(g);
    micro = std::move(*g);
  }
  PipelineOptions po;
  po.stages = pp;
  po.micro_batches = m;
  po.schedule = spec.schedule.value_or("1f1b");
  po.train = o.train;
  po.inner = spec;
  po.layers = spec.layers;
  po.optimizer.optimizer = o.optimizer == "sgd" ? TrainStepOptions::Optimizer::kSgdMomentum
                                                : TrainStepOptions::Optimizer::kAdamW;
  po.optimizer.adamw.lr = o.lr;
  po.optimizer.sgd.lr = o.lr;
  auto program = build_pipeline(micro, po);
  HEDDLE_TRY(program);
  PipelinePlan plan{std::move(*program), *mesh, spec, ""};
  plan.note = fmt::format(
      "strategy {} on mesh {}: {} stages of {} device(s), {} chunks, {} micro-batches of {}, "
      "schedule {}{}",
      spec.to_string(), mesh->to_string(), pp, plan.program.stage_devices,
      plan.program.chunks.size(), m, B / m, plan.program.schedule,
      o.train ? " (backward blocks recompute their chunk's forward, as recompute=full)" : "");
  return plan;
}

Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full) {
  auto spec = requested_strategy(o.mesh, o.strategy);
  HEDDLE_TRY(spec);
  if (spec->pp.value_or(1) <= 1) return std::optional<PipelinePlan>();
  if (!o.emit_dir.empty())
    return Diagnostic(
        "--emit writes the programs of runs without pipeline stages; drop pp from the strategy "
        "to see one stage's programs");
  auto plan = plan_pipeline(o, full, *spec);
  HEDDLE_TRY(plan);
  return std::optional<PipelinePlan>(std::move(*plan));
}

PipelineFeeds to_pipeline_feeds(const PipelinePlan& plan, const Graph& g, const TensorMap& feeds) {
  const int64_t m = plan.program.micro_batches;
  PipelineFeeds f;
  for (ValueId p : g.params())
    if (auto it = feeds.find(p); it != feeds.end()) f.params.emplace(g.value(p).name, it->second);
  f.inputs.resize(static_cast<size_t>(m));
  for (ValueId x : g.inputs())
    for (int64_t k = 0; k < m; ++k)
      f.inputs[k].emplace(g.value(x).name,
                          m == 1 ? feeds.at(x) : micro_batch_of(feeds.at(x), m, k));
  return f;
}

PipelineFeeds device_pipeline_feeds(const PipelinePlan& plan, const Graph& g, int64_t device,
                                    uint64_t seed, int64_t int_hi) {
  const PipelineProgram& P = plan.program;
  PipelineFeeds f;
  f.inputs.resize(static_cast<size_t>(P.micro_batches));
  for (const auto& [name, box] : P.device_loads(device)) {
    auto v = g.find_value(name);
    HEDDLE_ASSERT(v.has_value()) << "no value '" << name << "' in " << g.name();
    const TensorType& type = g.type(*v);
    if (g.value(*v).role == ValueRole::kParam) {
      f.params.emplace(name, init_param_tile(name, type, seed, box));
      continue;
    }
    // Micro-batch k holds rows [k * rows, (k + 1) * rows) of the whole batch.
    for (int64_t k = 0; k < P.micro_batches; ++k) {
      std::vector<int64_t> shift(static_cast<size_t>(box.rank()), 0);
      if (k > 0) shift[0] = k * P.input_types.at(name).shape()[0];
      Tensor whole = random_input_tile(name, type, seed + 1, int_hi, box.translate(IVec(shift)));
      Tensor t(whole.dtype(), box.shape(), box.start());  // the same elements, micro coordinates
      if (t.is_int())
        std::copy(whole.i64(), whole.i64() + whole.numel(), t.i64());
      else
        std::copy(whole.f32(), whole.f32() + whole.numel(), t.f32());
      f.inputs[static_cast<size_t>(k)].emplace(name, std::move(t));
    }
  }
  return f;
}

Result<TensorMap> from_pipeline_result(const PipelinePlan& plan, const Graph& g,
                                       const std::vector<ParamUpdate>& updates,
                                       const PipelineResult& r) {
  const PipelineProgram& P = plan.program;
  TensorMap out;
  for (size_t k = 0; k < P.output_names.size(); ++k) {
    ValueId v = g.outputs()[k];
    std::vector<Tensor> parts;
    for (const auto& mo : r.outputs) parts.push_back(mo.at(P.output_names[k]));
    if (P.train) {  // the loss of the whole batch: the mean over micro-batches
      double sum = 0;
      for (const auto& t : parts) sum += t.f32()[0];
      Tensor loss(g.type(v));
      loss.f32()[0] = static_cast<float>(sum / static_cast<double>(parts.size()));
      out.emplace(v, std::move(loss));
    } else if (parts.size() == 1) {
      out.emplace(v, parts[0]);
    } else {
      if (parts[0].rank() == 0 ||
          parts[0].shape()[0] * static_cast<int64_t>(parts.size()) != g.type(v).shape()[0])
        return Diagnostic("output '" + g.value(v).name + "' " + g.type(v).to_string() +
                          " is not split by batch along dim 0, so micro-batches cannot be "
                          "joined; use microbatches=1");
      out.emplace(v, concat_micro_batches(parts));
    }
  }
  auto take = [&](ValueId v, const std::map<std::string, Tensor>& from, const std::string& n) {
    if (auto it = from.find(n); it != from.end()) out.insert_or_assign(v, it->second);
  };
  for (const auto& u : updates) {
    const std::string& p = g.value(u.param).name;
    take(u.updated, r.updated, p);
    take(u.grad, r.grads, p);
    for (const auto& [st, next] : u.state) take(next, r.updated, g.value(st).name);
  }
  for (ValueId v : g.outputs())
    if (!out.count(v))
      return Diagnostic("the pipeline produced no value for output '" + g.value(v).name + "'");
  return out;
}

}  // namespace heddle::cli
