#include "heddle/runtime/Lower.h"

#include <algorithm>
#include <map>
#include <optional>

#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/CausalOperand.h"
#include "heddle/sharding/Reshard.h"

namespace heddle {

namespace {

// The order ops are lowered in: the graph's, except that an optimizer update (AdamW, SGD with
// momentum) whose inputs no other update computes runs right after the last op that computes one
// of them, that is as soon as its gradient is complete, while the gradient is still in the caches
// (build_train_step appends every update after the whole backward pass). Updates that become
// ready after the same op keep their graph order. With `early_updates` false: the graph's order
// (lowering passes false on meshes of several devices, see LowerOptions::early_updates).
std::vector<OpId> lowering_order(const Graph& g, bool early_updates) {
  const auto n = static_cast<size_t>(g.num_ops());
  std::vector<OpId> order;
  order.reserve(n);
  if (!early_updates) {
    for (OpId i = 0; i < g.num_ops(); ++i) order.push_back(i);
    return order;
  }
  auto update = [&](OpId i) {
    return op_kind_info(g.op(i).kind).category == OpCategory::kOptimizer;
  };
  std::vector<std::vector<OpId>> after(n + 1);  // after[k + 1]: updates ready after op k
  std::vector<bool> moved(n, false);
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (!update(i)) continue;
    OpId last = -1;
    bool movable = true;
    for (const auto& x : g.op(i).inputs) {
      const OpId p = g.value(x.value).producer;  // kNoOp (-1) for inputs and parameters
      movable = movable && (p == kNoOp || !update(p));
      last = std::max(last, p);
    }
    if (!movable) continue;
    moved[i] = true;
    after[static_cast<size_t>(last + 1)].push_back(i);
  }
  for (OpId u : after[0]) order.push_back(u);
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (!moved[i]) order.push_back(i);
    for (OpId u : after[static_cast<size_t>(i + 1)]) order.push_back(u);
  }
  return order;
}

// `s` with every pending sum combined: its Partial axes become Replicate.
TensorSharding without_partial(const TensorSharding& s) {
  TensorSharding out = s;
  for (int64_t a = 0; a < s.rank(); ++a)
    if (s.at(a).is_partial()) out = out.with(a, Placement::replicate());
  return out;
}

// Emits the instructions every device runs once, into a ProgramTemplate whose per-device boxes
// and groups are recipes (instantiate() evaluates them for one device).
class Lowering {
 public:
  Lowering(const Graph& g, const ShardingPlan& plan, const LowerOptions& o)
      : g_(g),
        plan_(plan),
        mesh_(plan.mesh),
        o_(o),
        order_(lowering_order(g, o.early_updates && plan.mesh.num_devices() == 1)),
        placement_(g.num_values()) {
    t_.mesh = plan.mesh;
    t_.strategies = plan.ops;
    last_use_.assign(static_cast<size_t>(g.num_values()), -1);
    for (OpId i : order_)  // the reader lowered last
      for (const auto& in : g.op(i).inputs) last_use_[in.value] = i;
    for (ValueId v : g.outputs()) last_use_[v] = g.num_ops();  // never freed
  }

  Result<ProgramTemplate> run() {
    HEDDLE_TRY(plan_.check(g_));
    for (OpId i : order_) HEDDLE_TRY(op(i));
    for (ValueId v : g_.outputs()) {
      if (!placement_[v]) {
        auto pin = plan_.pinned.find(v);
        HEDDLE_TRY(load(
            v, pin == plan_.pinned.end() ? TensorSharding::replicated(mesh_.rank()) : pin->second));
      }
      HEDDLE_TRY(reshard(v, o_.replicate_outputs ? TensorSharding::replicated(mesh_.rank())
                                                 : without_partial(*placement_[v])));
    }
    return std::move(t_);
  }

 private:
  const CommCost& cost() const { return o_.cost ? *o_.cost : bytes_cost_; }
  const IVec& shape(ValueId v) const { return g_.type(v).shape(); }

  int32_t sharding(const TensorSharding& s) {
    t_.shardings.push_back(s);
    return static_cast<int32_t>(t_.shardings.size() - 1);
  }

  Status load(ValueId v, const TensorSharding& s) {
    InstrTemplate in;
    in.kind = Instr::Kind::kLoad;
    in.value = v;
    in.sharding = sharding(s);
    t_.instrs.push_back(std::move(in));
    placement_[v] = s;
    return {};
  }

