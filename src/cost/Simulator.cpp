#include "heddle/cost/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "Chunks.h"
#include "GradientSync.h"
#include "Offload.h"
#include "StageCost.h"
#include "StageMemory.h"
#include "StepTrace.h"
#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/ModelFlops.h"
#include "heddle/cost/ModelParts.h"
#include "heddle/cost/StepBreakdown.h"
#include "heddle/cost/Techniques.h"
#include "heddle/cost/TrainingParts.h"
#include "heddle/ops/OpCost.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/support/Strings.h"

namespace heddle::cost {

namespace {

// A part's seconds as categories: its ops' compute (times `compute_mult`: backward is twice the
// forward), its reshards by mesh axis.
StepBreakdown part_breakdown(const PartCost& p, double compute_mult) {
  StepBreakdown b;
  b.compute_s = compute_mult * p.compute_s;
  b.cp_ep_s = p.ep_comm_s;
  b.grad_reduction_s = p.dp_comm_s;  // ZeRO-3's parameter gathers on the dp axis
  b.tp_sp_s = std::max(p.comm_s - p.ep_comm_s - p.dp_comm_s, 0.0);
  return b;
}

// Everything one simulate() call works on, filled step by step by the functions below.
struct Sim {
  Sim(const model::ScalableModel& m_, const Cluster& c_, const SimulateOptions& o_)
      : model(m_), cluster(c_), options(o_) {}
  const model::ScalableModel& model;
  const Cluster& cluster;
  const SimulateOptions& options;
  std::vector<Cluster> kinds;    // the cluster's device kinds, priced (one kind: the cluster)
  std::vector<int64_t> kind_at;  // per stage, the kind it runs on
  StrategySpec spec;
  Techniques tech;
  double base_peak = 0;  // the device's bf16 peak: MFU is against it whatever the precision
  bool hetero = false, layered = false, train = false;
  int64_t pp = 1, ep = 1, dp = 1, tp = 1, cp = 1, zero = 0;
  int64_t B = 1, m = 1, mb = 1;     // global batch, micro-batches, micro-batch size per replica
  int64_t v = 1, C = 1, units = 0;  // chunks per stage, chunks, layer units
  pipeline::PipelineSchedule schedule;
  Recompute r = Recompute::kNone;
  std::vector<StrategySpec::StageMesh> shapes;  // per stage
  std::map<std::string, SimulationCache::Stage> local;
  std::vector<CostedStage> st_of;  // per stage
  std::vector<int64_t> units_on;   // per chunk
  std::optional<TrainingParts> step_parts;
  PartCost io;  // forward only; the training step's is in its optimizer part
  double prefix_share = 0.5;
  std::vector<Timing> chunk;  // per chunk
  ChunkPlacement placed;
  pipeline::Schedule sched;
  pipeline::ScheduleStats stats;
  std::vector<int> in_flight;                    // per stage, micro-batch chunks held at the peak
  std::vector<double> end, tail_sync, tail_opt;  // per stage
  SimulationResult res;

