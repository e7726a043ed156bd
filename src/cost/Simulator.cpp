#include "heddle/cost/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
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

namespace heddle::cost {

Result<ModelSource> zoo_model_source(const std::string& name, const zoo::ZooOverrides& over) {
  if (!zoo::is_zoo_model(name)) {
    auto g = zoo::build_zoo_model(name, over);  // the diagnostic lists the presets
    HEDDLE_TRY(g);
  }
  std::string family;
  for (const auto& e : zoo::zoo_entries())
    if (e.name == name) family = e.family;
  auto full = zoo::build_zoo_model(name, over);
  HEDDLE_TRY(full);
  ModelSource src;
  src.name = name;
  const Graph& g = *full;
  src.batch = g.inputs().empty() ? 1 : g.type(g.inputs().front()).shape()[0];
  if (family == "gpt" || family == "llama" || family == "moe" || family == "vit") {
    // The layer count of the preset: rebuild with one more layer and count new parameters is
    // not needed; the zoo exposes GPT configs, others keep their override or preset default.
    if (auto c = zoo::gpt_preset(name, over); c.ok()) {
      src.layers = c->layers;
      src.gpt = *c;
    } else if (over.layers) {
      src.layers = *over.layers;
    }
    src.unit = family == "moe" ? 2 : 1;
  }
  if (src.layers == 0 && (family == "llama" || family == "moe" || family == "vit")) {
    // Count layers by how many parameters one extra layer adds.
    zoo::ZooOverrides one = over, two = over;
    one.layers = 2;
    two.layers = 4;
    auto g1 = zoo::build_zoo_model(name, one), g2 = zoo::build_zoo_model(name, two);
    if (g1.ok() && g2.ok()) {
      size_t per2 = g2->params().size() - g1->params().size();  // params of two layers
      size_t base = g1->params().size() - per2;
      if (per2 > 0 && g.params().size() >= base)
        src.layers = static_cast<int64_t>((g.params().size() - base) * 2 / per2);
    }
  }
  src.build = [name, over](int64_t layers, int64_t batch) {
    zoo::ZooOverrides o = over;
    if (layers > 0) o.layers = layers;
    o.batch = batch;
    return zoo::build_zoo_model(name, o);
  };
  src.build_loss = [name, over](int64_t layers, int64_t batch) {
    zoo::ZooOverrides o = over;
    if (layers > 0) o.layers = layers;
    o.batch = batch;
    zoo::ModelOptions mo;
    mo.with_loss = true;
    return zoo::build_zoo_model(name, o, mo);
  };
  return src;
}

ModelSource graph_model_source(Graph g) {
  ModelSource src;
  src.name = g.name();
  src.batch = g.inputs().empty() ? 1 : std::max<int64_t>(g.type(g.inputs().front()).shape()[0], 1);
  auto shared = std::make_shared<Graph>(std::move(g));
  src.build = [shared](int64_t, int64_t) -> Result<Graph> { return *shared; };
  src.rebuilds_batch = false;
  return src;
}

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

}  // namespace

