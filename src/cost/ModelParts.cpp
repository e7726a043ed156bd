#include "heddle/cost/ModelParts.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>
#include <unordered_set>

#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/ComputeCost.h"
#include "heddle/sharding/Reshard.h"

namespace heddle::cost {

PartCost PartCost::operator+(const PartCost& o) const {
  PartCost r;
  r.compute_s = compute_s + o.compute_s;
  r.comm_s = comm_s + o.comm_s;
  r.ep_comm_s = ep_comm_s + o.ep_comm_s;
  r.dp_comm_s = dp_comm_s + o.dp_comm_s;
  r.cp_comm_s = cp_comm_s + o.cp_comm_s;
  r.flops = flops + o.flops;
  r.comm_bytes = comm_bytes + o.comm_bytes;
  r.attention_s = attention_s + o.attention_s;
  r.flash_s = flash_s + o.flash_s;
  r.linear_s = linear_s + o.linear_s;
  r.ring_merge_s = ring_merge_s + o.ring_merge_s;
  r.saved_bytes = saved_bytes + o.saved_bytes;
  r.attention_bytes = attention_bytes + o.attention_bytes;
  r.param_elements = param_elements + o.param_elements;
  r.ops = ops + o.ops;
  return r;
}

PartCost PartCost::scaled(double k) const {
  PartCost r = *this;
  for (double* f : {&r.compute_s, &r.comm_s, &r.ep_comm_s, &r.dp_comm_s, &r.cp_comm_s, &r.flops,
                    &r.comm_bytes, &r.attention_s, &r.flash_s, &r.linear_s, &r.ring_merge_s,
                    &r.saved_bytes, &r.attention_bytes, &r.param_elements})
    *f *= k;
  r.ops = static_cast<int64_t>(static_cast<double>(ops) * k);
  return r;
}

namespace {

double local_elements(const TensorType& t, const TensorSharding& s, const Mesh& mesh) {
  double n = 1;
  for (int64_t d = 0; d < t.rank(); ++d) {
    double shards = static_cast<double>(s.shards_of_dim(d, mesh));
    n *= std::ceil(static_cast<double>(t.shape()[d]) / shards);
  }
  return n;
}

// Whether backward needs the op's inputs: products, windows, normalizations, losses and
// nonlinear elementwise ops do; sums, scalings, masks and layout ops do not (their gradients
// are linear maps of the output gradient), as in Korthikanti et al.'s accounting.
bool saves_inputs(OpKind kind) {
  switch (op_kind_info(kind).category) {
    case OpCategory::kContraction:
    case OpCategory::kWindow:
    case OpCategory::kNormalization:
    case OpCategory::kLoss:
      return true;
    case OpCategory::kUnary:
      return kind != OpKind::kScale && kind != OpKind::kNeg && kind != OpKind::kCast &&
             kind != OpKind::kIdentity && kind != OpKind::kCausalMask;
    case OpCategory::kBinary:
      return kind != OpKind::kAdd && kind != OpKind::kSub;
    default:
      return false;
  }
}

// The per-op analysis behind cost_model_parts() and cost_op_groups(): the local placement of
// every value, roofline times with fusion, and reshard time and bytes per consuming op.
class Analysis {
 public:
  Analysis(const Graph& g, const Mesh& mesh, const Propagation& prop, const Cluster& cluster)
      : g_(g),
        mesh_(mesh),
        prop_(prop),
        dev_(cluster.device),
        comm_(cluster, mesh),
        labels_(label_dims(g)) {}

  // Ops outside [lo, hi) are not in the repeating layers (embedding, head, loss): fp8 recipes
  // keep them in the compute precision. Transformer Engine's fp8 covers the transformer layers'
  // linear layers; Megatron-Core's output layer is not a TE module, torchtitan's float8 skips
  // `output`: their contractions run at the bf16 peak and keep their inputs in bf16.
  void layers_between(int64_t lo, int64_t hi) {
    layers_lo_ = lo;
    layers_hi_ = hi;
  }

