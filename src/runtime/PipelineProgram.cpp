#include "heddle/runtime/PipelineProgram.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Ops.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/runtime/PipelineRecompute.h"
#include "heddle/runtime/StageSplit.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {

namespace {

constexpr const char* kGradPrefix = "pipe_grad.";

ValueId id_of(const Graph& g, const std::string& name) {
  auto v = g.find_value(name);
  HEDDLE_ASSERT(v.has_value()) << "no value '" << name << "' in " << g.name();
  return *v;
}

// The ops `ops` (ascending) of `model` as a graph of their own: model inputs and parameters they
// read stay inputs and parameters; values made by other ops become parameters (integer ones
// inputs) of the same name. Names are kept.
Graph sub_graph(const Graph& model, const std::vector<OpId>& ops, const std::string& name) {
  Graph out(name);
  std::map<ValueId, ValueId> remap;
  for (OpId i : ops) {
    Op op = model.op(i);
    for (auto& in : op.inputs) {
      auto it = remap.find(in.value);
      if (it == remap.end()) {
        const Value& v = model.value(in.value);
        bool as_input = v.role == ValueRole::kInput ||
                        (v.role == ValueRole::kResult && !dtype_is_float(v.type.dtype()));
        ValueId id = as_input ? out.add_input(v.name, v.type) : out.add_param(v.name, v.type);
        it = remap.emplace(in.value, id).first;
      }
      in.value = it->second;
    }
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (const auto& r : op.results) {
      names.push_back(model.value(r.value).name);
      types.push_back(model.type(r.value));
    }
    std::vector<ValueId> old;
    for (const auto& r : op.results) old.push_back(r.value);
    auto ids = out.add_op(std::move(op), names, types);
    for (size_t k = 0; k < ids.size(); ++k) remap[old[k]] = ids[k];
  }
  return out;
}

// The ops [begin, end) of `model` (see sub_graph).
Graph chunk_graph(const Graph& model, int64_t begin, int64_t end, const std::string& name) {
  std::vector<OpId> ops;
  for (OpId i = static_cast<OpId>(begin); i < end; ++i) ops.push_back(i);
  return sub_graph(model, ops, name);
}

// A backward part of a chunk: the ops of `gg` (the chunk's forward, its first `forward_ops`
// ops, then its loss and gradient ops) the values `outputs` (by name) need, with those as its
// outputs, except ops marked in `stashed`: the values of those it reads become parameters
// (integer ones inputs) of the same name, added to `taken`. Marks the ops it computes in
// `stashed` (a later part reads them from this one); `recomputed` gets the ops of the part that
// recompute a forward op.
Graph backward_part(const Graph& gg, int64_t forward_ops, const std::vector<std::string>& outputs,
                    const std::string& name, std::vector<bool>& stashed,
                    std::set<std::string>& taken, std::vector<OpId>& recomputed) {
  std::vector<bool> need(static_cast<size_t>(gg.num_ops()), false);
  std::vector<ValueId> stack;
  for (const auto& n : outputs) stack.push_back(id_of(gg, n));
  while (!stack.empty()) {
    const Value& v = gg.value(stack.back());
    stack.pop_back();
    if (v.role != ValueRole::kResult || need[static_cast<size_t>(v.producer)]) continue;
    if (stashed[static_cast<size_t>(v.producer)]) {
      taken.insert(v.name);
      continue;
    }
    need[static_cast<size_t>(v.producer)] = true;
    for (const auto& in : gg.op(v.producer).inputs) stack.push_back(in.value);
  }
  std::vector<OpId> ops;
  for (OpId i = 0; i < gg.num_ops(); ++i)
    if (need[static_cast<size_t>(i)]) {
      if (i < forward_ops) recomputed.push_back(static_cast<OpId>(ops.size()));
      ops.push_back(i);
      stashed[static_cast<size_t>(i)] = true;
    }
  Graph out = sub_graph(gg, ops, name);
  for (const auto& n : outputs) out.add_output(id_of(out, n));
  return out;
}

// The tactics that concern block `g`: those naming a value of it (an op tactic: a value an op
// of it defines).
std::vector<Tactic> block_tactics(const Graph& g, const std::vector<Tactic>& tactics) {
  std::vector<Tactic> out;
  for (const Tactic& t : tactics) {
    auto v = g.find_value(t.value);
    if (!v) continue;
    const bool of_op = t.kind == Tactic::Kind::kSplitOp || t.kind == Tactic::Kind::kReplicateOp;
    if (of_op && g.value(*v).role != ValueRole::kResult) continue;
    out.push_back(t);
  }
  return out;
}

// The stage strategy's pins, plus: every parameter standing for an activation (a value received
// from another chunk, or its gradient) whose dim 0 is the micro-batch is split over dp like the
// model inputs, so data parallelism inside a stage splits the chunk's work; then the tactics.
Result<Propagation> plan_block(const Graph& g, const Mesh& mesh, const StrategySpec& inner,
                               const std::set<std::string>& activations, int64_t batch,
                               const std::vector<Tactic>& tactics) {
  std::set<ValueId> received;
  for (ValueId v : g.params())
    if (activations.count(g.value(v).name)) received.insert(v);
  Pins pins;
  if (inner.devices() > 1) {
    auto p = tactic_pins(g, mesh, inner, received);
    HEDDLE_TRY(p);
    pins = std::move(*p);
  }
  pins.activation_params = received;
  int64_t dp = mesh.find("dp");
  if (dp >= 0 && mesh.size(dp) > 1 && batch > 0)
    for (ValueId v : g.params()) {
      const TensorType& t = g.type(v);
      if (!activations.count(g.value(v).name) || t.rank() == 0 || t.shape()[0] != batch ||
          batch % mesh.size(dp) != 0)
        continue;
      pins.values[v] = TensorSharding::replicated(mesh.rank()).with(dp, Placement::shard(0));
    }
  if (inner.devices() > 1) {
    auto tacticed = apply_tactics(g, mesh, std::move(pins), block_tactics(g, tactics),
                                  "--strategy " + inner.to_string() + " (a stage's strategy)");
    HEDDLE_TRY(tacticed);
    pins = std::move(*tacticed);
  }
  auto p = propagate(g, mesh, pins);
  if (p.ok() && inner.ring_cp()) p->plan.ring_axis = mesh.find("cp");
  return p;
}

// Lowers a chunk's block; `param_shardings` gains the pinned placement of every parameter it
// does not hold yet (so the first block reading a parameter decides).
Result<StageBlock> lower_block(Graph g, const Mesh& mesh, const StrategySpec& inner,
                               const std::set<std::string>& activations, int64_t batch,
                               const std::vector<Tactic>& tactics,
                               std::map<std::string, TensorSharding>& param_shardings) {
  auto plan = plan_block(g, mesh, inner, activations, batch, tactics);
  if (!plan.ok()) return Diagnostic("pipeline chunk " + g.name() + ": " + plan.error().message);
  // Where each parameter starts, as lowering loads it: its pin, else its first reader's wish.
  for (OpId i = 0; i < g.num_ops(); ++i) {
    const Op& op = g.op(i);
    std::optional<StrategyPlacements> pl;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const Value& val = g.value(op.inputs[k].value);
      if (val.role != ValueRole::kParam || activations.count(val.name) ||
          param_shardings.count(val.name))
        continue;
      if (auto pin = plan->plan.pinned.find(op.inputs[k].value); pin != plan->plan.pinned.end()) {
        param_shardings.emplace(val.name, pin->second);
        continue;
      }
      if (!pl) {
        auto derived = derive_placements(g, i, mesh, plan->plan.ops[static_cast<size_t>(i)]);
        if (!derived.ok())
          return Diagnostic("pipeline chunk " + g.name() + ": " + derived.error().message);
        pl = std::move(*derived);
      }
      param_shardings.emplace(val.name, pl->inputs[k].sharding);
    }
  }
  auto programs = lower(g, plan->plan);
  if (!programs.ok())
    return Diagnostic("pipeline chunk " + g.name() + ": " + programs.error().message);
  return StageBlock{std::move(g), std::move(*programs), {}};
}