  const Cluster& on(int64_t d) const {
    return kinds[static_cast<size_t>(kind_at[static_cast<size_t>(d)])];
  }
  int64_t stage_devices(int64_t d) const {
    const auto& s = shapes[static_cast<size_t>(d)];
    return s.dp * s.tp * cp * ep;
  }
  // A stage-to-stage send: every receiving device gets its own tile of the boundary value (its
  // stage's tiling), every sending device sends its share of all of them (the resharding
  // between the two sub-meshes); equal sub-meshes send tile to tile.
  double send_bytes(int64_t from, int64_t to) const {
    double tile = st_of[static_cast<size_t>(to)].stage->parts.boundary_bytes;
    int64_t nf = stage_devices(from), nt = stage_devices(to);
    if (nf == nt) return tile;
    return std::max(tile, tile * static_cast<double>(nt) / static_cast<double>(nf));
  }
  const LinkClass& send_link(int64_t from, int64_t to) const {
    const int64_t a = kind_at[static_cast<size_t>(from)], b = kind_at[static_cast<size_t>(to)];
    if (a != b) return cluster.kind_link(a, b);
    return on(from).stage_link(std::max(stage_devices(from), stage_devices(to)));
  }
  double send_time(int64_t from, int64_t to) const {
    return collective_time(Collective::kSendRecv, 2, send_bytes(from, to), send_link(from, to));
  }
  // The share of the ops outside the layers that part i of [first_i, last_i] holds: the
  // prefix's on the first, the suffix's on the last.
  double rest_share(int64_t first_i, int64_t last_i, int64_t i) const {
    return (i == first_i ? prefix_share : 0.0) + (i == last_i ? 1 - prefix_share : 0.0);
  }
};

// Degrees, sub-meshes, micro-batches, schedule, recomputation and ZeRO of the strategy, checked.
Status read_strategy(Sim& s, const StrategySpec& given) {
  // Equal per-stage meshes are the plain dp/tp form (one canonical string for one plan); the
  // stages are costed one by one below either way.
  s.hetero = given.heterogeneous();
  s.spec = given.without_equal_meshes();
  StrategySpec& spec = s.spec;
  s.pp = spec.pp.value_or(1);
  s.ep = spec.ep.value_or(1);
  s.cp = spec.cp.value_or(1);
  s.dp = s.hetero ? spec.meshes.front().dp : spec.dp.value_or(1);
  s.tp = s.hetero ? spec.meshes.front().tp : spec.tp.value_or(1);
  if (s.hetero) {
    if (spec.devices() != s.cluster.count)
      return Diagnostic(fmt::format(
          "strategy {} gives its stages {} devices (the sum of each stage's dp x tp) but the "
          "cluster has {}; make the sub-meshes add up to {}",
          spec.to_string(), spec.devices(), s.cluster.count, s.cluster.count));
  } else {
    auto full_mesh = spec.mesh(s.cluster.count);
    HEDDLE_TRY(full_mesh);
  }
  s.shapes = s.hetero
                 ? spec.meshes
                 : std::vector<StrategySpec::StageMesh>(static_cast<size_t>(s.pp), {s.dp, s.tp});
  if (s.cp > 1 && s.model.seq <= 0)
    return Diagnostic(fmt::format(
        "cp={} splits the sequence over devices, but {} has no token sequence; use cp with a "
        "transformer (gpt, llama, moe zoo models)",
        s.cp, s.model.name));
  if (s.cp > 1 && s.model.seq % s.cp != 0)
    return Diagnostic(fmt::format("cp={} does not divide the sequence {} of {}; divisors of {}: {}",
                                  s.cp, s.model.seq, s.model.name, s.model.seq,
                                  divisors_text(s.model.seq)));
  s.B = s.model.batch;
  s.train = s.options.train;
  s.layered = s.model.layers >= 2 * s.model.unit && s.model.layers > 0;
  if (!s.layered && s.pp > 1)
    return Diagnostic(fmt::format(
        "pp={} needs a model with repeating layers (a gpt, llama, moe or vit zoo model)", s.pp));
  if (s.hetero && (s.options.autodiff || s.options.executor_io))
    return Diagnostic(
        "per-stage sub-meshes (meshes=) are simulated with the closed-form training step and "
        "without the executor's loads; drop --autodiff / executor I/O or use equal stages");
  auto batching = spec.micro_batching(s.B, s.model.rebuilds_batch);
  HEDDLE_TRY(batching);
  s.m = batching->count;
  s.mb = batching->size;
  if (!s.model.rebuilds_batch && s.m != 1)
    return Diagnostic(
        "this model is simulated as one graph: use one micro-batch (leave mb and microbatches "
        "unset)");
  s.schedule = spec.schedule.value_or(pipeline::PipelineSchedule{});
  if (s.schedule.kind == pipeline::ScheduleKind::kSearched)
    return Diagnostic(
        "simulate does not take schedule 'searched'; use gpipe, 1f1b, interleaved:V, zb-h1 or "
        "zb-h2");
  s.v = s.schedule.chunks;
  s.r = spec.recompute.value_or(Recompute::kNone);
  s.zero = spec.zero.value_or(0);
  if (s.layered && s.model.layers % s.model.unit != 0)
    return Diagnostic(fmt::format("{} layers are not a whole number of {}-layer units",
                                  s.model.layers, s.model.unit));
  return {};
}

// Each stage's sharded model on its own dp x ep x tp mesh (equal stages share one costing), and
// the layer units of every chunk: the strategy's `layers=` split, or as even as they divide.
Status cost_stages(Sim& s) {
  for (int64_t d = 0; d < s.pp; ++d) {
    const auto& shape = s.shapes[static_cast<size_t>(d)];
    if (d > 0 && shape == s.shapes[static_cast<size_t>(d - 1)] &&
        s.kind_at[static_cast<size_t>(d)] == s.kind_at[static_cast<size_t>(d - 1)]) {
      s.st_of.push_back(s.st_of.back());
      continue;
    }
    auto cs = cost_stage(s.model, s.on(d), s.spec, s.options, shape, s.B / s.m / shape.dp,
                         s.layered, s.local);
    HEDDLE_TRY(cs);
    s.st_of.push_back(std::move(*cs));
  }
  s.units = s.layered ? s.model.layers / s.model.unit : 0;
  s.C = s.pp * s.v;
  if (s.layered && s.units < s.C)
    return Diagnostic(
        fmt::format("pp={} x {} chunks needs at least {} layer units; the model has {}", s.pp, s.v,
                    s.C, s.units));
  s.units_on.assign(static_cast<size_t>(s.C), 0);
  for (int64_t c = 0; c < s.C; ++c)
    s.units_on[static_cast<size_t>(c)] =
        s.layered ? s.units / s.C + (c < s.units % s.C ? 1 : 0) : 0;
  if (!s.spec.layers.empty()) {
    auto split = layer_split(s.spec.layers, s.model, s.C);
    HEDDLE_TRY(split);
    s.units_on = std::move(*split);
  }
  return {};
}

// The autodiff training step's costs (SimulateOptions::autodiff) and the executor's loads and
// gathers of a forward step (executor_io); the ops outside the layers are split between the
// first and the last chunk as the forward graph's prefix and suffix are.
Status cost_extras(Sim& s) {
  const Mesh& mesh = s.st_of.front().mesh;
  if (s.train && s.options.autodiff && s.model.build_loss) {
    auto parts = cost_training_parts(s.model, mesh, s.cluster, s.spec, s.mb * s.dp, s.layered,
                                     s.options.executor_io);
    HEDDLE_TRY(parts);
    s.step_parts = std::move(*parts);
  }
  const ModelParts& P0 = s.st_of.front().stage->parts;
  const double head_total = P0.prefix.compute_s + P0.suffix.compute_s;
  s.prefix_share = head_total > 0 ? P0.prefix.compute_s / head_total : 0.5;
  if (!s.train && s.options.executor_io) {
    auto out = executor_io_cost(s.model, s.cluster, s.spec, mesh, s.mb * s.dp, s.layered, s.units);
    HEDDLE_TRY(out);
    s.io = *out;
  }
  return {};
}

// Moves `x` seconds of `from` (a category of `parts`) into `to` and off `span`.
void hide(double x, double StepBreakdown::*from, double StepBreakdown::*to, StepBreakdown& parts,
          double& span) {
  parts.*from -= x;
  parts.*to += x;
  span -= x;
}

// The overlap mechanisms inside a chunk's layers (`body`, one micro-batch): with dp+tp, each
// tensor-parallel collective runs in tp pieces behind the adjacent linear-layer GEMMs (Megatron's
// userbuffers, torchtitan's async TP): all but the first piece hide, up to the GEMMs' time
// (forward GEMMs once, backward twice, a full recomputation's once more); with any overlap,
// ZeRO-3's parameter gathers are prefetched behind the previous layer's compute.
void hide_behind_compute(const Sim& s, int64_t d, const PartCost& body, double recompute_mult,
                         Timing& t) {
  if (s.tech.overlap == Overlap::kNone) return;
  const double dp_comm = body.dp_comm_s;
  hide(std::min(dp_comm, body.compute_s), &StepBreakdown::grad_reduction_s,
       &StepBreakdown::overlapped_grad_s, t.fwd_parts, t.fwd);
  hide(std::min(dp_comm, 2 * body.compute_s), &StepBreakdown::grad_reduction_s,
       &StepBreakdown::overlapped_grad_s, t.bwd_parts, t.bwd);
  if (recompute_mult > 0)  // the recomputed forward gathers again, prefetched the same way
    hide(std::min(dp_comm, body.compute_s), &StepBreakdown::recompute_s,
         &StepBreakdown::overlapped_grad_s, t.bwd_parts, t.bwd);
  // Ring attention: each device computes attention on the key/value block it holds while the
  // next block travels around the cp ring (and in backward their gradients travel back), so
  // the exchange hides behind the attention kernels, forward once and backward twice. The
  // all-gather form (cp_comm=allgather) gathers before attention starts: nothing hides.
  if (s.spec.cp_comm != CpComm::kAllGather) {
    hide(std::min(body.cp_comm_s, body.attention_s), &StepBreakdown::cp_ep_s,
         &StepBreakdown::overlapped_cp_s, t.fwd_parts, t.fwd);
    hide(std::min(body.cp_comm_s, 2 * body.attention_s), &StepBreakdown::cp_ep_s,
         &StepBreakdown::overlapped_cp_s, t.bwd_parts, t.bwd);
  }
  const double k = static_cast<double>(s.st_of[static_cast<size_t>(d)].tp);
  if (s.tech.overlap != Overlap::kDpTp || k < 2) return;
  const double tp = std::max(body.comm_s - body.ep_comm_s - body.dp_comm_s, 0.0) * (k - 1) / k;
  hide(std::min(tp, body.linear_s), &StepBreakdown::tp_sp_s, &StepBreakdown::overlapped_tp_s,
       t.fwd_parts, t.fwd);
  hide(std::min(tp, 2 * body.linear_s), &StepBreakdown::tp_sp_s, &StepBreakdown::overlapped_tp_s,
       t.bwd_parts, t.bwd);
  if (recompute_mult > 0)
    hide(std::min(tp, body.linear_s), &StepBreakdown::recompute_s, &StepBreakdown::overlapped_tp_s,
         t.bwd_parts, t.bwd);
}

// Host transfers of chunk c (n layer units) per micro-batch: with offload=optimizer+params the
// layers' weights are fetched from the host (or NVMe) in forward and again in backward; with
// offload=activations the kept activations go out in forward and come back in backward. With
// overlap they run behind the chunk's compute (prefetch), only the excess shows.
void offload_transfers(const Sim& s, int64_t c, int64_t n, Timing& t) {
  const Cluster& kc = s.on(c % s.pp);
  if (!s.train || kc.host_bandwidth <= 0) return;
  const ModelParts& P = s.st_of[static_cast<size_t>(c % s.pp)].stage->parts;
  double bytes = 0;
  if (offloads_weights(s.tech.offload))
    bytes = static_cast<double>(n) * P.layer.param_elements * kc.device.element_bytes;
  if (s.tech.offload == Offload::kActivations) bytes = t.saved;
  if (bytes <= 0) return;
  const double x = bytes / weight_fetch_bandwidth(s.tech.offload, kc);
  const double fwd_compute = t.fwd_parts.compute_s, bwd_compute = t.bwd_parts.compute_s;
  for (auto [span, parts, compute] :
       {std::tuple{&t.fwd, &t.fwd_parts, fwd_compute}, {&t.bwd, &t.bwd_parts, bwd_compute}}) {
    const double hidden = s.tech.overlap != Overlap::kNone ? std::min(x, compute) : 0;
    *span += x - hidden;
    parts->offload_s += x - hidden;
    parts->overlapped_offload_s += hidden;
  }
  if (s.tech.offload == Offload::kActivations) t.saved = 0;  // on the host until backward
}

// Chunk c's forward and backward spans for one micro-batch with n layer units.
Timing time_chunk(const Sim& s, int64_t c, int64_t n) {
  const int64_t d = c % s.pp, C = s.C;
  const ModelParts& P = s.st_of[static_cast<size_t>(d)].stage->parts;
  const double recompute_mult = s.r == Recompute::kFull ? 1 : 0;
  Timing t;
  PartCost body = P.layer.scaled(static_cast<double>(n));
  PartCost all = body;
  if (c == 0) all = all + P.prefix;
  if (c == C - 1) all = all + P.suffix;
  t.fwd = all.compute_s + all.comm_s;
  t.fwd_parts = part_breakdown(all, 1);
  double recompute = recompute_mult * (body.compute_s + body.comm_s);
  if (s.r == Recompute::kSelective) recompute = body.attention_s;
  // Flash attention's backward recomputes the scores: one more score GEMM, half the forward
  // kernel's work (FlashAttention-2: five GEMMs in backward against two in forward).
  recompute += 0.5 * body.flash_s;
  t.wgrad = all.compute_s;
  t.bwd = 2 * all.compute_s + all.comm_s + recompute;
  t.bwd_parts = part_breakdown(all, 2);
  t.bwd_parts.recompute_s = recompute;
  // Ring attention's per-step merges: forward folds each step's output into the accumulator;
  // backward accumulates the query gradient in fp32 and the key/value gradients as they travel
  // around the ring, about twice that. The all-gather form runs one kernel over all keys.
  if (s.spec.cp_comm != CpComm::kAllGather) {
    const double merge = body.ring_merge_s;
    t.fwd += merge;
    t.fwd_parts.compute_s += merge;
    t.bwd += 2 * merge;
    t.bwd_parts.compute_s += 2 * merge;
  }
  hide_behind_compute(s, d, body, recompute_mult, t);
  t.saved = static_cast<double>(n) * layer_saved(P, s.r) + (c == 0 ? P.prefix.saved_bytes : 0) +
            (c == C - 1 ? P.suffix.saved_bytes : 0);
  // The loss keeps its softmax of the logits in fp32 until backward (Megatron's vocab-parallel
  // cross entropy; Korthikanti et al.'s 4sbv/t): vocabulary-sized, on the last chunk.
  if (c == C - 1 && s.train) t.saved += kLossBytesPerLogit * P.output_elements;
  t.comm_bytes = all.comm_bytes * (s.train ? 2 + recompute_mult : 1);
  if (c == C - 1) {
    t.fwd += s.io.compute_s + s.io.comm_s;
    t.fwd_parts.compute_s += s.io.compute_s;
    t.fwd_parts.tp_sp_s += s.io.comm_s;
    t.comm_bytes += s.io.comm_bytes;
  }
  if (s.step_parts) {
    const TrainingParts& T = *s.step_parts;
    double k = static_cast<double>(n), share = s.rest_share(0, C - 1, c);
    PartCost f = T.fwd_layer.scaled(k) + T.fwd_rest.scaled(share);
    PartCost b = T.bwd_layer.scaled(k) + T.bwd_rest.scaled(share);
    t.fwd = f.compute_s + f.comm_s;
    t.fwd_parts = part_breakdown(f, 1);
    t.bwd = b.compute_s + b.comm_s + recompute;
    t.bwd_parts = part_breakdown(b, 1);
    t.bwd_parts.recompute_s = recompute;
    t.wgrad = b.compute_s / 2;
    t.comm_bytes = f.comm_bytes + b.comm_bytes + recompute_mult * body.comm_bytes;
  }
  if (s.pp > 1) {
    double fwd_send = c < C - 1 ? s.send_time(d, (c + 1) % s.pp) : 0;
    double bwd_send = c > 0 ? s.send_time(d, (c - 1) % s.pp) : 0;
    // Overlapped sends run behind the chunk's compute (Megatron's overlapped p2p): only what
    // exceeds it shows.
    double fwd_hidden = 0, bwd_hidden = 0;
    if (s.tech.overlap != Overlap::kNone) {
      fwd_hidden = std::min(fwd_send, all.compute_s);
      bwd_hidden = std::min(bwd_send, 2 * all.compute_s);
    }
    t.fwd_parts.overlapped_send_s += fwd_hidden;
    t.bwd_parts.overlapped_send_s += bwd_hidden;
    t.fwd += fwd_send - fwd_hidden;
    t.bwd += bwd_send - bwd_hidden;
    t.fwd_parts.pipeline_send_s += fwd_send - fwd_hidden;
    t.bwd_parts.pipeline_send_s += bwd_send - bwd_hidden;
  }
  offload_transfers(s, c, n, t);
  return t;
}

// Every chunk's timing, and its fixed and per-unit seconds for the layer balancer.
void time_chunks(Sim& s) {
  auto span = [&s](const Timing& t) { return t.fwd + (s.train ? t.bwd : 0); };
  for (int64_t c = 0; c < s.C; ++c) {
    s.chunk.push_back(time_chunk(s, c, s.units_on[static_cast<size_t>(c)]));
    const double fixed = span(time_chunk(s, c, 0));
    s.res.chunk_units.push_back(s.units_on[static_cast<size_t>(c)]);
    s.res.chunk_fixed_s.push_back(fixed);
    s.res.chunk_unit_s.push_back(s.layered ? span(time_chunk(s, c, 1)) - fixed : 0);
    if (s.layered && c == 0) s.res.unit_s = s.res.chunk_unit_s.back();
  }
}

// The placement of one micro-batch (spans in seconds, memory in bytes) scheduled for m
// micro-batches: bubble, and when each stage's last block ends.
Status run_schedule(Sim& s) {
  s.placed = chunk_placement(s.chunk, s.pp, s.schedule, s.train);
  const pipeline::BlockPlacement& pl = s.placed.pl;
  auto sched = pipeline::build_baseline(s.train ? s.schedule.baseline() : "gpipe", pl,
                                        static_cast<int>(s.m));
  HEDDLE_TRY(sched);
  s.sched = std::move(sched->schedule);
  s.stats = pipeline::compute_stats(pl, s.sched);
  s.in_flight = pipeline::peak_in_flight(pl, s.sched);
  s.res.bubble_fraction = s.stats.bubble_fraction;
  s.res.events = s.m * static_cast<int64_t>(pl.blocks.size()) + 2 * s.pp;
  s.end.assign(static_cast<size_t>(s.pp), 0);
  for (int mi = 0; mi < static_cast<int>(s.m); ++mi)
    for (int b = 0; b < static_cast<int>(pl.blocks.size()); ++b)
      for (int d : pl.blocks[b].devices)
        s.end[d] = std::max(s.end[d], s.sched.at(mi, b) + pl.blocks[b].span);
  return {};
}

// Gradient reduction and optimizer step of stage `d` (`st`: its parameters and layers) on its own
// sub-mesh: exposed seconds of each, the reduction's bytes and, with overlap, the reduction seconds
// hidden behind backward.
struct StageTail {
  double sync = 0, opt = 0, dp_bytes = 0, hidden_sync = 0;
  double host = 0, hidden_host = 0;  // PCIe transfers of offloaded optimizer steps
};

StageTail stage_tail(const Sim& s, int64_t d, const StageResult& st, const LinkClass& dp_link) {
  StageTail t;
  if (!s.train) return t;
  const DeviceProfile& dev = s.on(d).device;
  const double params = st.parameters;
  // Gradients reduce in gradient_bytes() (fp32 in bf16 training: Megatron's main_grad,
  // torchtitan's reduce dtype; bf16 in NVIDIA's fp8 recipes); weights gather in the compute
  // precision. Every cp rank holds the whole weights and a gradient of its part of the sequence:
  // gradients reduce (and ZeRO shards) over dp x cp, as Megatron-LM's distributed optimizer does.
  const int64_t group = st.dp * s.cp;
  const double gathers = s.zero == 3 ? 2 : 1;
  const GradientSync g = gradient_sync(s.zero, group, params * gradient_bytes(s.tech),
                                       params * dev.element_bytes, dp_link);
  const double reduce_s = g.reduce_s, gather_s = g.gather_s;
  t.dp_bytes = g.bytes;
  t.sync = reduce_s + gather_s;
  double owned = s.zero >= 1 ? params / static_cast<double>(group) : params;
  t.opt = owned * 32 / (dev.memory_bandwidth * dev.memory_efficiency);
  if (s.step_parts) {
    // The step's own updates and the gradient reductions before them.
    int64_t units_here = st.layers / s.model.unit;
    PartCost o = s.step_parts->opt_layer.scaled(static_cast<double>(units_here)) +
                 s.step_parts->opt_rest.scaled(s.rest_share(0, s.pp - 1, d));
    t.sync = o.comm_s;
    t.dp_bytes = o.comm_bytes;
    t.opt = o.compute_s;
  }
  // Overlap per bucket: gradient reductions start as the last micro-batch's backward produces
  // each bucket; with a sharded optimizer (ZeRO >= 1) the reduce-scatter runs there and the
  // parameter all-gather behind the next step's first forward (Megatron's
  // overlap-grad-reduce and overlap-param-gather, FSDP's prefetch).
  // Interleaved (v chunks per stage), Megatron runs micro-batches in groups of pp per chunk: the
  // last round's backward takes chunk v-1's group first, so its gradients reduce behind the
  // groups of the v-1 chunks after it (and the next step's first round gathers chunk k+1's
  // weights behind chunk k's group): the window is ((v-1) g + 1) / v micro-batch passes,
  // g = min(pp, m) the group, where one-chunk schedules have one (the last micro-batch's).
  double last_bwd = 0, first_fwd = 0;
  for (int64_t c = d; c < s.C; c += s.pp) {
    last_bwd += s.chunk[static_cast<size_t>(c)].bwd;
    first_fwd += s.chunk[static_cast<size_t>(c)].fwd;
  }
  double rounds = 1;
  if (s.v > 1) {
    const double g = static_cast<double>(std::min(s.pp, s.m));
    rounds = ((static_cast<double>(s.v) - 1) * g + 1) / static_cast<double>(s.v);
  }
  if (s.tech.overlap != Overlap::kNone && !s.step_parts) {
    // ZeRO-3's backward gather runs behind the backward with the reduce-scatter.
    const double bwd_s = reduce_s + gather_s * (gathers - 1) / gathers;
    const double fwd_s = gather_s / gathers;
    double exposed = exposed_behind(bwd_s, rounds * last_bwd, params) +
                     (fwd_s > 0 ? exposed_behind(fwd_s, rounds * first_fwd, params) : 0);
    exposed = std::min(exposed, t.sync);
    t.hidden_sync = t.sync - exposed;
    t.sync = exposed;
  }
  if (s.tech.offload == Offload::kOptimizer || offloads_weights(s.tech.offload)) {
    // The optimizer runs on the host (DeepSpeed's CPU Adam), its state in DRAM or on NVMe.
    const HostStep h =
        host_optimizer_step(s.tech, s.on(d), owned, dev.element_bytes, last_bwd - t.sync);
    t.opt = h.opt;
    t.host = h.host;
    t.hidden_host = h.hidden_host;
  }
  return t;
}

// Stage `st`'s model states on the device, the host and NVMe for `params` local parameter
// elements (`working` of them: the stage's embedding or head and one layer unit, what a device
// holds at a time when the weights live elsewhere) replicated over `dp`: mixed-precision Adam
// under ZeRO (model_state_bytes()) plus the fp8 weight copy, or as offloaded_states() places them.
void stage_states(const Sim& s, double params, double working, int64_t dp, StageResult& st) {
  const double e = s.cluster.device.element_bytes;
  if (!s.train) {
    st.state_bytes = params * e;
    return;
  }
  const double extra = technique_state_bytes_per_param(s.tech) * params;
  if (s.tech.offload == Offload::kNone || s.tech.offload == Offload::kActivations) {
    st.state_bytes = model_state_bytes(params, s.zero, dp, gradient_bytes(s.tech), e) + extra;
    return;
  }
  const auto o = offloaded_states(s.tech.offload, params, working, s.zero, dp, e, extra);
  st.state_bytes = o.device;
  st.host_bytes = o.host;
  st.nvme_bytes = o.nvme;
}

// Per stage: parameters, memory, gradient reduction, optimizer step and bytes per link, each on
// the stage's own sub-mesh; the step time (the last stage to finish) and every stage's
// breakdown (its blocks' categories, its tail and its idle time, summing to the step time).
void price_stages(Sim& s) {
  const pipeline::BlockPlacement& pl = s.placed.pl;
  SimulationResult& res = s.res;
  const int64_t pp = s.pp, C = s.C;
  double step = 0, comm_max = 0;
  s.tail_sync.assign(static_cast<size_t>(pp), 0);
  s.tail_opt.assign(static_cast<size_t>(pp), 0);
  res.stages.reserve(static_cast<size_t>(pp));
  for (int64_t d = 0; d < pp; ++d) {
    const CostedStage& cs = s.st_of[static_cast<size_t>(d)];
    const ModelParts& P = cs.stage->parts;
    const Cluster& kc = s.on(d);
    AlphaBetaCost comm(kc, cs.mesh);
    const int64_t dp_axis = cs.mesh.find("dp"), tp_axis = cs.mesh.find("tp"),
                  cp_axis = cs.mesh.find("cp");
    // The gradient reduction's group spans dp x cp: its slowest links are the dp axis's.
    const LinkClass& dp_link = dp_axis >= 0   ? comm.link(dp_axis)
                               : cp_axis >= 0 ? comm.link(cp_axis)
                                              : kc.intra_node;
    const LinkClass& tp_link = tp_axis >= 0 ? comm.link(tp_axis) : dp_link;
    res.stages.emplace_back();
    StageResult& st = res.stages.back();
    st.dp = cs.dp;
    st.tp = cs.tp;
    st.devices = s.stage_devices(d);
    st.kind = s.kind_at[static_cast<size_t>(d)];
    st.device = kc.device.name;
    st.memory_limit_bytes = kc.device.memory_bytes;
    st.micro_batch = s.model.rebuilds_batch ? s.B / s.m / cs.dp : s.mb;
    double params = 0, tp_bytes = 0;
    for (int64_t c = d; c < C; c += pp) {
      st.layers += s.units_on[static_cast<size_t>(c)] * s.model.unit;
      params += static_cast<double>(s.units_on[static_cast<size_t>(c)]) * P.layer.param_elements;
      tp_bytes += s.chunk[static_cast<size_t>(c)].comm_bytes * static_cast<double>(s.m);
    }
    if (d == 0) params += P.prefix.param_elements;
    if (d == pp - 1) params += P.suffix.param_elements - (pp == 1 ? P.shared_param_elements : 0);
    st.parameters = params;
    const double unit_params = s.layered ? P.layer.param_elements : 0;
    const double stage_elements_one_unit =
        params - static_cast<double>(st.layers / std::max<int64_t>(s.model.unit, 1)) * unit_params +
        unit_params;
    stage_states(s, params, stage_elements_one_unit, cs.dp * s.cp, st);
    const StageTail tail = stage_tail(s, d, st, dp_link);
    StageMemoryInput mem;
    mem.parts = &P;
    mem.device = &kc.device;
    mem.train = s.train;
    mem.first = d == 0;
    mem.last = d == pp - 1;
    mem.r = s.r;
    mem.offload = s.tech.offload;
    mem.zero = s.zero;
    mem.grad_bytes = gradient_bytes(s.tech);
    mem.group = cs.dp * s.cp;
    mem.kept = s.stats.peak_memory[static_cast<size_t>(d)];
    mem.in_flight = s.in_flight[static_cast<size_t>(d)];
    mem.units = static_cast<double>(st.layers / std::max<int64_t>(s.model.unit, 1));
    mem.host_micro_batches = std::min<int64_t>(s.m, pp * s.v);
    mem.params = params;
    stage_memory(mem, st);
    const double mv = static_cast<double>(s.m * s.v);
    double p2p_bytes = pp > 1 ? s.send_bytes(d, (d + 1) % pp) * mv +
                                    (s.train ? s.send_bytes(d, (d + pp - 1) % pp) * mv : 0)
                              : 0;
    double total = tp_bytes + tail.dp_bytes + p2p_bytes;
    if (total >= comm_max) {
      comm_max = total;
      res.link_bytes.clear();
      if (tp_bytes > 0) res.link_bytes[tp_link.name] += tp_bytes;
      if (tail.dp_bytes > 0) res.link_bytes[dp_link.name] += tail.dp_bytes;
      if (p2p_bytes > 0) res.link_bytes[s.send_link(d, (d + 1) % pp).name] += p2p_bytes;
    }
    s.tail_sync[static_cast<size_t>(d)] = tail.sync;
    s.tail_opt[static_cast<size_t>(d)] = tail.opt;
    step = std::max(step, s.end[static_cast<size_t>(d)] + tail.sync + tail.opt + tail.host);
    res.dp_sync_s = std::max(res.dp_sync_s, tail.sync);
    st.busy_s = s.stats.busy[static_cast<size_t>(d)] + tail.sync + tail.opt + tail.host;
    for (size_t b = 0; b < pl.blocks.size(); ++b)
      for (int dev_of : pl.blocks[b].devices)
        if (dev_of == d)
          st.breakdown = st.breakdown + s.placed.parts[b].scaled(static_cast<double>(s.m));
    st.breakdown.grad_reduction_s += tail.sync;
    st.breakdown.overlapped_grad_s += tail.hidden_sync;
    st.breakdown.optimizer_s += tail.opt;
    st.breakdown.offload_s += tail.host;
    st.breakdown.overlapped_offload_s += tail.hidden_host;
    res.peak_memory_bytes = std::max(res.peak_memory_bytes, st.peak_memory_bytes);
    res.host_memory_bytes = std::max(res.host_memory_bytes, st.host_bytes);
  }
  double weight = 0, tightest = -1;
  for (auto& st : res.stages) {
    // Every stage fits its own kind; the limit shown is the tightest stage's (mixed clusters).
    const Cluster& kc = s.kinds[static_cast<size_t>(st.kind)];
    const DeviceProfile& dev = kc.device;
    if (st.peak_memory_bytes / st.memory_limit_bytes > tightest)
      tightest = st.peak_memory_bytes / st.memory_limit_bytes,
      res.memory_limit_bytes = st.memory_limit_bytes;
    res.feasible = res.feasible && st.peak_memory_bytes <= st.memory_limit_bytes &&
                   (st.host_bytes <= 0 || st.host_bytes <= kc.host_memory_bytes) &&
                   (st.nvme_bytes <= 0 || st.nvme_bytes <= kc.nvme_bytes);
    res.nvme_bytes = std::max(res.nvme_bytes, st.nvme_bytes);
    st.idle_s = std::max(step - st.busy_s, 0.0);
    st.breakdown.bubble_s = st.idle_s;
    res.energy_j +=
        static_cast<double>(st.devices) * (st.busy_s * dev.tdp_watts + st.idle_s * dev.idle_watts);
    res.breakdown = res.breakdown + st.breakdown.scaled(static_cast<double>(st.devices));
    weight += static_cast<double>(st.devices);
  }
  res.breakdown = res.breakdown.scaled(1 / weight);
  res.step_time_s = step;
  res.comm_bytes = comm_max;
  res.host_memory_limit_bytes = s.cluster.host_memory_bytes;
  res.nvme_limit_bytes = s.cluster.nvme_bytes;
}

// Model FLOPs per step in both conventions (ModelFlops.h), TFLOP/s per device and MFU: heddle's
// (causal attention over half the scores, recomputation not counted) and the published one
// (Megatron's formula for GPT models, full attention).
void count_model_flops(Sim& s) {
  SimulationResult& res = s.res;
  const CostedStage& first = s.st_of.front();
  if (s.model.gpt) {
    res.model_flops = gpt_causal_model_flops(*s.model.gpt, s.B, s.train);
    res.published_model_flops =
        gpt_model_flops(*s.model.gpt, s.B, s.train, s.r == Recompute::kFull);
  } else {
    // The forward FLOPs of the whole model from the two- and one-unit graphs, full and with a
    // causal kernel's skipped half taken off.
    auto whole = [&](double two, double one) {
      double f = two;
      if (s.layered) f += static_cast<double>(s.units - 2) * (two - one);
      if (first.dp_free) f *= static_cast<double>(s.dp);  // the costed graph held one replica's
      return f * static_cast<double>(s.m) * (s.train ? 3 : 1);
    };
    const SimulationCache::Stage& st = *first.stage;
    res.published_model_flops = whole(st.flops2, st.flops1);
    res.model_flops = res.published_model_flops - whole(st.causal_skipped2, st.causal_skipped1);
  }
  const double per_device = res.step_time_s * static_cast<double>(res.devices) * 1e12;
  res.tflops_per_device = res.model_flops / per_device;
  res.mfu = res.tflops_per_device * 1e12 / s.base_peak;
  res.published_tflops_per_device = res.published_model_flops / per_device;
  res.published_mfu = res.published_tflops_per_device * 1e12 / s.base_peak;
}

// The canonical strategy string: re-simulating it gives the same plan; it holds only the keys
// that change the step.
std::string canonical_strategy(const Sim& s) {
  StrategySpec canon;
  if (s.hetero) {
    canon.pp = s.pp;
    canon.meshes = s.shapes;
    canon.microbatches = s.m;
  } else {
    canon.dp = s.dp;
    canon.tp = s.tp;
    canon.pp = s.pp;
    canon.micro_batch = s.mb;
  }
  if (s.ep > 1) canon.ep = s.ep;
  if (s.cp > 1) canon.cp = s.cp;
  canon.precision = s.spec.precision;
  canon.attention = s.spec.attention;
  canon.overlap = s.spec.overlap;
  if (s.train) canon.offload = s.spec.offload;
  // Only the keys that apply: a forward step has no optimizer state, backward or 1F1B order,
  // and one stage has no pipeline schedule.
  if (s.train) {
    canon.zero = s.zero;
    canon.recompute = s.r;
  }
  if (s.train && (s.pp > 1 || s.v > 1)) canon.schedule = s.schedule;
  canon.sp = s.spec.sp;
  canon.layers = s.spec.layers;
  return canon.to_string();
}

}  // namespace

Result<SimulationResult> simulate(const model::ScalableModel& model, const Cluster& cluster,
                                  const StrategySpec& given, const SimulateOptions& options) {
  if (given.auto_search)
    return Diagnostic("simulate needs explicit degrees (dp=..,tp=..,pp=..); 'auto' is for plan");
  auto tech = resolve_techniques(given, cluster, options.overlap);
  HEDDLE_TRY(tech);
  if (!options.train && tech->offload != Offload::kNone)
    return Diagnostic(
        "offload= moves training state (optimizer, weights, kept activations) to the "
        "host; a forward-only step has none: drop offload= or add --train");
  Cluster priced = cluster;
  priced.device = priced_device(cluster.device, *tech);
  Sim s(model, priced, options);
  s.tech = *tech;
  s.base_peak = cluster.mean_peak_flops();  // MFU against the devices' own peaks
  HEDDLE_TRY(read_strategy(s, given));
  s.kinds = priced_kinds(cluster, *tech);  // each stage runs on its kind (mixed clusters)
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < s.pp; ++d) sizes.push_back(s.stage_devices(d));
  auto kinds = stage_kinds(cluster, sizes);
  HEDDLE_TRY(kinds);
  s.kind_at = std::move(*kinds);
  HEDDLE_TRY(cost_stages(s));
  HEDDLE_TRY(cost_extras(s));
  time_chunks(s);
  HEDDLE_TRY(run_schedule(s));
  price_stages(s);
  SimulationResult& res = s.res;
  res.cluster_source = cluster.source;
  res.devices = cluster.count;
  res.dp = s.dp;
  res.tp = s.tp;
  res.pp = s.pp;
  res.cp = s.cp;
  res.heterogeneous = s.hetero;
  res.micro_batch = s.mb;
  res.micro_batches = s.m;
  res.schedule = s.schedule;
  res.chunks = s.v;
  res.recompute = s.r;
  count_model_flops(s);
  res.strategy = canonical_strategy(s);
  if (options.trace)
    res.trace_json = step_trace(
        {&s.placed.pl, &s.sched, &s.placed.parts, &res, &s.end, &s.tail_sync, &s.tail_opt});
  return std::move(res);
}

}  // namespace heddle::cost