  Status run() {
    const int64_t n_ops = g_.num_ops();
    DeviceProfile outside = dev_;
    outside.param_gemm_flops = 0;
    outside.param_gemm_input_bytes = 0;
    // Local placement of every value: results from their producer's strategy, inputs and params
    // from their first consumer.
    sharding_.assign(static_cast<size_t>(g_.num_values()), std::nullopt);
    times_.assign(static_cast<size_t>(n_ops), OpTime{});
    for (OpId id = 0; id < n_ops; ++id) {
      const Op& op = g_.op(id);
      const OpStrategy& s = prop_.plan.ops[static_cast<size_t>(id)];
      auto placements = derive_placements(g_, id, mesh_, s);
      HEDDLE_TRY(placements);
      for (size_t r = 0; r < op.results.size(); ++r)
        sharding_[static_cast<size_t>(op.results[r].value)] = placements->results[r].sharding;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        auto& slot = sharding_[static_cast<size_t>(op.inputs[i].value)];
        if (!slot) slot = placements->inputs[i].sharding;
      }
      times_[static_cast<size_t>(id)] =
          op_time(g_, id, s.local_index_box(op.space, mesh_, 0), in_layers(id) ? dev_ : outside);
    }
    // Fusion: an elementwise or layout op whose input is the single-use result of the op just
    // before it runs as that op's epilogue: the intermediate is neither written nor read back,
    // and no kernel is launched (the runtime fuses such chains; Megatron fuses bias-GeLU and
    // scale-mask-softmax). The saved traffic is taken off both ops.
    std::vector<int> uses(static_cast<size_t>(g_.num_values()));
    for (const Op& op : g_.ops())
      for (const Operand& in : op.inputs) ++uses[static_cast<size_t>(in.value)];
    for (ValueId v : g_.outputs()) ++uses[static_cast<size_t>(v)];
    std::vector<double> bytes(static_cast<size_t>(n_ops));
    std::vector<bool> fused(static_cast<size_t>(n_ops));
    for (OpId id = 0; id < n_ops; ++id)
      bytes[static_cast<size_t>(id)] = times_[static_cast<size_t>(id)].bytes;
    for (OpId id = 1; id < n_ops; ++id) {
      const Op& op = g_.op(id);
      if (!fusable(op.kind)) continue;
      for (const Operand& in : op.inputs) {
        OpId prod = g_.value(in.value).producer;
        if (prod != id - 1 || uses[static_cast<size_t>(in.value)] != 1) continue;
        double b = dev_.fuses_elementwise ? value_bytes(in.value) : 0;
        bytes[static_cast<size_t>(id)] = std::max(bytes[static_cast<size_t>(id)] - b, 0.0);
        bytes[static_cast<size_t>(prod)] = std::max(bytes[static_cast<size_t>(prod)] - b, 0.0);
        // A device without fusion (the CPU executor) still makes one kernel call per op.
        fused[static_cast<size_t>(id)] = dev_.fuses_elementwise;
      }
    }
    // Between two elementwise ops, a single-use value whose producer keeps its own input
    // (SwiGLU's silu(x) feeding the product) is recomputed by the fused kernel's backward rather
    // than kept (Megatron's fused SwiGLU keeps only its inputs).
    auto elementwise = [&](OpId id) {
      const OpCategory c = op_kind_info(g_.op(id).kind).category;
      return c == OpCategory::kUnary || c == OpCategory::kBinary;
    };
    for (OpId id = 0; id < n_ops && dev_.fuses_elementwise; ++id) {
      if (!elementwise(id)) continue;
      for (const Operand& in : g_.op(id).inputs) {
        OpId prod = g_.value(in.value).producer;
        if (prod >= 0 && uses[static_cast<size_t>(in.value)] == 1 && elementwise(prod) &&
            saves_inputs(g_.op(prod).kind))
          recomputed_.insert(in.value);
      }
    }
    for (OpId id = 0; id < n_ops; ++id)
      times_[static_cast<size_t>(id)] =
          with_bytes(times_[static_cast<size_t>(id)], bytes[static_cast<size_t>(id)],
                     fused[static_cast<size_t>(id)], dev_);
    if (dev_.fused_attention) price_fused_attention();
    // Reshard time and bytes per consuming op.
    comm_s_.assign(static_cast<size_t>(n_ops), 0.0);
    ep_comm_s_.assign(static_cast<size_t>(n_ops), 0.0);
    dp_comm_s_.assign(static_cast<size_t>(n_ops), 0.0);
    cp_comm_s_.assign(static_cast<size_t>(n_ops), 0.0);
    comm_bytes_.assign(static_cast<size_t>(n_ops), 0.0);
    for (const Reshard& r : prop_.reshards) {
      if (r.consumer < 0) continue;
      double s = 0, b = 0, ep = 0, dp = 0, cp = 0;
      HEDDLE_TRY(reshard_cost(r.value, r.from, r.to, &s, &b, &ep, &dp, &cp));
      comm_s_[static_cast<size_t>(r.consumer)] += s;
      ep_comm_s_[static_cast<size_t>(r.consumer)] += ep;
      dp_comm_s_[static_cast<size_t>(r.consumer)] += dp;
      cp_comm_s_[static_cast<size_t>(r.consumer)] += cp;
      comm_bytes_[static_cast<size_t>(r.consumer)] += b;
    }
    return {};
  }

