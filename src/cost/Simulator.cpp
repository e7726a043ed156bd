#include "heddle/cost/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/ModelFlops.h"
#include "heddle/cost/ModelParts.h"
#include "heddle/cost/TrainingParts.h"
#include "heddle/ops/OpCost.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/ChromeTrace.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/support/Strings.h"

namespace heddle::cost {

Result<Propagation> stage_plan(const Graph& g, const Mesh& mesh, const Cluster& cluster,
                               const StrategySpec& spec) {
  StrategySpec inner = spec;
  inner.pp.reset();
  // The graph is float32; the device moves its own element size.
  AlphaBetaCost comm(cluster, mesh, cluster.device.element_bytes / 4.0);
  PropagateOptions popts;
  popts.cost = &comm;
  popts.seconds_per_flop = 1 / (cluster.device.peak_flops * cluster.device.gemm_efficiency);
  return plan_from_strategy(g, mesh, inner, popts);
}

namespace {

struct Timing {
  double fwd = 0, bwd = 0, wgrad = 0, saved = 0, comm_bytes = 0;
};

// The units per chunk of a `layers=` split: one entry per chunk, each a positive whole number of
// the model's repeating units, summing to its layers.
Result<std::vector<int64_t>> layer_split(const std::vector<int64_t>& layers,
                                         const ModelSource& model, int64_t chunks) {
  if (model.layers < 2 * model.unit)
    return Diagnostic("layers= splits a model's repeating layers over pipeline chunks; " +
                      model.name + " has none");
  if (static_cast<int64_t>(layers.size()) != chunks)
    return Diagnostic(fmt::format(
        "layers= gives {} entries but the pipeline has {} chunks (pp x the schedule's chunks per "
        "stage); give one layer count per chunk",
        layers.size(), chunks));
  std::vector<int64_t> units;
  int64_t sum = 0;
  for (int64_t n : layers) {
    if (n < model.unit || n % model.unit != 0)
      return Diagnostic(fmt::format(
          "layers= entry {} is not a positive multiple of the model's {}-layer repeating unit", n,
          model.unit));
    units.push_back(n / model.unit);
    sum += n;
  }
  if (sum != model.layers)
    return Diagnostic(
        fmt::format("layers= entries sum to {} but {} has {} layers; they must sum "
                    "to the model's layers",
                    sum, model.name, model.layers));
  return units;
}

// One pipeline stage costed on its own sub-mesh.
struct CostedStage {
  int64_t dp = 1, tp = 1;
  Mesh mesh;             ///< the stage's dp x ep x tp mesh
  bool dp_free = false;  ///< costed without its dp axis, one replica's batch
  const SimulationCache::Stage* stage = nullptr;
};

// Costs the stage of shape `shape` holding `mb` sequences per replica: its two-layer graph
// sharded on its mesh (without dp when data parallelism only splits the batch), cached.
Result<CostedStage> cost_stage(const ModelSource& model, const Cluster& cluster,
                               const StrategySpec& spec, const SimulateOptions& options,
                               const StrategySpec::StageMesh& shape, int64_t mb, bool layered,
                               std::map<std::string, SimulationCache::Stage>& local) {
  const int64_t ep = spec.ep.value_or(1), zero = spec.zero.value_or(0);
  StrategySpec inner = spec;
  inner.pp.reset();
  if (!spec.meshes.empty()) {
    inner.meshes.clear();
    inner.dp = shape.dp;
    inner.tp = shape.tp;
  }
  auto mesh = inner.mesh(shape.dp * shape.tp * ep);
  HEDDLE_TRY(mesh);
  // Data parallelism only splits the batch (unless ZeRO-3 shards parameters over it or experts
  // share the axis): the representative device's stage costs the same on the mesh without dp,
  // holding its own slice of the batch, so every dp degree shares one costing.
  const bool dp_free = shape.dp > 1 && zero < 3 && ep == 1 && model.rebuilds_batch;
  StrategySpec cost_spec = inner;
  if (dp_free) cost_spec.dp.reset();
  auto cost_mesh = cost_spec.mesh(dp_free ? shape.tp : shape.dp * shape.tp * ep);
  HEDDLE_TRY(cost_mesh);
  const int64_t cost_batch = dp_free ? mb : mb * shape.dp;
  Cluster keyed = cluster;  // a stage's costing does not depend on how many stages there are
  keyed.count = 0;
  std::string key =
      fmt::format("{}|{}|{}|{}|{}|{}|{}", model.name, keyed.hash(), cost_mesh->to_string(),
                  cost_batch, zero >= 3, spec.sp, options.planner_key);
  auto& store = options.cache ? options.cache->stages : local;
  auto it = store.find(key);
  if (it == store.end()) {
    SimulationCache::Stage fresh;
    auto g2 = model.build(layered ? 2 * model.unit : 0, cost_batch);
    HEDDLE_TRY(g2);
    std::optional<Graph> g1;
    if (layered) {
      auto one = model.build(model.unit, cost_batch);
      HEDDLE_TRY(one);
      g1 = std::move(*one);
    }
    auto prop = options.stage_planner ? options.stage_planner(*g2, *cost_mesh, inner)
                                      : stage_plan(*g2, *cost_mesh, cluster, inner);
    HEDDLE_TRY(prop);
    auto parts = cost_model_parts(*g2, *cost_mesh, *prop, cluster, g1 ? &*g1 : nullptr);
    HEDDLE_TRY(parts);
    fresh.parts = std::move(*parts);
    fresh.flops2 = graph_flops(*g2);
    fresh.flops1 = g1 ? graph_flops(*g1) : 0;
    it = store.emplace(key, std::move(fresh)).first;
  }
  return CostedStage{shape.dp, shape.tp, std::move(*mesh), dp_free, &it->second};
}

// What the executor's loads and gathers cost on the whole stage mesh (dp included), as
// `heddle run` lowers, for a forward step of `units` layer units.
Result<PartCost> executor_io_cost(const ModelSource& model, const Cluster& cluster,
                                  const StrategySpec& spec, const Mesh& mesh, int64_t batch,
                                  bool layered, int64_t units) {
  auto g2 = model.build(layered ? 2 * model.unit : 0, batch);
  HEDDLE_TRY(g2);
  auto prop = stage_plan(*g2, mesh, cluster, spec);
  HEDDLE_TRY(prop);
  auto out = cost_executor_io(*g2, mesh, *prop, cluster);
  HEDDLE_TRY(out);
  PartCost io = *out;
  if (layered && units > 2) {  // the two-unit graph's loads, plus the other units'
    auto g1 = model.build(model.unit, batch);
    HEDDLE_TRY(g1);
    auto prop1 = stage_plan(*g1, mesh, cluster, spec);
    HEDDLE_TRY(prop1);
    auto out1 = cost_executor_io(*g1, mesh, *prop1, cluster);
    HEDDLE_TRY(out1);
    io.compute_s += static_cast<double>(units - 2) * std::max(io.compute_s - out1->compute_s, 0.0);
  }
  return io;
}

// One micro-batch's blocks over the `pp` stages (chunk spans in seconds, memory in bytes):
// schedule_placement()'s forward chain or training placement, with the chunks' timings.
pipeline::Placement chunk_placement(const std::vector<Timing>& chunk, int64_t pp,
                                    const pipeline::PipelineSchedule& schedule, bool train) {
  pipeline::Placement pl = pipeline::schedule_placement(schedule, static_cast<int>(pp), train);
  const int64_t v = schedule.chunks;
  if (!train) {
    for (size_t c = 0; c < pl.blocks.size(); ++c) pl.blocks[c].span = std::max(chunk[c].fwd, 1e-12);
    return pl;
  }
  std::vector<int> fwd_seen(static_cast<size_t>(pp)), bwd_seen(static_cast<size_t>(pp)),
      w_seen(static_cast<size_t>(pp));
  const bool split_w = schedule.split_backward();
  for (auto& b : pl.blocks) {
    int d = b.devices.front();
    if (b.type == "forward") {
      const Timing& t = chunk[static_cast<size_t>(fwd_seen[d]++ * pp + d)];
      b.span = t.fwd;
      b.memory = t.saved;
    } else if (b.type == "backward") {
      int64_t c = (v - 1 - bwd_seen[d]++) * pp + d;
      const Timing& t = chunk[static_cast<size_t>(c)];
      b.span = split_w ? t.bwd - t.wgrad : t.bwd;
      b.memory = split_w ? 0 : -t.saved;
    } else {
      int64_t c = (v - 1 - w_seen[d]++) * pp + d;
      const Timing& t = chunk[static_cast<size_t>(c)];
      b.span = t.wgrad;
      b.memory = -t.saved;
    }
    b.span = std::max(b.span, 1e-12);
  }
  return pl;
}

// The Chrome trace of a simulated step: the schedule's blocks, then per stage the gradient
// reduction and optimizer step, a memory counter (states + kept activations) that Perfetto draws
// as memory over time, and each stage named with its sub-mesh.
std::string step_trace(const pipeline::Placement& pl, const pipeline::Schedule& sch,
                       const SimulationResult& res, const std::vector<double>& end,
                       const std::vector<double>& tail_sync, const std::vector<double>& tail_opt) {
  auto trace = nlohmann::json::parse(pipeline::chrome_trace_json(pl, sch));
  auto& events = trace["traceEvents"];
  for (auto& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const StageResult& s = res.stages[e["pid"].get<size_t>()];
      e["args"]["name"] = fmt::format("stage {} (dp {} x tp {}, {} devices)", e["pid"].get<int>(),
                                      s.dp, s.tp, s.devices);
    }
  for (int d = 0; d < static_cast<int>(res.stages.size()); ++d) {
    const StageResult& s = res.stages[static_cast<size_t>(d)];
    double t = end[static_cast<size_t>(d)];
    for (auto [name, dur] : {std::pair<const char*, double>{"gradient reduction", tail_sync[d]},
                             {"optimizer", tail_opt[d]}}) {
      if (dur <= 0) continue;
      events.push_back({{"name", name},
                        {"cat", "step"},
                        {"ph", "X"},
                        {"ts", t * 1e6},
                        {"dur", dur * 1e6},
                        {"pid", d},
                        {"tid", d}});
      t += dur;
    }
    std::vector<std::pair<double, int>> starts;
    for (int op = 0; op < sch.num_ops(); ++op) {
      const auto& devs = pl.blocks[static_cast<size_t>(op % sch.blocks)].devices;
      if (std::find(devs.begin(), devs.end(), d) != devs.end())
        starts.push_back({sch.start[static_cast<size_t>(op)], op});
    }
    std::sort(starts.begin(), starts.end());
    double mem = s.state_bytes;
    events.push_back({{"name", "memory (GiB)"},
                      {"ph", "C"},
                      {"ts", 0},
                      {"pid", d},
                      {"args", {{"GiB", mem / (1 << 30)}}}});
    for (auto [ts, op] : starts) {
      mem += pl.blocks[static_cast<size_t>(op % sch.blocks)].memory;
      events.push_back({{"name", "memory (GiB)"},
                        {"ph", "C"},
                        {"ts", ts * 1e6},
                        {"pid", d},
                        {"args", {{"GiB", mem / (1 << 30)}}}});
    }
  }
  return trace.dump(1);
}

}  // namespace

Result<SimulationResult> simulate(const ModelSource& model, const Cluster& cluster,
                                  const StrategySpec& given, const SimulateOptions& options) {
  if (given.auto_search)
    return Diagnostic("simulate needs explicit degrees (dp=..,tp=..,pp=..); 'auto' is for plan");
  // Equal per-stage meshes are the plain dp/tp form (one canonical string for one plan); the
  // stages are costed one by one below either way.
  const bool hetero = given.heterogeneous();
  StrategySpec spec = given.without_equal_meshes();
  const int64_t pp = spec.pp.value_or(1), ep = spec.ep.value_or(1);
  const int64_t dp = hetero ? spec.meshes.front().dp : spec.dp.value_or(1),
                tp = hetero ? spec.meshes.front().tp : spec.tp.value_or(1);
  if (hetero) {
    if (spec.devices() != cluster.count)
      return Diagnostic(fmt::format(
          "strategy {} gives its stages {} devices (the sum of each stage's dp x tp) but the "
          "cluster has {}; make the sub-meshes add up to {}",
          spec.to_string(), spec.devices(), cluster.count, cluster.count));
  } else {
    auto full_mesh = spec.mesh(cluster.count);
    HEDDLE_TRY(full_mesh);
  }
  std::vector<StrategySpec::StageMesh> shapes =
      hetero ? spec.meshes
             : std::vector<StrategySpec::StageMesh>(static_cast<size_t>(pp), {dp, tp});
  const DeviceProfile& dev = cluster.device;
  SimulationResult res;
  res.cluster_source = cluster.source;
  res.devices = cluster.count;
  res.dp = dp;
  res.tp = tp;
  res.pp = pp;
  res.heterogeneous = hetero;
  const int64_t B = model.batch;
  const bool rebuildable = model.rebuilds_batch;
  const bool layered = model.layers >= 2 * model.unit && model.layers > 0;
  if (!layered && pp > 1)
    return Diagnostic(fmt::format(
        "pp={} needs a model with repeating layers (a gpt, llama, moe or vit zoo model)", pp));
  if (hetero && (options.autodiff || options.executor_io))
    return Diagnostic(
        "per-stage sub-meshes (meshes=) are simulated with the closed-form training step and "
        "without the executor's loads; drop --autodiff / executor I/O or use equal stages");
  // Micro-batches.
  auto batching = spec.micro_batching(B, rebuildable);
  HEDDLE_TRY(batching);
  const int64_t m = batching->count, mb = batching->size;
  if (!rebuildable && m != 1)
    return Diagnostic(
        "this model is simulated as one graph: use one micro-batch (leave mb and microbatches "
        "unset)");
  res.micro_batch = mb;
  res.micro_batches = m;
  // Schedule, recomputation, ZeRO.
  const pipeline::PipelineSchedule schedule = spec.schedule.value_or(pipeline::PipelineSchedule{});
  if (schedule.kind == pipeline::ScheduleKind::kSearched)
    return Diagnostic(
        "simulate does not take schedule 'searched'; use gpipe, 1f1b, interleaved:V, zb-h1 or "
        "zb-h2");
  const int64_t v = schedule.chunks;
  res.schedule = schedule;
  res.chunks = v;
  res.recompute = spec.recompute.value_or(Recompute::kNone);
  const int64_t zero = spec.zero.value_or(0);
  if (layered && model.layers % model.unit != 0)
    return Diagnostic(fmt::format("{} layers are not a whole number of {}-layer units",
                                  model.layers, model.unit));

  // Each stage's sharded model on its own dp x ep x tp mesh (equal stages share one costing).
  std::map<std::string, SimulationCache::Stage> local;
  std::vector<CostedStage> st_of;
  for (int64_t d = 0; d < pp; ++d) {
    const auto& shape = shapes[static_cast<size_t>(d)];
    if (d > 0 && shape == shapes[static_cast<size_t>(d - 1)]) {
      st_of.push_back(st_of.back());
      continue;
    }
    auto cs = cost_stage(model, cluster, spec, options, shape, B / m / shape.dp, layered, local);
    HEDDLE_TRY(cs);
    st_of.push_back(std::move(*cs));
  }
  const CostedStage& first = st_of.front();
  const Mesh& mesh = first.mesh;
  const int64_t units = layered ? model.layers / model.unit : 0;
  const int64_t C = pp * v;
  if (layered && units < C)
    return Diagnostic(fmt::format(
        "pp={} x {} chunks needs at least {} layer units; the model has {}", pp, v, C, units));
  // Layer units per chunk: the strategy's `layers=` split, or as even as the units allow.
  std::vector<int64_t> units_on(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c)
    units_on[static_cast<size_t>(c)] = layered ? units / C + (c < units % C ? 1 : 0) : 0;
  if (!spec.layers.empty()) {
    auto split = layer_split(spec.layers, model, C);
    HEDDLE_TRY(split);
    units_on = std::move(*split);
  }

  // Per chunk forward/backward spans and saved activations.
  const bool train = options.train;
  // The autodiff step's costs; the ops outside the layers are split between the first and the
  // last chunk as the forward graph's prefix and suffix are.
  std::optional<TrainingParts> step_parts;
  if (train && options.autodiff && model.build_loss) {
    auto tp_parts =
        cost_training_parts(model, mesh, cluster, spec, mb * dp, layered, options.executor_io);
    HEDDLE_TRY(tp_parts);
    step_parts = std::move(*tp_parts);
  }
  const ModelParts& P0 = first.stage->parts;
  const double head_total = P0.prefix.compute_s + P0.suffix.compute_s;
  const double prefix_share = head_total > 0 ? P0.prefix.compute_s / head_total : 0.5;
  auto rest_share = [&](int64_t first_i, int64_t last_i, int64_t i) {
    return (i == first_i ? prefix_share : 0.0) + (i == last_i ? 1 - prefix_share : 0.0);
  };
  PartCost io;  // forward only; the training step's is in its optimizer part
  if (!train && options.executor_io) {
    auto out = executor_io_cost(model, cluster, spec, mesh, mb * dp, layered, units);
    HEDDLE_TRY(out);
    io = *out;
  }
  // A stage-to-stage send: every receiving device gets its own tile of the boundary value (its
  // stage's tiling), every sending device sends its share of all of them (the resharding between
  // the two sub-meshes); equal sub-meshes send tile to tile.
  auto stage_devices = [&](int64_t d) {
    const auto& s = shapes[static_cast<size_t>(d)];
    return s.dp * s.tp * ep;
  };
  auto send_bytes = [&](int64_t from, int64_t to) {
    double tile = st_of[static_cast<size_t>(to)].stage->parts.boundary_bytes;
    int64_t nf = stage_devices(from), nt = stage_devices(to);
    if (nf == nt) return tile;
    return std::max(tile, tile * static_cast<double>(nt) / static_cast<double>(nf));
  };
  auto send_link = [&](int64_t from, int64_t to) -> const LinkClass& {
    return cluster.stage_link(std::max(stage_devices(from), stage_devices(to)));
  };
  auto send_time = [&](int64_t from, int64_t to) {
    return collective_time(Collective::kSendRecv, 2, send_bytes(from, to), send_link(from, to));
  };
  const Recompute r = res.recompute;
  auto layer_saved_of = [&](const ModelParts& P) {
    double saved = P.layer.saved_bytes;
    if (r == Recompute::kSelective) saved -= P.layer.attention_bytes;
    if (r == Recompute::kFull) saved = P.boundary_bytes;
    return saved;
  };
  std::vector<Timing> chunk(static_cast<size_t>(C));
  double recompute_mult = r == Recompute::kFull ? 1 : 0;
  // Chunk c's timing with n layer units.
  auto time_chunk = [&](int64_t c, int64_t n) {
    const int64_t d = c % pp;
    const ModelParts& P = st_of[static_cast<size_t>(d)].stage->parts;
    Timing t;
    PartCost body = P.layer.scaled(static_cast<double>(n));
    PartCost all = body;
    if (c == 0) all = all + P.prefix;
    if (c == C - 1) all = all + P.suffix;
    t.fwd = all.compute_s + all.comm_s;
    double recompute = recompute_mult * (body.compute_s + body.comm_s);
    if (r == Recompute::kSelective) recompute = body.attention_s;
    t.wgrad = all.compute_s;
    t.bwd = 2 * all.compute_s + all.comm_s + recompute;
    t.saved = static_cast<double>(n) * layer_saved_of(P) + (c == 0 ? P.prefix.saved_bytes : 0) +
              (c == C - 1 ? P.suffix.saved_bytes : 0);
    t.comm_bytes = all.comm_bytes * (train ? 2 + recompute_mult : 1);
    if (c == C - 1) {
      t.fwd += io.compute_s + io.comm_s;
      t.comm_bytes += io.comm_bytes;
    }
    if (step_parts) {
      const TrainingParts& T = *step_parts;
      double k = static_cast<double>(n), share = rest_share(0, C - 1, c);
      PartCost f = T.fwd_layer.scaled(k) + T.fwd_rest.scaled(share);
      PartCost b = T.bwd_layer.scaled(k) + T.bwd_rest.scaled(share);
      t.fwd = f.compute_s + f.comm_s;
      t.bwd = b.compute_s + b.comm_s + recompute;
      t.wgrad = b.compute_s / 2;
      t.comm_bytes = f.comm_bytes + b.comm_bytes + recompute_mult * body.comm_bytes;
    }
    if (!options.overlap && pp > 1) {
      if (c < C - 1) t.fwd += send_time(d, (c + 1) % pp);
      if (c > 0) t.bwd += send_time(d, (c - 1) % pp);
    }
    return t;
  };
  auto span = [train](const Timing& t) { return t.fwd + (train ? t.bwd : 0); };
  for (int64_t c = 0; c < C; ++c) {
    chunk[static_cast<size_t>(c)] = time_chunk(c, units_on[static_cast<size_t>(c)]);
    const double fixed = span(time_chunk(c, 0));
    res.chunk_units.push_back(units_on[static_cast<size_t>(c)]);
    res.chunk_fixed_s.push_back(fixed);
    res.chunk_unit_s.push_back(layered ? span(time_chunk(c, 1)) - fixed : 0);
    if (layered && c == 0) res.unit_s = res.chunk_unit_s.back();
  }

  // The placement of one micro-batch, its spans in seconds and memory in bytes.
  pipeline::Placement pl = chunk_placement(chunk, pp, schedule, train);
  auto sched =
      pipeline::build_baseline(train ? schedule.baseline() : "gpipe", pl, static_cast<int>(m));
  HEDDLE_TRY(sched);
  pipeline::ScheduleStats st = pipeline::compute_stats(pl, sched->schedule);
  res.bubble_fraction = st.bubble_fraction;
  res.events = static_cast<int64_t>(m) * static_cast<int64_t>(pl.blocks.size()) + 2 * pp;
  std::vector<double> end(static_cast<size_t>(pp), 0);
  for (int mi = 0; mi < static_cast<int>(m); ++mi)
    for (int b = 0; b < static_cast<int>(pl.blocks.size()); ++b)
      for (int d : pl.blocks[b].devices)
        end[d] = std::max(end[d], sched->schedule.at(mi, b) + pl.blocks[b].span);

  // Per stage: parameters, memory, gradient reduction and the optimizer step, each on the
  // stage's own sub-mesh.
  BytesMovedCost moved;
  double step = 0, comm_max = 0;
  std::vector<double> tail_sync(static_cast<size_t>(pp)), tail_opt(static_cast<size_t>(pp));
  for (int64_t d = 0; d < pp; ++d) {
    const CostedStage& cs = st_of[static_cast<size_t>(d)];
    const ModelParts& P = cs.stage->parts;
    const int64_t dp_d = cs.dp;
    AlphaBetaCost comm(cluster, cs.mesh);
    const int64_t dp_axis = cs.mesh.find("dp"), tp_axis = cs.mesh.find("tp");
    const LinkClass& dp_link = dp_axis >= 0 ? comm.link(dp_axis) : cluster.intra_node;
    const LinkClass& tp_link = tp_axis >= 0 ? comm.link(tp_axis) : dp_link;
    StageResult s;
    s.dp = dp_d;
    s.tp = cs.tp;
    s.devices = stage_devices(d);
    s.micro_batch = B / m / dp_d;
    if (!rebuildable) s.micro_batch = mb;
    double params = 0, tp_bytes = 0;
    for (int64_t c = d; c < C; c += pp) {
      s.layers += units_on[static_cast<size_t>(c)] * model.unit;
      params += static_cast<double>(units_on[static_cast<size_t>(c)]) * P.layer.param_elements;
      tp_bytes += chunk[static_cast<size_t>(c)].comm_bytes * static_cast<double>(m);
    }
    if (d == 0) params += P.prefix.param_elements;
    if (d == pp - 1) params += P.suffix.param_elements - (pp == 1 ? P.shared_param_elements : 0);
    s.parameters = params;
    double grad_bytes = params * dev.element_bytes, sync = 0, opt = 0, dp_bytes = 0;
    if (train) {
      s.state_bytes = model_state_bytes(params, zero, dp_d);
      double factor = zero == 3 ? 1.5 : 1.0;
      sync = factor * collective_time(Collective::kAllReduce, dp_d, grad_bytes, dp_link);
      dp_bytes = dp_d > 1 ? factor * moved.cost(Collective::kAllReduce, 0, dp_d, grad_bytes) : 0;
      if (options.overlap) sync /= static_cast<double>(std::max<int64_t>(s.layers, 1));
      double owned = zero >= 1 ? params / static_cast<double>(dp_d) : params;
      opt = owned * 32 / (dev.memory_bandwidth * dev.memory_efficiency);
      if (step_parts) {
        // The step's own updates and the gradient reductions before them.
        int64_t units_here = s.layers / model.unit;
        PartCost o = step_parts->opt_layer.scaled(static_cast<double>(units_here)) +
                     step_parts->opt_rest.scaled(rest_share(0, pp - 1, d));
        sync = o.comm_s;
        dp_bytes = o.comm_bytes;
        if (options.overlap) sync /= static_cast<double>(std::max<int64_t>(s.layers, 1));
        opt = o.compute_s;
      }
    } else {
      s.state_bytes = params * dev.element_bytes;
    }
    double transient = r == Recompute::kFull        ? P.layer.saved_bytes
                       : r == Recompute::kSelective ? P.layer.attention_bytes
                                                    : 0;
    if (!train) transient = P.layer.saved_bytes + P.prefix.saved_bytes + P.suffix.saved_bytes;
    s.activation_bytes = st.peak_memory[static_cast<size_t>(d)] + transient;
    s.peak_memory_bytes = s.state_bytes + s.activation_bytes;
    const double mv = static_cast<double>(m * v);
    double p2p_bytes = pp > 1 ? send_bytes(d, (d + 1) % pp) * mv +
                                    (train ? send_bytes(d, (d + pp - 1) % pp) * mv : 0)
                              : 0;
    res.link_bytes[tp_link.name] += 0;
    double total = tp_bytes + dp_bytes + p2p_bytes;
    if (total >= comm_max) {
      comm_max = total;
      res.link_bytes.clear();
      if (tp_bytes > 0) res.link_bytes[tp_link.name] += tp_bytes;
      if (dp_bytes > 0) res.link_bytes[dp_link.name] += dp_bytes;
      if (p2p_bytes > 0) res.link_bytes[send_link(d, (d + 1) % pp).name] += p2p_bytes;
    }
    tail_sync[static_cast<size_t>(d)] = sync;
    tail_opt[static_cast<size_t>(d)] = opt;
    double finish = end[static_cast<size_t>(d)] + sync + opt;
    step = std::max(step, finish);
    res.dp_sync_s = std::max(res.dp_sync_s, sync);
    s.busy_s = st.busy[static_cast<size_t>(d)] + sync + opt;
    res.peak_memory_bytes = std::max(res.peak_memory_bytes, s.peak_memory_bytes);
    res.stages.push_back(s);
  }
  for (auto& s : res.stages) {
    s.idle_s = std::max(step - s.busy_s, 0.0);
    res.energy_j +=
        static_cast<double>(s.devices) * (s.busy_s * dev.tdp_watts + s.idle_s * dev.idle_watts);
  }
  res.step_time_s = step;
  res.comm_bytes = comm_max;
  res.memory_limit_bytes = dev.memory_bytes;
  res.feasible = res.peak_memory_bytes <= res.memory_limit_bytes;
  // Model FLOPs.
  if (model.gpt) {
    res.model_flops = gpt_model_flops(*model.gpt, B, train, r == Recompute::kFull);
  } else {
    double fwd = first.stage->flops2;
    if (layered) fwd += static_cast<double>(units - 2) * (fwd - first.stage->flops1);
    if (first.dp_free) fwd *= static_cast<double>(dp);  // the costed graph held one replica's batch
    res.model_flops = fwd * static_cast<double>(m) * (train ? 3 : 1);
  }
  res.tflops_per_device = res.model_flops / step / static_cast<double>(res.devices) / 1e12;
  res.mfu = res.tflops_per_device * 1e12 / dev.peak_flops;
  // The canonical strategy string.
  StrategySpec canon;
  if (hetero) {
    canon.pp = pp;
    canon.meshes = shapes;
    canon.microbatches = m;
  } else {
    canon.dp = dp;
    canon.tp = tp;
    canon.pp = pp;
    canon.micro_batch = mb;
  }
  if (ep > 1) canon.ep = ep;
  canon.zero = zero;
  canon.schedule = schedule;
  canon.recompute = r;
  canon.sp = spec.sp;
  canon.layers = spec.layers;
  res.strategy = canon.to_string();
  if (options.trace)
    res.trace_json = step_trace(pl, sched->schedule, res, end, tail_sync, tail_opt);
  return res;
}

}  // namespace heddle::cost