// The optimizer step of `owned` parameters as a training step of the surrogate loss
// sum(p * pipe_grad.p), whose gradient with respect to p is exactly pipe_grad.p. A parameter
// its chunks split (per `shardings`) is updated, with its gradient and state, in that placement,
// so a device holds only its tiles; one they replicate is left to propagation, which splits the
// update (and so the optimizer state) over the stage's devices where that is cheaper.
Result<std::pair<StageBlock, std::vector<ParamUpdate>>> optimizer_block(
    const std::vector<std::string>& owned, const std::map<std::string, TensorType>& types,
    const std::map<std::string, TensorSharding>& shardings, const Mesh& mesh,
    const TrainStepOptions& options, int64_t stage) {
  Graph g("optimizer" + std::to_string(stage));
  Ops o(g);
  ValueId total = kNoValue;
  for (const auto& p : owned) {
    const TensorType& t = types.at(p);
    ValueId prod = o.mul(o.param(p, t), o.input(kGradPrefix + p, t));
    std::vector<int64_t> axes(static_cast<size_t>(t.rank()));
    std::iota(axes.begin(), axes.end(), 0);
    if (t.rank() > 0) prod = o.reduce(OpKind::kReduceSum, prod, axes);
    total = total == kNoValue ? prod : o.add(total, prod);
  }
  o.output(total);
  if (!o.ok()) return o.status().error();
  auto step = build_train_step(g, options);
  HEDDLE_TRY(step);
  Pins pins;
  for (const auto& u : step->updates) {
    const std::string& p = step->graph.value(u.param).name;
    auto it = shardings.find(p);
    if (it == shardings.end() || it->second == TensorSharding::replicated(mesh.rank())) continue;
    pins.values[u.param] = it->second;
    pins.values[id_of(step->graph, kGradPrefix + p)] = it->second;
    for (const auto& st : u.state) pins.values[st.first] = it->second;
  }
  auto plan = propagate(step->graph, mesh, pins);
  HEDDLE_TRY(plan);
  auto programs = lower(step->graph, plan->plan);
  HEDDLE_TRY(programs);
  return std::make_pair(StageBlock{std::move(step->graph), std::move(*programs), {}},
                        std::move(step->updates));
}