  // Flash attention (DeviceProfile::fused_attention): each score contraction (two activations in,
  // a sequence-quadratic value out), the ops its scores flow through (scale, mask, softmax) and
  // the contraction that consumes them run as one kernel at attention_fraction() of the peak,
  // over half the score matrix when a causal mask is applied (the kernel skips the masked
  // blocks); the s x s values never reach memory. Found by structure, not by shape alone: a
  // value of shape [b, s, h] with h = s is not a score matrix.
  void price_fused_attention() {
    flash_.assign(static_cast<size_t>(g_.num_ops()), false);
    ring_merge_.assign(static_cast<size_t>(g_.num_ops()), 0.0);
    const int64_t cp_axis = mesh_.find("cp");
    const double cp = cp_axis >= 0 ? static_cast<double>(mesh_.size(cp_axis)) : 1;
    std::vector<std::vector<OpId>> consumers(static_cast<size_t>(g_.num_values()));
    for (OpId id = 0; id < g_.num_ops(); ++id)
      for (const Operand& in : g_.op(id).inputs)
        consumers[static_cast<size_t>(in.value)].push_back(id);
    auto is_param = [&](const Operand& o) { return g_.value(o.value).role == ValueRole::kParam; };
    for (OpId id = 0; id < g_.num_ops(); ++id) {
      const Op& op = g_.op(id);
      if (op_kind_info(op.kind).category != OpCategory::kContraction || op.results.size() != 1 ||
          op.inputs.size() != 2 || is_param(op.inputs[0]) || is_param(op.inputs[1]) ||
          !quadratic(op.results[0].value) || g_.type(op.results[0].value).rank() < 4)
        continue;
      // Follow the scores through single-consumer elementwise and row ops to the contraction
      // with the values.
      std::vector<OpId> chain = {id};
      ValueId v = op.results[0].value;
      bool causal = false, closed = false;
      while (!closed) {
        const auto& users = consumers[static_cast<size_t>(v)];
        if (users.size() != 1) break;
        const Op& next = g_.op(users.front());
        chain.push_back(users.front());
        causal = causal || next.kind == OpKind::kCausalMask;
        if (op_kind_info(next.kind).category == OpCategory::kContraction)
          closed = true;
        else if (!fusable(next.kind) || next.results.size() != 1)
          break;
        else
          v = next.results[0].value;
      }
      if (!closed) continue;
      const ValueId scores = op.results[0].value;
      const double n = value_bytes(scores) / dev_.element_bytes;
      const IVec& shape = g_.type(scores).shape();
      const double keys = static_cast<double>(shape[shape.size() - 1]);
      for (OpId c : chain) {
        OpTime& t = times_[static_cast<size_t>(c)];
        flash_[static_cast<size_t>(c)] = true;
        if (c != chain.front() && c != chain.back()) {
          t = OpTime{};  // inside the fused kernel
          continue;
        }
        const double d = std::max(t.flops / (2 * std::max(n, 1.0)), 1.0);
        OpTime f;
        f.flops = t.flops;
        f.compute_s =
            t.flops * (causal ? 0.5 : 1.0) / (dev_.peak_flops * dev_.attention_fraction(keys, d));
        f.seconds = f.compute_s + (c == chain.front() ? dev_.launch_s : 0);  // one launch
        t = f;
      }
      if (cp > 1) {
        // Per ring step: the partial output written and read back in the compute precision,
        // the fp32 accumulator read and written.
        const ValueId out = g_.op(chain.back()).results[0].value;
        const double elements = value_bytes(out) / dev_.element_bytes;
        ring_merge_[static_cast<size_t>(chain.back())] =
            cp * elements * (2 * dev_.element_bytes + 8) / stream_rate(dev_, false);
      }
    }
  }