Result<SimulationResult> simulate(const ModelSource& model, const Cluster& cluster,
                                  const StrategySpec& spec, const SimulateOptions& options) {
  if (spec.auto_search)
    return Diagnostic("simulate needs explicit degrees (dp=..,tp=..,pp=..); 'auto' is for plan");
  const int64_t dp = spec.dp.value_or(1), tp = spec.tp.value_or(1), pp = spec.pp.value_or(1),
                ep = spec.ep.value_or(1);
  auto full_mesh = spec.mesh(cluster.count);
  HEDDLE_TRY(full_mesh);
  const DeviceProfile& dev = cluster.device;
  SimulationResult res;
  res.cluster_source = cluster.source;
  res.devices = cluster.count;
  res.dp = dp;
  res.tp = tp;
  res.pp = pp;
  const int64_t B = model.batch;
  const bool rebuildable = model.rebuilds_batch;
  const bool layered = model.layers >= 2 * model.unit && model.layers > 0;
  if (!layered && pp > 1)
    return Diagnostic(fmt::format(
        "pp={} needs a model with repeating layers (a gpt, llama, moe or vit zoo model)", pp));
  // Micro-batches.
  int64_t mb = 0, m = 0;
  if (B % dp != 0) return Diagnostic(fmt::format("the batch {} is not divisible by dp={}", B, dp));
  if (spec.micro_batch) {
    mb = *spec.micro_batch;
    if (mb < 1 || (B / dp) % mb != 0)
      return Diagnostic(fmt::format(
          "the per-replica batch {} (batch {} / dp {}) is not divisible by the micro-batch mb={}",
          B / dp, B, dp, mb));
    m = B / dp / mb;
    if (spec.microbatches && *spec.microbatches != m)
      return Diagnostic(fmt::format("mb={} gives {} micro-batches, not microbatches={}", mb, m,
                                    *spec.microbatches));
  } else if (spec.microbatches) {
    m = *spec.microbatches;
    if (m < 1 || (B / dp) % m != 0)
      return Diagnostic(
          fmt::format("the per-replica batch {} is not divisible by microbatches={}", B / dp, m));
    mb = B / dp / m;
  } else {
    mb = pp > 1 ? 1 : B / dp;
    m = B / dp / mb;
  }
  if (!rebuildable && m != 1)
    return Diagnostic(
        "this model is simulated as one graph: use one micro-batch (leave mb and microbatches "
        "unset)");
  res.micro_batch = mb;
  res.micro_batches = m;
  // Schedule, recomputation, ZeRO.
  std::string schedule = spec.schedule.value_or("1f1b");
  int64_t v = 1;
  std::string baseline = schedule;
  if (schedule.rfind("interleaved:", 0) == 0) {
    try {
      v = std::stoll(schedule.substr(12));
    } catch (...) {
      v = 0;
    }
    if (v < 1)
      return Diagnostic(fmt::format("schedule '{}': V must be a positive integer", schedule));
    baseline = "interleaved";
  } else if (schedule == "interleaved") {
    v = 2;
    schedule = "interleaved:2";
    baseline = "interleaved";
  } else if (schedule != "gpipe" && schedule != "1f1b" && schedule != "zb-h1" &&
             schedule != "zb-h2") {
    return Diagnostic(fmt::format(
        "simulate does not take schedule '{}'; use gpipe, 1f1b, interleaved:V, zb-h1 or zb-h2",
        schedule));
  }
  res.schedule = schedule;
  res.chunks = v;
  auto rc = parse_recompute(spec.recompute.value_or("none"));
  HEDDLE_TRY(rc);
  res.recompute = *rc;
  const int64_t zero = spec.zero.value_or(0);

  // The sharded model on one pipeline stage's dp x ep x tp mesh.
  StrategySpec inner = spec;
  inner.pp.reset();
  auto mesh = inner.mesh(dp * tp * ep);
  HEDDLE_TRY(mesh);
  if (layered && model.layers % model.unit != 0)
    return Diagnostic(fmt::format("{} layers are not a whole number of {}-layer units",
                                  model.layers, model.unit));
  // Data parallelism only splits the batch (unless ZeRO-3 shards parameters over it or experts
  // share the axis): the representative device's stage costs the same on the mesh without dp,
  // holding its own slice of the batch, so every dp degree shares one costing.
  const bool dp_free = dp > 1 && zero < 3 && ep == 1 && rebuildable;
  StrategySpec cost_spec = inner;
  if (dp_free) cost_spec.dp.reset();
  auto cost_mesh = cost_spec.mesh(dp_free ? tp : dp * tp * ep);
  HEDDLE_TRY(cost_mesh);
  const int64_t cost_batch = dp_free ? mb : mb * dp;
  std::string key =
      fmt::format("{}|{}|{}|{}|{}|{}|{}", model.name, cluster.hash(), cost_mesh->to_string(),
                  cost_batch, zero >= 3, spec.sp, options.planner_key);
  SimulationCache::Stage fresh;
  const SimulationCache::Stage* stage = nullptr;
  if (options.cache)
    if (auto it = options.cache->stages.find(key); it != options.cache->stages.end())
      stage = &it->second;
  if (!stage) {
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
    stage = &fresh;
    if (options.cache) stage = &(options.cache->stages[key] = fresh);
  }
  AlphaBetaCost comm(cluster, *mesh);
  const ModelParts& P = stage->parts;
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
        cost_training_parts(model, *mesh, cluster, spec, mb * dp, layered, options.executor_io);
    HEDDLE_TRY(tp_parts);
    step_parts = std::move(*tp_parts);
  }
  const double head_total = P.prefix.compute_s + P.suffix.compute_s;
  const double prefix_share = head_total > 0 ? P.prefix.compute_s / head_total : 0.5;
  auto rest_share = [&](int64_t first, int64_t last, int64_t i) {
    return (i == first ? prefix_share : 0.0) + (i == last ? 1 - prefix_share : 0.0);
  };
  PartCost io;  // forward only; the training step's is in its optimizer part
  if (!train && options.executor_io) {
    // The executor loads and gathers on the whole stage mesh (dp included), as `heddle run` does.
    auto g2 = model.build(layered ? 2 * model.unit : 0, mb * dp);
    HEDDLE_TRY(g2);
    auto prop = stage_plan(*g2, *mesh, cluster, spec);
    HEDDLE_TRY(prop);
    auto out = cost_executor_io(*g2, *mesh, *prop, cluster);
    HEDDLE_TRY(out);
    io = *out;
    if (layered && units > 2) {  // the two-unit graph's loads, plus the other units'
      auto g1 = model.build(model.unit, mb * dp);
      HEDDLE_TRY(g1);
      auto prop1 = stage_plan(*g1, *mesh, cluster, spec);
      HEDDLE_TRY(prop1);
      auto out1 = cost_executor_io(*g1, *mesh, *prop1, cluster);
      HEDDLE_TRY(out1);
      io.compute_s +=
          static_cast<double>(units - 2) * std::max(io.compute_s - out1->compute_s, 0.0);
    }
  }
  const double send = pp > 1 ? collective_time(Collective::kSendRecv, 2, P.boundary_bytes,
                                               cluster.stage_link(dp * tp * ep))
                             : 0;
  const Recompute r = res.recompute;
  double layer_saved = P.layer.saved_bytes;
  if (r == Recompute::kSelective) layer_saved -= P.layer.attention_bytes;
  if (r == Recompute::kFull) layer_saved = P.boundary_bytes;
  std::vector<Timing> chunk(static_cast<size_t>(C));
  double recompute_mult = r == Recompute::kFull ? 1 : 0;
  // Chunk c's timing with n layer units.
  auto time_chunk = [&](int64_t c, int64_t n) {
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
    t.saved = static_cast<double>(n) * layer_saved + (c == 0 ? P.prefix.saved_bytes : 0) +
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
      if (c < C - 1) t.fwd += send;
      if (c > 0) t.bwd += send;
    }
    return t;
  };
  auto span = [train](const Timing& t) { return t.fwd + (train ? t.bwd : 0); };
  for (int64_t c = 0; c < C; ++c) {
    chunk[static_cast<size_t>(c)] = time_chunk(c, units_on[static_cast<size_t>(c)]);
    const double fixed = span(time_chunk(c, 0));
    res.chunk_units.push_back(units_on[static_cast<size_t>(c)]);
    res.chunk_fixed_s.push_back(fixed);
    if (layered && c == 0) res.unit_s = span(time_chunk(c, 1)) - fixed;
  }

  // The placement of one micro-batch, its spans in seconds and memory in bytes.
  pipeline::Placement pl;
  if (!train) {
    pl.name = "forward";
    pl.family = "forward";
    pl.num_devices = static_cast<int>(pp);
    for (int64_t c = 0; c < C; ++c) {
      pl.blocks.push_back({fmt::format("f{}", c),
                           "forward",
                           std::max(chunk[c].fwd, 1e-12),
                           0,
                           {static_cast<int>(c % pp)}});
      if (c > 0) pl.deps.push_back({static_cast<int>(c - 1), static_cast<int>(c)});
    }
    baseline = "gpipe";
  } else {
    if (baseline == "interleaved")
      pl = pipeline::make_interleaved(static_cast<int>(pp), static_cast<int>(v));
    else if (baseline == "zb-h1" || baseline == "zb-h2")
      pl = pipeline::make_vshape_zb(static_cast<int>(pp));
    else
      pl = pipeline::make_vshape(static_cast<int>(pp));
    std::vector<int> fwd_seen(static_cast<size_t>(pp)), bwd_seen(static_cast<size_t>(pp)),
        w_seen(static_cast<size_t>(pp));
    bool split_w = baseline == "zb-h1" || baseline == "zb-h2";
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
  }
  auto sched = pipeline::build_baseline(baseline, pl, static_cast<int>(m));
  HEDDLE_TRY(sched);
  pipeline::ScheduleStats st = pipeline::compute_stats(pl, sched->schedule);
  res.bubble_fraction = st.bubble_fraction;
  res.events = static_cast<int64_t>(m) * static_cast<int64_t>(pl.blocks.size()) + 2 * pp;
  std::vector<double> end(static_cast<size_t>(pp), 0);
  for (int mi = 0; mi < static_cast<int>(m); ++mi)
    for (int b = 0; b < static_cast<int>(pl.blocks.size()); ++b)
      for (int d : pl.blocks[b].devices)
        end[d] = std::max(end[d], sched->schedule.at(mi, b) + pl.blocks[b].span);

  // Per stage: parameters, memory, gradient reduction and the optimizer step.
  const int64_t dp_axis = mesh->find("dp"), tp_axis = mesh->find("tp");
  const LinkClass& dp_link = dp_axis >= 0 ? comm.link(dp_axis) : cluster.intra_node;
  const LinkClass& tp_link = tp_axis >= 0 ? comm.link(tp_axis) : dp_link;
  BytesMovedCost moved;
  double step = 0, comm_max = 0;
  std::vector<double> tail_sync(static_cast<size_t>(pp)), tail_opt(static_cast<size_t>(pp));
  for (int64_t d = 0; d < pp; ++d) {
    StageResult s;
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
      s.state_bytes = model_state_bytes(params, zero, dp);
      double factor = zero == 3 ? 1.5 : 1.0;
      sync = factor * collective_time(Collective::kAllReduce, dp, grad_bytes, dp_link);
      dp_bytes = dp > 1 ? factor * moved.cost(Collective::kAllReduce, 0, dp, grad_bytes) : 0;
      if (options.overlap) sync /= static_cast<double>(std::max<int64_t>(s.layers, 1));
      double owned = zero >= 1 ? params / static_cast<double>(dp) : params;
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
    double p2p_bytes = pp > 1 ? P.boundary_bytes * static_cast<double>(m * v) * (train ? 2 : 1) : 0;
    res.link_bytes[tp_link.name] += 0;
    double total = tp_bytes + dp_bytes + p2p_bytes;
    if (total >= comm_max) {
      comm_max = total;
      res.link_bytes.clear();
      if (tp_bytes > 0) res.link_bytes[tp_link.name] += tp_bytes;
      if (dp_bytes > 0) res.link_bytes[dp_link.name] += dp_bytes;
      if (p2p_bytes > 0) res.link_bytes[cluster.stage_link(dp * tp * ep).name] += p2p_bytes;
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
        static_cast<double>(dp * tp * ep) * (s.busy_s * dev.tdp_watts + s.idle_s * dev.idle_watts);
  }
  res.step_time_s = step;
  res.comm_bytes = comm_max;
  res.memory_limit_bytes = dev.memory_bytes;
  res.feasible = res.peak_memory_bytes <= res.memory_limit_bytes;
  // Model FLOPs.
  if (model.gpt) {
    res.model_flops = gpt_model_flops(*model.gpt, B, train, r == Recompute::kFull);
  } else {
    double fwd = stage->flops2;
    if (layered) fwd += static_cast<double>(units - 2) * (fwd - stage->flops1);
    if (dp_free) fwd *= static_cast<double>(dp);  // the costed graph held one replica's batch
    res.model_flops = fwd * static_cast<double>(m) * (train ? 3 : 1);
  }
  res.tflops_per_device = res.model_flops / step / static_cast<double>(res.devices) / 1e12;
  res.mfu = res.tflops_per_device * 1e12 / dev.peak_flops;
  // The canonical strategy string.
  StrategySpec canon;
  canon.dp = dp;
  canon.tp = tp;
  canon.pp = pp;
  if (ep > 1) canon.ep = ep;
  canon.zero = zero;
  canon.micro_batch = mb;
  canon.schedule = schedule;
  canon.recompute = std::string(recompute_name(r));
  canon.sp = spec.sp;
  canon.layers = spec.layers;
  res.strategy = canon.to_string();
  if (options.trace) {
    // The schedule's blocks, then per stage the gradient reduction and optimizer step, and a
    // memory counter (states + kept activations) that Perfetto draws as memory over time.
    auto trace = nlohmann::json::parse(pipeline::chrome_trace_json(pl, sched->schedule));
    auto& events = trace["traceEvents"];
    const auto& sch = sched->schedule;
    for (int d = 0; d < static_cast<int>(pp); ++d) {
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
    res.trace_json = trace.dump(1);
  }
  return res;
}

}  // namespace heddle::cost