  Status reshard(ValueId v, const TensorSharding& want) {
    if (*placement_[v] == want) return {};
    auto plan = plan_reshard(g_.type(v), mesh_, *placement_[v], want, cost());
    HEDDLE_TRY(plan);
    for (const ReshardStep& step : plan->steps) {
      InstrTemplate in;
      in.kind = Instr::Kind::kCollective;
      in.value = v;
      in.collective = step.op;
      if (step.from.at(step.axis).is_partial()) in.monoid = step.from.at(step.axis).monoid();
      in.axis = static_cast<int32_t>(step.axis);
      in.sharding = sharding(step.to);
      t_.instrs.push_back(std::move(in));
    }
    placement_[v] = want;
    return {};
  }

  Status op(OpId id) {
    const Op& op = g_.op(id);
    const OpStrategy& strat = plan_.ops[id];
    auto pl = derive_placements(g_, id, mesh_, strat);
    HEDDLE_TRY(pl);
    std::map<ValueId, TensorSharding> wanted;
    bool halo = false;
    for (const auto& x : pl->inputs) halo |= x.has_halo();
    std::optional<Ring> ring;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      ValueId v = op.inputs[k].value;
      const TensorSharding& want = pl->inputs[k].sharding;
      auto [it, fresh] = wanted.emplace(v, want);
      if (!fresh && it->second != want)
        return Diagnostic("op '" + std::string(op_kind_name(op.kind)) + "' defining " +
                          value_ref(g_.value(op.results[0].value).name) + " reads " +
                          value_ref(g_.value(v).name) + " twice with different placements (" +
                          it->second.to_string() + " and " + want.to_string() +
                          "); lowering does not support that yet");
      if (!placement_[v]) {
        auto pin = plan_.pinned.find(v);
        HEDDLE_TRY(load(v, pin == plan_.pinned.end() ? want : pin->second));
      }
      if (!ring && !halo && (ring = ring_of(id, k, want))) continue;  // gathered block by block
      HEDDLE_TRY(reshard(v, want));
    }
    if (ring) {
      emit_ring(id, *ring);
      finish(id, *pl);
      return {};
    }
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (!pl->inputs[k].has_halo()) continue;
      InstrTemplate in;
      in.kind = Instr::Kind::kFetch;
      in.value = op.inputs[k].value;
      in.op = id;
      in.input = static_cast<int32_t>(k);
      in.sharding = sharding(*placement_[in.value]);
      t_.instrs.push_back(std::move(in));
    }
    InstrTemplate call;
    call.kind = Instr::Kind::kKernel;
    call.calls.push_back(id);
    t_.instrs.push_back(std::move(call));
    finish(id, *pl);
    return {};
  }

  // After op `id`'s kernel: its results' placements, and frees of what it read last.
  void finish(OpId id, const StrategyPlacements& pl) {
    const Op& op = g_.op(id);
    for (size_t k = 0; k < op.results.size(); ++k)
      placement_[op.results[k].value] = pl.results[k].sharding;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      ValueId v = op.inputs[k].value;
      bool first = true;
      for (size_t j = 0; j < k; ++j) first &= op.inputs[j].value != v;
      if (first && last_use_[v] == id) free(v);
    }
    for (const auto& r : op.results)
      if (last_use_[r.value] < 0) free(r.value);  // never used
  }

  // Ring attention (docs/sharding.md): an input gathered on the ring axis whose blocks one index
  // dim of the op walks, so the op can run block by block as the blocks arrive.
  struct Ring {
    size_t input = 0;
    TensorSharding from, to;
    int64_t index_dim = -1, tensor_dim = -1;
    bool reduce = false;
  };

  // Input `k` of op `id` as a ring when plan_.ring_axis > 0 devices and its reshard to `want` is
  // one all-gather there of a tensor dim only that axis shards, read with coefficient 1 and a
  // unit window by exactly one index dim that the op's strategy leaves whole.
  std::optional<Ring> ring_of(OpId id, size_t k, const TensorSharding& want) const {
    const int64_t a = plan_.ring_axis;
    if (a < 0 || mesh_.size(a) < 2) return std::nullopt;
    const Op& op = g_.op(id);
    for (size_t j = 0; j < op.inputs.size(); ++j)
      if (j != k && op.inputs[j].value == op.inputs[k].value) return std::nullopt;
    const TensorSharding& from = *placement_[op.inputs[k].value];
    if (!from.at(a).is_shard() || !want.at(a).is_replicate() ||
        from.with(a, Placement::replicate()) != want)
      return std::nullopt;
    const int64_t d = from.at(a).dim();
    const IndexProjection& proj = op.inputs[k].proj;
    if (from.axes_sharding(d).size() != 1 || proj.window()[d] != 1) return std::nullopt;
    int64_t i = -1;
    for (int64_t c = 0; c < proj.index_rank(); ++c)
      if (proj.map().at(d, c) != 0) {
        if (i >= 0) return std::nullopt;
        i = c;
      }
    if (i < 0 || proj.map().at(d, i) != 1) return std::nullopt;
    for (int64_t r = 0; r < proj.tensor_rank(); ++r)
      if (r != d && proj.map().at(r, i) != 0) return std::nullopt;
    for (int64_t x = 0; x < mesh_.rank(); ++x)
      if (plan_.ops[id].dim(x) == i) return std::nullopt;
    return Ring{k, from, want, i, d, op.space.dim(i).is_reduce()};
  }

  // Op `id` with input r.input arriving around the ring: its kernel on the block the device
  // holds, then per step the next block received (send to the next member, receive from the
  // previous) and the kernel on it; the value ends gathered, as the all-gather would leave it.
  void emit_ring(OpId id, const Ring& r) {
    const ValueId v = g_.op(id).inputs[r.input].value;
    const int32_t from = sharding(r.from), to = sharding(r.to);
    const auto axis = static_cast<int32_t>(plan_.ring_axis);
    std::optional<CausalBlocks> hidden;
    if (o_.skip_hidden_blocks) hidden = causal_blocks(g_, id, r.input, r.reduce);
    for (int32_t s = 0; s < mesh_.size(axis); ++s) {
      if (s > 0) {
        InstrTemplate step;
        step.kind = Instr::Kind::kCollective;
        step.value = v;
        step.collective = Collective::kSendRecv;
        step.axis = axis;
        step.sharding = from;
        step.whole = to;
        step.ring = s;
        t_.instrs.push_back(std::move(step));
      }
      InstrTemplate call;
      call.kind = Instr::Kind::kKernel;
      call.calls.push_back(id);
      call.axis = axis;
      call.input = static_cast<int32_t>(r.input);
      call.sharding = from;
      call.ring = s;
      call.ring_dim = static_cast<int32_t>(r.index_dim);
      call.ring_tensor_dim = static_cast<int32_t>(r.tensor_dim);
      call.combine = s > 0 && r.reduce;
      if (s > 0) call.hidden = hidden;  // block 0, which defines the results, always runs
      t_.instrs.push_back(std::move(call));
    }
    placement_[v] = r.to;
  }

  void free(ValueId v) {
    InstrTemplate in;
    in.kind = Instr::Kind::kFree;
    in.value = v;
    t_.instrs.push_back(std::move(in));
  }

  const Graph& g_;
  const ShardingPlan& plan_;
  const Mesh& mesh_;
  const LowerOptions& o_;
  std::vector<OpId> order_;  // lowering_order()
  BytesMovedCost bytes_cost_;
  std::vector<std::optional<TensorSharding>> placement_;
  std::vector<OpId> last_use_;  // per value: the op lowered last among its readers
  ProgramTemplate t_;
};