  // Seconds and bytes sent of moving `v` from placement `from` to `to`; the seconds spent on
  // the ep/cp axes, on the dp axis and on the cp axis alone also into `ep_seconds`,
  // `dp_seconds` and `cp_seconds` when non-null.
  Status reshard_cost(ValueId v, const TensorSharding& from, const TensorSharding& to,
                      double* seconds, double* bytes, double* ep_seconds = nullptr,
                      double* dp_seconds = nullptr, double* cp_seconds = nullptr) const {
    auto plan = plan_reshard(g_.type(v), mesh_, from, to, comm_);
    HEDDLE_TRY(plan);
    double scale = dev_.element_bytes / 4.0;
    for (const ReshardStep& st : plan->steps) {
      int64_t group = mesh_.size(st.axis);
      double s = comm_.cost(st.op, st.axis, group, st.bytes * scale);
      *seconds += s;
      *bytes += moved_.cost(st.op, st.axis, group, st.bytes * scale);
      const std::string& axis = mesh_.axis(st.axis).name;
      if (ep_seconds && (axis == "ep" || axis == "cp")) *ep_seconds += s;
      if (dp_seconds && axis == "dp") *dp_seconds += s;
      if (cp_seconds && axis == "cp") *cp_seconds += s;
    }
    return {};
  }

  // What the executor does around the ops: copying every input and parameter tile out of the
  // feeds (at memcpy speed) and gathering every graph output onto every device.
  Result<PartCost> io() const {
    PartCost p;
    for (const auto* ids : {&g_.inputs(), &g_.params()})
      for (ValueId v : *ids) p.compute_s += value_bytes(v) / stream_rate(dev_, true);
    for (ValueId v : g_.outputs()) {
      const auto& s = sharding_[static_cast<size_t>(v)];
      if (!s) continue;
      HEDDLE_TRY(
          reshard_cost(v, *s, TensorSharding::replicated(mesh_.rank()), &p.comm_s, &p.comm_bytes));
    }
    return p;
  }

  double value_bytes(ValueId v) const {
    const auto& s = sharding_[static_cast<size_t>(v)];
    double n = s ? local_elements(g_.type(v), *s, mesh_) : static_cast<double>(g_.type(v).numel());
    return n * dev_.element_bytes;
  }

  // Sequence-quadratic values (attention scores and probabilities): two sequence dims, or one
  // sequence dim and another dim of the same extent (labels do not flow through every einsum).
  bool quadratic(ValueId v) const {
    const auto& seq = labels_.sequence[static_cast<size_t>(v)];
    const IVec& shape = g_.type(v).shape();
    int count = 0;
    int64_t extent = -1;
    for (size_t d = 0; d < seq.size(); ++d)
      if (seq[d]) ++count, extent = shape[static_cast<int64_t>(d)];
    if (count >= 2) return true;
    if (count == 0 || extent < 2) return false;
    int same = 0;
    for (int64_t e : shape) same += e == extent ? 1 : 0;
    return same >= 2;
  }