// Per stage, its steps in the order `schedule` starts them.
std::vector<std::vector<PipelineStep>> stage_orders(const pipeline::BlockPlacement& pl,
                                                    const pipeline::Schedule& s, int64_t chunks,
                                                    int64_t stages) {
  // Forward blocks visit chunks 0..C-1 in block order, backward blocks C-1..0; a zero-bubble
  // placement's weight-gradient blocks are one per stage (C == stages).
  std::vector<PipelineStep> of_block;
  int64_t f = 0, b = 0;
  for (const auto& blk : pl.blocks) {
    if (blk.type == "weight-grad") {
      HEDDLE_ASSERT(blk.devices.size() == 1 && chunks == stages) << "block " << blk.name;
      of_block.push_back({0, blk.devices[0], true, true});
      continue;
    }
    bool back = blk.type != "forward";
    int64_t c = back ? chunks - 1 - b++ : f++;
    HEDDLE_ASSERT(blk.devices.size() == 1 && blk.devices[0] == c % stages)
        << "block " << blk.name << " is not on the stage of chunk " << c;
    of_block.push_back({0, c, back});
  }
  std::vector<std::vector<std::pair<double, int>>> starts(static_cast<size_t>(stages));
  for (int op = 0; op < s.num_ops(); ++op) {
    int block = op % s.blocks;
    starts[static_cast<size_t>(pl.blocks[block].devices[0])].push_back({s.start[op], op});
  }
  std::vector<std::vector<PipelineStep>> order(static_cast<size_t>(stages));
  for (int64_t d = 0; d < stages; ++d) {
    auto& st = starts[static_cast<size_t>(d)];
    std::sort(st.begin(), st.end());
    for (auto [t, op] : st) {
      PipelineStep step = of_block[static_cast<size_t>(op % s.blocks)];
      step.micro = op / s.blocks;
      order[static_cast<size_t>(d)].push_back(step);
    }
  }
  return order;
}

}  // namespace

std::vector<std::string> PipelineProgram::stage_params(int64_t s) const {
  std::set<std::string> names;
  for (const auto& c : chunks)
    if (c.stage == s) names.insert(c.params.begin(), c.params.end());
  if (train)
    for (const auto& u : updates[s])
      for (const auto& st : u.state) names.insert(optimizer[s].graph.value(st.first).name);
  return {names.begin(), names.end()};
}