// True when op `op` reads value `v`.
bool reads(const Op& op, ValueId v) {
  for (const auto& x : op.inputs)
    if (x.value == v) return true;
  return false;
}

// Merges a kernel instruction with the next kernel (past frees, and past loads, which move before
// the chain) when the next op is elementwise (or the softmax of a chain of scale and causal_mask
// ops ending with the mask) and reads the chain's last result, which nothing else uses: that result
// becomes a temporary. Never onto a product whose result a causal mask hides in part. A norm_grad
// also joins a chain of norm_grads of the same inputs (no temporary: each result is stored). (A
// batch norm's `mul` by the scale and `add` of the shift have the shift's load between them.) A
// chain that starts with a convolution also takes an elementwise op that does not read its last
// result when the kernel after it reads both (the reshape of a bias before its `add`; the `sigmoid`
// of SiLU before its `mul`), so the whole epilogue follows the convolution in one instruction
// (ops/Chain.h runs it as the convolution's post-ops); the last result becomes a temporary once
// every use of it is inside the chain. Never when the next op reads a value that a call of the
// chain reads through a fetched halo tile: a chain holds one tile per value (a reversal `%a(15 -
// i)` fused with a `mul` reading `%a(i)` would read its own block from the halo tile).
void fuse(const Graph& g, ProgramTemplate& p) {
  std::vector<std::vector<ValueId>> fetched(static_cast<size_t>(g.num_ops()));
  for (const auto& in : p.instrs)
    if (in.kind == Instr::Kind::kFetch) fetched[in.op].push_back(in.value);
  auto reads_fetched = [&](const InstrTemplate& chain, const Op& next) {
    for (OpId c : chain.calls)
      for (ValueId v : fetched[c])
        for (const auto& x : next.inputs)
          if (x.value == v) return true;
    return false;
  };
  // Readers per value: an op that reads a value twice (a gradient whose dy stands in for x)
  // counts once.
  std::vector<int64_t> uses(static_cast<size_t>(g.num_values()), 0);
  for (const Op& op : g.ops())
    for (size_t k = 0; k < op.inputs.size(); ++k)
      if (std::none_of(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(k),
                       [&](const Operand& x) { return x.value == op.inputs[k].value; }))
        ++uses[op.inputs[k].value];
  for (ValueId v : g.outputs()) uses[v] += 1000;  // outputs must be stored
  std::vector<InstrTemplate> out;
  std::vector<InstrTemplate> deferred;  // frees and loads after the chain in out.back(), in order
  ValueId pending = -1;  // a conv chain's result read again by a later op (see above)
  auto flush = [&] {
    for (auto& f : deferred) out.push_back(std::move(f));
    deferred.clear();
  };
  auto freed = [&](ValueId v) {
    for (const auto& f : deferred)
      if (f.kind == Instr::Kind::kFree && f.value == v) return true;
    return false;
  };
  // The op of the next kernel instruction after position i when only loads and frees lie
  // between, else null.
  auto next_kernel = [&](size_t i) -> const Op* {
    for (size_t k = i + 1; k < p.instrs.size(); ++k) {
      const InstrTemplate& x = p.instrs[k];
      if (x.kind == Instr::Kind::kKernel)
        return x.calls.size() == 1 && x.ring < 0 ? &g.op(x.calls[0]) : nullptr;
      if (x.kind != Instr::Kind::kLoad && x.kind != Instr::Kind::kFree) return nullptr;
    }
    return nullptr;
  };
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    InstrTemplate& in = p.instrs[i];
    // A ring's block kernels are never fused: each covers one block of its op.
    bool after_kernel =
        !out.empty() && out.back().kind == Instr::Kind::kKernel && out.back().ring < 0;
    if (after_kernel &&
        (in.kind == Instr::Kind::kFree || (in.kind == Instr::Kind::kLoad && !freed(in.value)))) {
      deferred.push_back(std::move(in));
      continue;
    }
    if (in.kind == Instr::Kind::kKernel && after_kernel && in.ring < 0) {
      InstrTemplate& chain = out.back();
      const Op& next = g.op(in.calls[0]);
      ValueId last = g.op(chain.calls.back()).results[0].value;
      bool single = g.op(chain.calls.back()).results.size() == 1;
      // A product whose result a causal mask hides in part runs alone (its kernel computes only
      // the visible blocks; fused, the product would fill the hidden ones too).
      const Op& first = g.op(chain.calls[0]);
      auto causal = first.kind == OpKind::kEinsum && chain.calls.size() == 1
                        ? kernels::causal_operand(g, chain.calls[0])
                        : std::nullopt;
      // A softmax joins a chain of scale and causal_mask ops that ends with the mask whose result
      // it reads (attention's scores to probabilities: one pass per row, ops/Chain.h).
      const bool masked_softmax =
          next.kind == OpKind::kSoftmax && g.op(chain.calls.back()).kind == OpKind::kCausalMask &&
          std::all_of(chain.calls.begin(), chain.calls.end(), [&](OpId c) {
            return g.op(c).kind == OpKind::kScale || g.op(c).kind == OpKind::kCausalMask;
          });
      bool merge = (is_elementwise(next.kind) || masked_softmax) && reads(next, last) &&
                   uses[last] == 1 && single && !reads_fetched(chain, next) &&
                   !(causal && causal->result);
      // Gradients of one norm (dx, the scale's, the shift's: norm_grads of the same inputs) one
      // after another: one instruction, whose kernel reads each row once (it runs them one by one
      // where they are not of one layernorm or rmsnorm).
      const bool sibling = !merge && next.kind == OpKind::kNormGrad &&
                           std::all_of(chain.calls.begin(), chain.calls.end(), [&](OpId c) {
                             const Op& o = g.op(c);
                             return o.kind == OpKind::kNormGrad && o.inputs == next.inputs;
                           });
      bool hold = false;
      if (!merge && pending < 0 && single &&
          (is_elementwise(next.kind) || next.kind == OpKind::kReshape) &&
          next.results.size() == 1 && g.op(chain.calls[0]).kind == OpKind::kConv2d &&
          in.calls.size() == 1 && !reads_fetched(chain, next)) {
        const Op* after = next_kernel(i);
        hold = after && is_elementwise(after->kind) && reads(*after, last) &&
               reads(*after, next.results[0].value) && uses[next.results[0].value] == 1;
      }
      if (merge || hold || sibling) {
        chain.calls.push_back(in.calls[0]);
        if (merge) {
          chain.temporaries.push_back(last);
          if (pending >= 0) {
            int64_t inside = 0;
            for (OpId c : chain.calls) inside += reads(g.op(c), pending);
            if (inside == uses[pending]) chain.temporaries.push_back(pending);
            pending = -1;
          }
        } else if (hold) {
          pending = last;
        }
        InstrTemplate merged = std::move(out.back());
        out.pop_back();
        std::vector<InstrTemplate> kept;
        for (auto& f : deferred) {
          if (f.kind == Instr::Kind::kLoad)
            out.push_back(std::move(f));  // before the chain, which now reads it
          else if (f.value != last || !merge)
            kept.push_back(std::move(f));
        }
        out.push_back(std::move(merged));
        deferred = std::move(kept);
        continue;
      }
    }
    pending = -1;
    flush();
    out.push_back(std::move(in));
  }
  flush();
  p.instrs = std::move(out);
}

}  // namespace