  // The cost of the ops for which `in(id)` holds.
  template <class Pred>
  PartCost part(Pred in) const {
    PartCost p;
    std::unordered_set<ValueId> seen;
    for (OpId id = 0; id < g_.num_ops(); ++id) {
      if (!in(id)) continue;
      const Op& op = g_.op(id);
      const OpTime& t = times_[static_cast<size_t>(id)];
      p.compute_s += t.seconds;
      p.flops += t.flops;
      p.comm_s += comm_s_[static_cast<size_t>(id)];
      p.ep_comm_s += ep_comm_s_[static_cast<size_t>(id)];
      p.dp_comm_s += dp_comm_s_[static_cast<size_t>(id)];
      p.cp_comm_s += cp_comm_s_[static_cast<size_t>(id)];
      p.comm_bytes += comm_bytes_[static_cast<size_t>(id)];
      bool attn = false;
      for (const Operand& r : op.results) attn = attn || quadratic(r.value);
      const bool flash = !flash_.empty() && flash_[static_cast<size_t>(id)];
      if (attn || flash) p.attention_s += t.seconds;
      if (flash) p.flash_s += t.seconds;
      if (reads_param(op)) p.linear_s += t.seconds;
      if (!ring_merge_.empty()) p.ring_merge_s += ring_merge_[static_cast<size_t>(id)];
      ++p.ops;
      for (const Operand& x : op.inputs) {
        const Value& v = g_.value(x.value);
        if (v.role != ValueRole::kParam && !saves_inputs(op.kind)) continue;
        if (!seen.insert(x.value).second) continue;
        if (v.role == ValueRole::kParam) {
          p.param_elements += value_bytes(x.value) / dev_.element_bytes;
        } else if (dtype_is_float(v.type.dtype()) && saves_inputs(op.kind)) {
          if (flash && quadratic(x.value)) continue;  // never leaves the fused kernel
          if (recomputed_.count(x.value)) continue;   // recomputed inside a fused chain
          double b = value_bytes(x.value);
          if (reads_param(op) && dev_.param_gemm_input_bytes > 0 && in_layers(id))
            b *= dev_.param_gemm_input_bytes / dev_.element_bytes;  // kept in fp8
          p.saved_bytes += b;
          if (quadratic(x.value)) p.attention_bytes += b;
        }
      }
    }
    return p;
  }

  bool in_layers(OpId id) const { return id >= layers_lo_ && id < layers_hi_; }

  bool reads_param(const Op& op) const {
    if (op_kind_info(op.kind).category != OpCategory::kContraction) return false;
    for (const Operand& in : op.inputs)
      if (g_.value(in.value).role == ValueRole::kParam) return true;
    return false;
  }

  PartCost range(int64_t lo, int64_t hi) const {
    return part([lo, hi](OpId id) { return id >= lo && id < hi; });
  }

 private:
  const Graph& g_;
  const Mesh& mesh_;
  const Propagation& prop_;
  const DeviceProfile& dev_;
  int64_t layers_lo_ = 0, layers_hi_ = INT64_MAX;  ///< layers_between(); all ops by default
  AlphaBetaCost comm_;
  BytesMovedCost moved_;
  DimLabels labels_;
  std::vector<std::optional<TensorSharding>> sharding_;
  std::vector<OpTime> times_;
  std::vector<bool> flash_;                 ///< per op: part of a fused attention kernel
  std::vector<double> ring_merge_;          ///< per op: PartCost::ring_merge_s
  std::unordered_set<ValueId> recomputed_;  ///< fused-chain values the backward recomputes
  std::vector<double> comm_s_, ep_comm_s_, dp_comm_s_, cp_comm_s_, comm_bytes_;
};

}  // namespace