ProgramStats PipelineProgram::stats() const {
  ProgramStats total;
  auto add = [&](const StageBlock& b) {
    if (b.programs.empty()) return;
    ProgramStats s = program_stats(b.graph, b.programs);
    total.kernels += s.kernels;
    total.fused += s.fused;
    total.collectives += s.collectives;
    total.fetches += s.fetches;
    total.comm_bytes += s.comm_bytes;
  };
  for (const auto& c : chunks) {
    add(c.forward);
    add(c.backward);
    add(c.weight);
  }
  for (const auto& o : optimizer) add(o);
  return total;
}

int64_t PipelineProgram::stage_of_device(int64_t d) const {
  HEDDLE_ASSERT(d >= 0 && d < num_devices()) << "device " << d;
  return static_cast<int64_t>(std::upper_bound(stage_first.begin(), stage_first.end(), d) -
                              stage_first.begin()) -
         1;
}

PipelineCounts PipelineProgram::step_counts() const {
  PipelineCounts n;
  auto add = [&](const StageBlock& b) {
    for (const DeviceProgram& p : b.programs)
      for (const Instr& in : p.instrs)
        for (const KernelCall& call : in.calls) {
          ++n.kernel_calls;
          if (std::binary_search(b.recomputed.begin(), b.recomputed.end(), call.op))
            ++n.recompute_calls;
        }
  };
  for (int64_t s = 0; s < stages; ++s) {
    for (const PipelineStep& st : order[static_cast<size_t>(s)]) {
      const PipelineChunk& c = chunks[static_cast<size_t>(st.chunk)];
      add(st.weight ? c.weight : st.backward ? c.backward : c.forward);
    }
    if (train) add(optimizer[static_cast<size_t>(s)]);
  }
  return n;
}

std::map<std::string, Box> PipelineProgram::device_loads(int64_t device) const {
  const int64_t s = stage_of_device(device), local = device - stage_first[s];
  std::vector<std::string> held = stage_params(s);
  std::map<std::string, Box> boxes;
  auto add = [&](const StageBlock& b) {
    if (b.programs.empty()) return;
    for (const auto& [v, box] : load_hulls(b.programs[static_cast<size_t>(local)])) {
      const std::string& n = b.graph.value(v).name;
      if (!input_types.count(n) && !std::binary_search(held.begin(), held.end(), n)) continue;
      auto [it, fresh] = boxes.emplace(n, box);
      if (!fresh) it->second = box_hull(it->second, box);
    }
  };
  for (const auto& c : chunks)
    if (c.stage == s) {
      add(c.forward);
      add(c.backward);
      add(c.weight);
    }
  if (train) add(optimizer[static_cast<size_t>(s)]);
  return boxes;
}

Box PipelineProgram::receive_box(size_t edge, int64_t local, bool grad) const {
  const PipelineEdge& e = edges[edge];
  const std::string name = grad ? kGradPrefix + e.value : e.value;
  Box box;
  bool any = false;
  auto add = [&](const StageBlock& b) {
    if (b.programs.empty()) return;
    auto v = b.graph.find_value(name);
    if (!v) return;
    auto hulls = load_hulls(b.programs[static_cast<size_t>(local)]);
    if (auto it = hulls.find(*v); it != hulls.end()) {
      box = any ? box_hull(box, it->second) : it->second;
      any = true;
    }
  };
  const PipelineChunk& reader = chunks[static_cast<size_t>(grad ? e.from : e.to)];
  if (!grad) add(reader.forward);
  add(reader.backward);
  add(reader.weight);
  if (any) return box;
  // Nothing loads it (a block that never reads it): the whole value keeps both sides simple.
  const Graph& sender = chunks[static_cast<size_t>(e.from)].forward.graph;
  return Box::of_shape(sender.type(id_of(sender, e.value)).shape());
}

bool PipelineProgram::carries_grad(size_t edge) const {
  const PipelineEdge& e = edges[edge];
  const Graph& sender = chunks[static_cast<size_t>(e.from)].forward.graph;
  return train && dtype_is_float(sender.type(id_of(sender, e.value)).dtype());
}