Result<ProgramTemplate> lower_template(const Graph& g, const ShardingPlan& plan,
                                       const LowerOptions& options) {
  auto t = Lowering(g, plan, options).run();
  HEDDLE_TRY(t);
  if (options.fuse_elementwise) fuse(g, *t);
  return t;
}

Result<std::vector<DeviceProgram>> lower(const Graph& g, const ShardingPlan& plan,
                                         const LowerOptions& options) {
  auto t = lower_template(g, plan, options);
  HEDDLE_TRY(t);
  std::vector<DeviceProgram> progs;
  if (options.devices.empty())
    for (int64_t d = 0; d < plan.mesh.num_devices(); ++d) progs.push_back(instantiate(g, *t, d));
  for (int64_t d : options.devices) {
    HEDDLE_ASSERT(d >= 0 && d < plan.mesh.num_devices()) << "device " << d;
    progs.push_back(instantiate(g, *t, d));
  }
  return progs;
}

namespace {

// Adds the counts of program `p` to `s`.
void add_stats(const Graph& g, const DeviceProgram& p, ProgramStats& s) {
  BytesMovedCost bytes;
  for (const auto& in : p.instrs) {
    switch (in.kind) {
      case Instr::Kind::kKernel:
        s.kernels += static_cast<int64_t>(in.calls.size());
        s.fused += in.calls.size() > 1;
        break;
      case Instr::Kind::kCollective: {
        ++s.collectives;
        s.ring_steps += in.ring > 0;
        double elem = static_cast<double>(dtype_bytes(g.type(in.value).dtype()));
        // The S of the formulas: gathered size for gathers, the input size for the others
        // (equal to the output size times the group for reduce-scatter).
        double out_bytes = static_cast<double>(in.box.volume()) * elem;
        auto n = static_cast<double>(in.group.size());
        double S = in.collective == Collective::kReduceScatter ? out_bytes * n : out_bytes;
        if (in.collective == Collective::kAllToAll) S = out_bytes;
        s.comm_bytes += bytes.cost(in.collective, 0, static_cast<int64_t>(in.group.size()), S);
        break;
      }
      case Instr::Kind::kFetch:
        ++s.fetches;
        break;
      default:
        break;
    }
  }
}

}  // namespace

ProgramStats program_stats(const Graph& g, const std::vector<DeviceProgram>& programs) {
  ProgramStats s;
  for (const auto& p : programs) add_stats(g, p, s);
  return s;
}

ProgramStats program_stats(const Graph& g, const ProgramTemplate& t) {
  ProgramStats s;
  for (int64_t d = 0; d < t.mesh.num_devices(); ++d) add_stats(g, instantiate(g, t, d), s);
  return s;
}

}  // namespace heddle
