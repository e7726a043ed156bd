#include "heddle/driver/RunRequest.h"

#include <fmt/format.h>

#include "heddle/driver/RunCheckpoints.h"
#include "heddle/driver/RunPrediction.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/ProgramFiles.h"
#include "heddle/runtime/RunInputs.h"
#include "heddle/search/RunPlan.h"

namespace heddle::driver {

int steps_of(const RunRequest& r) { return r.steps != -1 ? r.steps : r.train ? 10 : 1; }

TrainStepOptions optimizer_options(const std::string& name, double lr) {
  TrainStepOptions to;
  to.optimizer = name == "sgd" ? TrainStepOptions::Optimizer::kSgdMomentum
                               : TrainStepOptions::Optimizer::kAdamW;
  to.adamw.lr = lr;
  to.sgd.lr = lr;
  return to;
}

Status check_unpipelined_keys(const Graph& full, const StrategySpec& spec) {
  const std::string why = "heddle run does that only with pipeline stages (pp > 1)";
  if (spec.recompute && *spec.recompute != Recompute::kNone)
    return Diagnostic(fmt::format(
        "recompute={}: {}; without pp it keeps every activation (recompute=none): drop the key "
        "or add pp",
        to_string(*spec.recompute), why));
  // 1F1B is the default wherever it matters (what plan prints with pp=1): nothing to honour.
  if (spec.schedule && spec.schedule->kind != pipeline::ScheduleKind::k1f1b)
    return Diagnostic(fmt::format(
        "schedule={} orders pipeline stages; without pp > 1 there are none to order: drop the key "
        "or add pp",
        spec.schedule->to_string()));
  if (spec.micro_batch || spec.microbatches) {
    const int64_t B = full.inputs().empty() || full.type(full.inputs()[0]).rank() == 0
                          ? 1
                          : full.type(full.inputs()[0]).shape()[0];
    auto batching = spec.micro_batching(B, false);
    HEDDLE_TRY(batching);
    const int64_t count = batching->count;
    if (count > 1)
      return Diagnostic(fmt::format(
          "{}: {} micro-batches of the batch of {}; {}, without it the batch runs whole: drop "
          "the key or add pp",
          spec.micro_batch ? fmt::format("mb={}", *spec.micro_batch)
                           : fmt::format("microbatches={}", *spec.microbatches),
          count, B, why));
  }
  return {};
}

Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunRequest& r, const Graph& full,
                                                      const StrategySpec& spec) {
  if (spec.pp.value_or(1) <= 1) {
    HEDDLE_TRY(check_unpipelined_keys(full, spec));
    return std::optional<PipelinePlan>();
  }
  if (!r.emit_dir.empty())
    return Diagnostic(
        "--emit writes the programs of runs without pipeline stages; drop pp from the strategy "
        "to see one stage's programs");
  auto given = Mesh::parse(r.mesh);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  if (spec.heterogeneous() && r.backend == "mpi")
    return Diagnostic(fmt::format(
        "--strategy {}: pipeline stages on sub-meshes of different shapes run on threads "
        "(--backend threads); the MPI backend runs stages of one shape",
        spec.to_string()));
  std::vector<Tactic> tactics = graph_tactics(full);  // the model's, then --tactic's
  tactics.insert(tactics.end(), r.tactics.begin(), r.tactics.end());
  model::ModelRequest rebuilt = r.model;  // rebuilt as `full` was built: with its loss to train
  rebuilt.options.with_loss = r.train;
  auto plan = plan_pipeline_run({.full = &full,
                                 .rebuild = model::batch_rebuilder(rebuilt),
                                 .spec = spec,
                                 .devices = given->num_devices(),
                                 .train = r.train,
                                 .optimizer = r.optimizer,
                                 .tactics = std::move(tactics)});
  HEDDLE_TRY(plan);
  return std::optional<PipelinePlan>(std::move(*plan));
}

Result<SequenceLayout> sequence_layout(const RunRequest& r, const Graph& g,
                                       const StrategySpec& spec) {
  return sequence_layout(g, spec, r.backend == "mpi" && !r.checkpoint_dir.empty());
}