Result<PipelineProgram> build_pipeline(const Graph& model, const PipelineOptions& options) {
  HEDDLE_ASSERT(options.stages >= 1 && options.micro_batches >= 1);
  PipelineProgram P;
  P.stages = options.stages;
  P.micro_batches = options.micro_batches;
  P.train = options.train;
  // The schedule and chunks per stage.
  if (options.schedule.kind == pipeline::ScheduleKind::kSearched)
    return Diagnostic(
        "the runtime runs pipelines with schedule gpipe, 1f1b, interleaved:V, zb-h1 "
        "or zb-h2; 'searched' is for heddle simulate and heddle schedule");
  const int64_t v = options.schedule.chunks;
  P.schedule = options.train ? options.schedule
                             : pipeline::PipelineSchedule{pipeline::ScheduleKind::kGpipe, 1};
  P.split_backward = P.schedule.split_backward();
  P.recompute = options.recompute;
  const int64_t C = P.stages * v;

  // Each stage's strategy and sub-mesh.
  if (!options.inner.meshes.empty() &&
      static_cast<int64_t>(options.inner.meshes.size()) != P.stages)
    return Diagnostic("meshes= gives " + std::to_string(options.inner.meshes.size()) +
                      " stage meshes for " + std::to_string(P.stages) + " stages");
  std::vector<StrategySpec> inners;
  P.stage_first.push_back(0);
  for (int64_t s = 0; s < P.stages; ++s) {
    StrategySpec inner = options.inner;
    inner.pp.reset();
    inner.layers.clear();
    if (!inner.meshes.empty()) {
      inner.dp = inner.meshes[s].dp;
      inner.tp = inner.meshes[s].tp;
      inner.meshes.clear();
    }
    auto mesh = inner.mesh(inner.devices());
    HEDDLE_TRY(mesh);
    P.stage_meshes.push_back(*mesh);
    P.stage_first.push_back(P.stage_first.back() + inner.devices());
    inners.push_back(std::move(inner));
  }
  P.stage_mesh = P.stage_meshes[0];
  P.stage_devices = P.devices_of(0);
  for (int64_t s = 1; s < P.stages; ++s)
    if (P.devices_of(s) != P.stage_devices) P.stage_devices = 0;

  for (const Tactic& t : options.tactics)  // a chunk may miss a value; the model may not
    if (!model.find_value(t.value))
      return Diagnostic(t.source + ": " + value_ref(t.value) + " is not a value of " +
                        model.name());
  auto starts = split_stages(model, C, options.layers);
  HEDDLE_TRY(starts);
  std::vector<int64_t> chunk_of(static_cast<size_t>(model.num_ops()));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = (*starts)[c]; i < (*starts)[c + 1]; ++i) chunk_of[i] = c;
  std::vector<std::set<std::string>> received(static_cast<size_t>(C));
  std::set<std::pair<ValueId, int64_t>> edge_seen;
  std::map<std::string, int64_t> first_reader;  // parameter -> first chunk reading it
  for (OpId i = 0; i < model.num_ops(); ++i) {
    int64_t c = chunk_of[i];
    for (const auto& in : model.op(i).inputs) {
      const Value& val = model.value(in.value);
      if (val.role == ValueRole::kParam) first_reader.emplace(val.name, c);
      if (val.role != ValueRole::kResult) continue;
      int64_t from = chunk_of[val.producer];
      if (from == c || !edge_seen.insert({in.value, c}).second) continue;
      P.edges.push_back({val.name, from, c});
      received[c].insert(val.name);
    }
  }
  std::sort(P.edges.begin(), P.edges.end(), [](const PipelineEdge& a, const PipelineEdge& b) {
    return std::tie(a.from, a.to, a.value) < std::tie(b.from, b.to, b.value);
  });
  for (ValueId p : model.params()) P.param_types.emplace(model.value(p).name, model.type(p));
  for (ValueId x : model.inputs()) P.input_types.emplace(model.value(x).name, model.type(x));
  for (ValueId o : model.outputs()) P.output_names.push_back(model.value(o).name);
  const int64_t batch = model.inputs().empty() || model.type(model.inputs()[0]).rank() == 0
                            ? 0
                            : model.type(model.inputs()[0]).shape()[0];

  std::map<std::string, TensorSharding> shardings;  // parameter -> placement where first read
  for (int64_t c = 0; c < C; ++c) {
    PipelineChunk ch;
    ch.stage = c % P.stages;
    std::string name = model.name() + ".chunk" + std::to_string(c);
    Graph fwd = chunk_graph(model, (*starts)[c], (*starts)[c + 1], name);
    for (ValueId x : fwd.inputs())
      if (P.input_types.count(fwd.value(x).name)) ch.inputs.push_back(fwd.value(x).name);
    for (ValueId p : fwd.params())
      if (P.param_types.count(fwd.value(p).name)) ch.params.push_back(fwd.value(p).name);
    for (const auto& o : P.output_names)
      if (auto id = fwd.find_value(o); id && fwd.value(*id).role == ValueRole::kResult)
        ch.outputs.push_back(o);
    std::vector<std::string> sent;
    for (const auto& e : P.edges)
      if (e.from == c && std::find(sent.begin(), sent.end(), e.value) == sent.end())
        sent.push_back(e.value);
    for (const auto& s : sent) fwd.add_output(id_of(fwd, s));
    for (const auto& o : ch.outputs)
      if (std::find(sent.begin(), sent.end(), o) == sent.end()) fwd.add_output(id_of(fwd, o));
    std::set<std::string> activations = received[c];
    // Training: the backward parts (whole, or B and W for zero-bubble), built before the forward
    // is lowered since the forward outputs what they read of it (the stash).
    struct Part {
      Graph graph;
      StageBlock* block;
      std::vector<OpId> recomputed;
    };
    std::vector<Part> parts;
    if (P.train) {
      // The chunk's loss: its share of the model loss and the sum of v * dL/dv over its sends.
      Graph bwd = chunk_graph(model, (*starts)[c], (*starts)[c + 1], name + ".backward");
      Ops o(bwd);
      ValueId total = kNoValue;
      auto add = [&](ValueId t) { total = total == kNoValue ? t : o.add(total, t); };
      for (const auto& s : sent) {
        ValueId x = id_of(bwd, s);
        const TensorType t = bwd.type(x);  // a copy: adding the parameter below grows the values
        if (!dtype_is_float(t.dtype())) continue;
        activations.insert(kGradPrefix + s);
        ValueId prod = o.mul(x, o.param(kGradPrefix + s, t));
        std::vector<int64_t> axes(static_cast<size_t>(t.rank()));
        std::iota(axes.begin(), axes.end(), 0);
        add(t.rank() > 0 ? o.reduce(OpKind::kReduceSum, prod, axes) : prod);
      }
      for (const auto& out : ch.outputs)
        add(o.scale(id_of(bwd, out), 1.0 / static_cast<double>(P.micro_batches)));
      if (total == kNoValue)
        return Diagnostic("pipeline chunk " + name + " contributes nothing to the loss");
      o.output(total);
      if (!o.ok()) return Diagnostic("pipeline chunk " + name + ": " + o.status().error().message);
      auto grads = build_gradients(bwd, total);
      if (!grads.ok()) return Diagnostic("pipeline chunk " + name + ": " + grads.error().message);
      const Graph& gg = grads->graph;
      const int64_t forward_ops = (*starts)[c + 1] - (*starts)[c];
      // Ops whose results a part reads instead of computing: the forward's, except those the
      // recompute mode recomputes; then (zero-bubble) B's for W.
      std::vector<bool> stashed(static_cast<size_t>(gg.num_ops()), false);
      const std::vector<bool> recompute =
          recomputed_forward_ops(gg, forward_ops, options.recompute);
      for (int64_t i = 0; i < forward_ops; ++i) stashed[i] = !recompute[i];
      // Gradient names: the whole backward's, or B's (received values) and W's (parameters).
      std::vector<std::string> of_b, of_w;
      std::vector<std::string> b_keys, w_keys;
      for (auto [p, grad] : grads->grads) {
        const std::string& pn = gg.value(p).name;
        if (pn.rfind(kGradPrefix, 0) == 0) continue;
        const bool w = P.split_backward && P.param_types.count(pn);
        (w ? w_keys : b_keys).push_back(pn);
        (w ? of_w : of_b).push_back(gg.value(grad).name);
      }
      std::set<std::string> from_forward, from_b;
      auto part = [&](const std::vector<std::string>& keys, const std::vector<std::string>& outs,
                      const std::string& suffix, StageBlock& block,
                      std::vector<std::pair<std::string, ValueId>>& named) {
        if (outs.empty()) return;  // a block with nothing to compute has no programs
        Part pt{Graph(""), &block, {}};
        std::set<std::string> taken;
        pt.graph =
            backward_part(gg, forward_ops, outs, name + suffix, stashed, taken, pt.recomputed);
        for (size_t k = 0; k < keys.size(); ++k)
          named.push_back({keys[k], id_of(pt.graph, outs[k])});
        for (const auto& v : taken) {
          const Value& val = gg.value(id_of(gg, v));
          const bool forward = val.producer < forward_ops && !recompute[val.producer];
          (forward ? from_forward : from_b).insert(v);
        }
        parts.push_back(std::move(pt));
      };
      part(b_keys, of_b, ".backward", ch.backward, ch.grads);
      part(w_keys, of_w, ".weight", ch.weight, ch.weight_grads);
      for (const auto& v : from_forward) {
        ch.stashed.push_back(v);
        activations.insert(v);
        if (std::find(fwd.outputs().begin(), fwd.outputs().end(), id_of(fwd, v)) ==
            fwd.outputs().end())
          fwd.add_output(id_of(fwd, v));
      }
      // What W reads of B's results: B outputs it too.
      for (const auto& v : from_b) {
        HEDDLE_ASSERT(parts.size() == 2) << v;
        Graph& bg = parts[0].graph;
        ch.backward_stashed.push_back(v);
        activations.insert(v);
        if (std::find(bg.outputs().begin(), bg.outputs().end(), id_of(bg, v)) == bg.outputs().end())
          bg.add_output(id_of(bg, v));
      }
    }
    const Mesh& mesh = P.stage_meshes[static_cast<size_t>(ch.stage)];
    const StrategySpec& inner = inners[static_cast<size_t>(ch.stage)];
    auto f =
        lower_block(std::move(fwd), mesh, inner, received[c], batch, options.tactics, shardings);
    HEDDLE_TRY(f);
    ch.forward = std::move(*f);
    for (Part& pt : parts) {
      auto b = lower_block(std::move(pt.graph), mesh, inner, activations, batch, options.tactics,
                           shardings);
      HEDDLE_TRY(b);
      *pt.block = std::move(*b);
      pt.block->recomputed = std::move(pt.recomputed);
    }
    P.chunks.push_back(std::move(ch));
  }

  if (P.train) {
    P.owned.resize(static_cast<size_t>(P.stages));
    P.optimizer.resize(static_cast<size_t>(P.stages));
    P.updates.resize(static_cast<size_t>(P.stages));
    // The parameters the loss reaches, as the whole model's training step has them.
    auto whole = build_gradients(model, model.outputs()[0]);
    if (!whole.ok()) return whole.error();
    for (auto [p, grad] : whole->grads) {
      const std::string& n = model.value(p).name;
      if (auto it = first_reader.find(n); it != first_reader.end())
        P.owned[static_cast<size_t>(P.stage_of(it->second))].push_back(n);
    }
    for (int64_t s = 0; s < P.stages; ++s) {
      if (P.owned[s].empty()) continue;
      auto ob = optimizer_block(P.owned[s], P.param_types, shardings, P.stage_meshes[s],
                                options.optimizer, s);
      HEDDLE_TRY(ob);
      P.optimizer[s] = std::move(ob->first);
      P.updates[s] = std::move(ob->second);
    }
  }

  // The schedule: training runs forward-backward V-shapes (interleaved: V passes over the
  // stages); forward-only runs the chain of forward blocks.
  const pipeline::BlockPlacement pl =
      pipeline::schedule_placement(options.schedule, static_cast<int>(P.stages), P.train);
  auto sched =
      pipeline::build_baseline(P.schedule.baseline(), pl, static_cast<int>(P.micro_batches));
  if (!sched.ok())
    return Diagnostic("schedule " + P.schedule.to_string() + " with " +
                      std::to_string(P.micro_batches) + " micro-batches: " + sched.error().message);
  P.order = stage_orders(pl, sched->schedule, C, P.stages);
  return P;
}

}  // namespace heddle