Result<std::vector<PartCost>> cost_op_groups(const Graph& g, const Mesh& mesh,
                                             const Propagation& prop, const Cluster& cluster,
                                             const std::vector<int>& group, int groups) {
  HEDDLE_ASSERT(static_cast<int64_t>(group.size()) == g.num_ops())
      << group.size() << " groups for " << g.num_ops() << " ops";
  Analysis a(g, mesh, prop, cluster);
  HEDDLE_TRY(a.run());
  std::vector<PartCost> r;
  for (int k = 0; k < groups; ++k)
    r.push_back(a.part([&group, k](OpId id) { return group[static_cast<size_t>(id)] == k; }));
  return r;
}

Result<PartCost> cost_executor_io(const Graph& g, const Mesh& mesh, const Propagation& prop,
                                  const Cluster& cluster) {
  Analysis a(g, mesh, prop, cluster);
  HEDDLE_TRY(a.run());
  return a.io();
}

Result<ModelParts> cost_model_parts(const Graph& g, const Mesh& mesh, const Propagation& prop,
                                    const Cluster& cluster, const Graph* one_unit) {
  const int64_t n_ops = g.num_ops();
  Analysis a(g, mesh, prop, cluster);
  auto value_bytes = [&a](ValueId v) { return a.value_bytes(v); };
  const DeviceProfile& dev = cluster.device;
  ModelParts parts;
  if (!one_unit) {
    HEDDLE_TRY(a.run());
    for (ValueId v : g.outputs())
      if (dtype_is_float(g.type(v).dtype()))
        parts.output_elements += value_bytes(v) / dev.element_bytes;
    parts.prefix = a.range(0, n_ops);
    return parts;
  }
  int64_t unit = n_ops - one_unit->num_ops();
  HEDDLE_ASSERT(unit > 0) << "the two-unit graph must have more ops than the one-unit graph";
  std::set<std::string> known;
  for (ValueId p : one_unit->params()) known.insert(one_unit->value(p).name);
  int64_t start = -1;
  for (OpId id = 0; id < n_ops && start < 0; ++id)
    for (const Operand& in : g.op(id).inputs)
      if (g.value(in.value).role == ValueRole::kParam && !known.count(g.value(in.value).name)) {
        start = id;
        break;
      }
  if (start < unit || start + unit > n_ops)
    return Diagnostic(fmt::format("cannot find the repeating layers of model '{}'", g.name()));
  a.layers_between(start - unit, start + unit);
  HEDDLE_TRY(a.run());
  for (ValueId v : g.outputs())
    if (dtype_is_float(g.type(v).dtype()))
      parts.output_elements += value_bytes(v) / dev.element_bytes;
  parts.layered = true;
  parts.prefix = a.range(0, start - unit);
  parts.layer = a.range(start, start + unit);
  parts.suffix = a.range(start + unit, n_ops);
  // Values produced by the first unit and read by the second: what crosses a stage boundary.
  std::unordered_set<ValueId> crossing;
  for (OpId id = static_cast<OpId>(start); id < start + unit; ++id)
    for (const Operand& in : g.op(id).inputs) {
      OpId prod = g.value(in.value).producer;
      if (prod >= start - unit && prod < start && crossing.insert(in.value).second)
        parts.boundary_bytes += value_bytes(in.value);
    }
  std::unordered_set<ValueId> prefix_params;
  for (OpId id = 0; id < start - unit; ++id)
    for (const Operand& in : g.op(id).inputs)
      if (g.value(in.value).role == ValueRole::kParam) prefix_params.insert(in.value);
  std::unordered_set<ValueId> shared;
  for (OpId id = static_cast<OpId>(start + unit); id < n_ops; ++id)
    for (const Operand& in : g.op(id).inputs)
      if (prefix_params.count(in.value) && shared.insert(in.value).second)
        parts.shared_param_elements += value_bytes(in.value) / dev.element_bytes;
  return parts;
}

}  // namespace heddle::cost