Result<SequenceLayout> sequence_layout(const Graph& g, const StrategySpec& spec,
                                       bool mpi_checkpoints) {
  const int64_t cp = spec.cp.value_or(1);
  if (cp < 2 || spec.cp_layout == CpLayout::kContiguous) return SequenceLayout{};
  const bool asked = spec.cp_layout == CpLayout::kZigzag;
  auto refuse = [&](const std::string& why) -> Result<SequenceLayout> {
    if (asked) return Diagnostic("cp_layout=zigzag: " + why + "; use cp_layout=contiguous");
    return SequenceLayout{};
  };
  if (spec.pp.value_or(1) > 1) return refuse("pipeline stages (pp > 1) run the contiguous split");
  if (mpi_checkpoints)
    return refuse("checkpoints written under MPI save the ranks' tiles in the split's order");
  auto layout = zigzag_layout(g, cp);
  if (!layout.ok()) return refuse(layout.error().message);
  if (layout->positional.empty() && !asked) return SequenceLayout{};  // nothing to balance
  return layout;
}

Result<PreparedRun> prepare_run(const RunRequest& r, model::LoadedModel loaded) {
  PreparedRun p;
  p.graph = std::move(loaded.graph);
  p.weights = std::move(loaded.weights);
  auto spec = search::requested_strategy(r.mesh, r.strategy);  // the one parse of the strategy
  HEDDLE_TRY(spec);
  p.spec = std::move(*spec);
  auto pipe = pipeline_if_asked(r, p.graph, p.spec);
  HEDDLE_TRY(pipe);
  p.pipe = std::move(*pipe);
  if (p.pipe) HEDDLE_TRY(sequence_layout(r, p.graph, p.spec));  // stages run the contiguous split
  if (p.pipe && r.profile)
    return Diagnostic(
        "--profile times the programs of runs without pipeline stages; drop pp from "
        "the strategy to profile one stage's programs");
  p.model_outputs = p.graph.outputs().size();
  if (r.train) {
    TrainStepOptions options = r.optimizer;
    options.frozen.insert(loaded.constants.begin(), loaded.constants.end());
    auto step = build_train_step(p.graph, options);
    HEDDLE_TRY(step);
    p.graph = std::move(step->graph);
    p.updates = std::move(step->updates);
    // Gradients become outputs too, so the check compares them directly.
    if (r.check)
      for (const auto& u : p.updates) p.graph.add_output(u.grad);
  }
  return p;
}

CheckOptions check_options(const RunRequest& r) {
  return {.rtol = r.rtol,
          .atol = r.atol,
          .seed = r.seed,
          .adamw = r.optimizer.optimizer == TrainStepOptions::Optimizer::kAdamW};
}

ReferenceCheck make_reference(const RunRequest& r, const PreparedRun& p, TensorMap params,
                              std::vector<Tensor> inputs) {
  return ReferenceCheck(p.graph, p.updates, std::move(params), std::move(inputs), check_options(r));
}

std::function<void(int, const TensorMap&)> step_callback(const Graph& g, bool train,
                                                         StepHook hook) {
  if (!hook) return nullptr;
  return [&g, train, hook = std::move(hook)](int s, const TensorMap& got) {
    hook(s, train ? std::optional<float>(got.at(g.outputs()[0]).f32()[0]) : std::nullopt);
  };
}

LowerOptions thread_lowering() {
  // Threads share memory: the programs end without gathering sharded outputs (a ZeRO step's
  // optimizer state stays sharded), which the runner assembles from the tiles.
  LowerOptions o;
  o.replicate_outputs = false;
  return o;
}

namespace {

// The session of `p`: its pipeline, else SPMD programs (written to emit_dir). Fills the
// summary's plan fields.
Result<std::unique_ptr<Session>> make_session(const RunRequest& r, PreparedRun& p,
                                              RunSummary& summary) {
  const Graph& g = p.graph;
  if (p.pipe) {
    summary.note = p.pipe->note;
    summary.mesh = p.pipe->mesh;
    summary.strategy = p.pipe->spec.to_string();
    return std::make_unique<Session>(g, p.updates, std::move(p.pipe->program));
  }
  auto planned = search::plan_run(g, r.mesh, p.spec, r.tactics);
  HEDDLE_TRY(planned);
  auto layout = sequence_layout(r, g, planned->spec);
  HEDDLE_TRY(layout);
  auto programs = lower(with_layout(g, *layout), planned->propagation.plan, thread_lowering());
  HEDDLE_TRY(programs);
  if (!r.emit_dir.empty()) HEDDLE_TRY(write_programs(r.emit_dir, g, planned->mesh, *programs));
  summary.note = planned->note;
  summary.mesh = planned->mesh;
  summary.strategy = planned->spec.to_string();
  summary.reshards = planned->propagation.reshards.size();
  summary.split = planned->report;
  describe_split(g, summary);
  return std::make_unique<Session>(g, p.updates, std::move(*programs), std::move(*layout));
}

// The summary's program fields of a finished session.
void describe(const Graph& g, const Session& session, RunSummary& s) {
  s.peak_bytes_per_device = session.peak_bytes_per_device();  // the executor's plan
  if (const auto& P = session.pipeline()) {
    s.stats = P->stats();
    s.stages = P->stages;
    s.micro_batches = P->micro_batches;
    s.schedule = P->schedule.to_string();
    if (P->train) {
      s.recompute = std::string(to_string(P->recompute));
      s.counts = P->step_counts();
    }
  } else {
    s.stats = program_stats(g, session.programs());
    s.held_bytes_per_device = feed_bytes_per_device(g, session.programs());
    for (size_t d = 0; d < s.held_bytes_per_device.size() && d < s.peak_bytes_per_device.size();
         ++d)
      s.held_bytes_per_device[d] += s.peak_bytes_per_device[d];
  }
  s.devices_text = std::to_string(s.mesh.num_devices()) + " threads";
  s.model_name = g.name();
  s.model_ops = g.num_ops();
}

}  // namespace

Result<ThreadRun> run_threads(const RunRequest& r, PreparedRun& p, const ThreadRunHooks& hooks) {
  const Graph& g = p.graph;
  ThreadRun out;
  auto session = make_session(r, p, out.summary);
  HEDDLE_TRY(session);
  if (hooks.before_feeds) HEDDLE_TRY(hooks.before_feeds(g, **session));
  // The synthetic task: one fixed random batch (inputs and labels), learned by memorisation.
  // ONNX models bring their own weights; given inputs replace the random batch.
  Result<std::vector<Tensor>> inputs =
      hooks.inputs ? hooks.inputs(g) : random_inputs(g, r.seed + 1, integer_range(g));
  HEDDLE_TRY(inputs);
  auto checkpoints = plan_checkpoints(r, g, p.updates, out.summary, {});
  HEDDLE_TRY(checkpoints);
  std::map<ValueId, Tensor> weights = p.weights;
  if (checkpoints->resume)  // the checkpoint's parameters and optimizer state replace the initial
    for (auto& [v, t] : checkpoints->resume->tensors) weights.insert_or_assign(v, std::move(t));
  TensorMap feeds = run_feeds(g, *inputs, weights, r.seed);
  if (r.check)
    out.reference =
        std::make_unique<ReferenceCheck>(make_reference(r, p, feeds, std::move(*inputs)));
  StepLoopOptions loop;
  loop.steps = steps_of(r);
  loop.first_step = checkpoints->resume ? checkpoints->resume->step + 1 : 1;
  loop.train = r.train;
  loop.overlap_ring = r.overlap_ring;
  loop.profile = r.profile;
  loop.after_update = std::move(checkpoints->after_update);
  loop.reference = out.reference.get();
  loop.on_step = step_callback(g, r.train, hooks.on_step);
  auto ran = (*session)->run(std::move(feeds), loop);
  HEDDLE_TRY(ran);
  RunSummary& s = out.summary;
  s.digest = output_digest(g, ran->outputs);
  if (r.train) s.params_digest = params_digest(p.updates, ran->outputs);
  s.result = std::move(*ran);
  s.check = out.reference ? &out.reference->errors() : nullptr;
  describe(g, **session, s);
  if (!s.held_bytes_per_device.empty()) {
    auto predicted = predicted_peak_bytes(r, s.strategy, s.mesh.num_devices());
    if (predicted.ok())
      s.predicted_peak_bytes_per_device = std::move(*predicted);
    else
      s.no_prediction = predicted.error().message;
  }
  const Session& run = **session;
  if (r.profile && !run.instr_times().empty())
    s.profile = profile_rows(g, run.programs()[0], run.instr_times()[0]);
  return out;
}

void describe_split(const Graph& g, RunSummary& s) {
  const std::string text = s.split.to_string(g, s.mesh, 4);
  s.split_text.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    s.split_text += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) s.split_text += "           ";
  }
  s.idle_axes.clear();
  for (int64_t a : s.split.idle_axes) s.idle_axes.push_back(s.mesh.axis(a).name);
  s.unsplit_ops.clear();
  for (const UnsplitOp& u : s.split.unsplit) {
    const Op& op = g.op(u.op);
    RunSummary::UnsplitEntry e{std::string(op_kind_name(op.kind)),
                               g.value(op.results[0].value).name,
                               s.mesh.axis(u.axis).name,
                               {}};
    for (const DimVerdict& d : u.dims)
      e.dims.push_back({op.space.dim(d.dim).name, std::string(no_split_name(d.reason)), d.detail});
    s.unsplit_ops.push_back(std::move(e));
  }
}

}  // namespace heddle::driver
