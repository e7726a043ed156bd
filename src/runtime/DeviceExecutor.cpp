#include "heddle/runtime/DeviceExecutor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <variant>

#include "DeviceExecutorSteps.h"
#include "RingPoster.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/CausalOperand.h"
#include "heddle/ops/Chain.h"
#include "heddle/runtime/ArenaPlan.h"

namespace heddle {

namespace {

thread_local int kernel_depth = 0;

// Marks the calling thread as inside a kernel call (see in_kernel_call()).
struct KernelScope {
  KernelScope() { ++kernel_depth; }
  ~KernelScope() { --kernel_depth; }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};

int64_t element_bytes(DType t) { return dtype_is_float(t) ? 4 : 8; }

// The offset (in elements) of `box` in a whole row-major tensor of `shape` when the box is one
// contiguous run of it, else -1.
int64_t contiguous_offset(const IVec& shape, const Box& box) {
  int64_t r = shape.size();
  if (box.empty()) return 0;
  int64_t partial = -1;  // the last dim the box does not cover whole
  for (int64_t d = 0; d < r; ++d)
    if (box.start()[d] != 0 || box.end()[d] != shape[d]) partial = d;
  for (int64_t d = 0; d < partial; ++d)
    if (box.end()[d] - box.start()[d] != 1) return -1;
  int64_t offset = 0, stride = 1;
  for (int64_t d = r - 1; d >= 0; --d) {
    offset += box.start()[d] * stride;
    stride *= shape[d];
  }
  return offset;
}

// True when `op` computes its first input unchanged: the gradient of `add` (either operand) and of
// `sub` for its first operand pass dy through, point for point.
bool passes_through(const Op& op) {
  if (op.kind != OpKind::kElementwiseGrad || op.space.has_reduce() || op.inputs.empty() ||
      op.results.size() != 1 || op.inputs[0].padded || !(op.inputs[0].proj == op.results[0].proj))
    return false;
  auto attr = [&](const char* name) { return op.attrs.find(name); };
  auto fn = attr("fn");
  if (fn == op.attrs.end()) return false;
  const auto* f = std::get_if<std::string>(&fn->second);
  if (!f) return false;
  if (*f == "add") return true;
  auto wrt = attr("wrt");
  const auto* w = wrt == op.attrs.end() ? nullptr : std::get_if<int64_t>(&wrt->second);
  return *f == "sub" && (w == nullptr || *w == 0);
}

// True when a reshape over `box` moves no element: every point reads its input at the same
// row-major offset in the input tile (`in_region`) as it writes in its result tile (`out_region`),
// as splitting a row-major [b, s, h*d] into [b, s, h, d] does. Its result is then a view of the
// input's tile. Both offsets are affine in the point, so equal coefficients (of the index dims
// the box spans) and equal offsets at the box start make them equal everywhere.
bool moves_nothing(const Op& op, const Box& box, const Box& in_region, const Box& out_region) {
  if (op.kind != OpKind::kReshape || op.inputs.size() != 1 || op.results.size() != 1 ||
      op.inputs[0].padded)
    return false;
  auto offsets = [&](const IndexProjection& p, const Box& region, std::vector<int64_t>* coef) {
    for (int64_t w : p.window().values())
      if (w != 1) return false;
    const AffineMap& m = p.map();
    int64_t stride = 1, base = 0;
    coef->assign(static_cast<size_t>(box.rank()), 0);
    for (int64_t r = m.out_rank() - 1; r >= 0; --r) {
      int64_t at_start = m.offset()[r];
      for (int64_t k = 0; k < box.rank(); ++k) {
        at_start += m.at(r, k) * box.start()[k];
        (*coef)[k] += m.at(r, k) * stride;
      }
      base += (at_start - region.start()[r]) * stride;
      stride *= region.end()[r] - region.start()[r];
    }
    coef->push_back(base);
    return true;
  };
  std::vector<int64_t> ci, co;
  if (!offsets(op.inputs[0].proj, in_region, &ci) || !offsets(op.results[0].proj, out_region, &co))
    return false;
  for (int64_t k = 0; k < box.rank(); ++k)
    if (box.end()[k] - box.start()[k] > 1 && ci[k] != co[k]) return false;
  return ci.back() == co.back() && out_region.volume() <= in_region.volume();
}

// A ring step (cp_comm=ring): a send-recv that stays where the program put it, like a fetch.
bool ring_step_instr(const Instr& in) { return in.kind == Instr::Kind::kCollective && in.ring > 0; }

// One batch of collectives: a single call as itself, several through collectives().
Status run_batch(Communicator& comm, const std::vector<CollectiveCall>& b) {
  const CollectiveCall& k = b[0];
  return b.size() == 1 ? comm.collective(k.c, *k.group, *k.mine, *k.out, k.monoid)
                       : comm.collectives(b);
}

// True when instruction `in` reads, defines or frees `v`'s tile.
bool touches(const Graph& g, const Instr& in, ValueId v) {
  if (in.kind != Instr::Kind::kKernel) return in.value == v;
  for (const KernelCall& kc : in.calls) {
    const Op& op = g.op(kc.op);
    for (const auto& x : op.inputs)
      if (x.value == v) return true;
    for (const auto& r : op.results)
      if (r.value == v) return true;
  }
  return false;
}

// The program's instructions in the order they run. With `batch`, each collective moves up to
// just after the previous collective when nothing in between touches its value (a halo fetch
// stops it: it too meets the peers), so collectives the program issues close together (a data
// parallel step's gradient all-reduces, each followed by its optimizer update) run back to back
// and the executor issues them as one batch. Collectives keep their relative order.
std::vector<const Instr*> run_order(const Graph& g, const DeviceProgram& p, bool batch) {
  std::vector<const Instr*> order;
  order.reserve(p.instrs.size());
  size_t after_last = 0;  // where the next collective may go: just after the last one
  bool any = false;
  for (const Instr& in : p.instrs) {
    if (in.kind == Instr::Kind::kFetch || ring_step_instr(in)) any = false;
    if (!batch || in.kind != Instr::Kind::kCollective || ring_step_instr(in)) {
      order.push_back(&in);
      continue;
    }
    bool hoist = any;
    for (size_t i = after_last; i < order.size() && hoist; ++i)
      hoist = !touches(g, *order[i], in.value);
    if (!hoist) after_last = order.size();
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(after_last), &in);
    ++after_last;
    any = true;
  }
  return order;
}

}  // namespace

bool in_kernel_call() { return kernel_depth > 0; }

// Walks the program once: which buffer each instruction reads and defines, and every buffer's
// lifetime in positions (one per load, collective, fetch and kernel call).
class DeviceExecutor::Compiler {
 public:
  explicit Compiler(DeviceExecutor& x) : x_(x), g_(x.g_) {}

  void run() {
    const std::vector<const Instr*> order = run_order(g_, x_.program_, x_.batch_collectives_);
    for (size_t i = 0; i < order.size();) {
      if (i + 1 < order.size() && order[i]->kind == Instr::Kind::kKernel && order[i]->ring >= 0 &&
          ring_step_instr(*order[i + 1])) {
        overlap(*order[i], *order[i + 1]);
        i += 2;
        continue;
      }
      if (order[i]->kind != Instr::Kind::kCollective || ring_step_instr(*order[i])) {
        instr(*order[i++]);
        continue;
      }
      if (local_slice(*order[i])) {
        ++i;
        continue;
      }
      // A batch ends before a collective of a value it already holds: that one sends what an
      // earlier one of the batch receives. Local slices among its collectives run before it
      // (their values are none of the batch's).
      std::vector<const Instr*> batch{order[i]};
      size_t j = i + 1;
      auto fresh = [&](size_t k) {
        for (size_t m = i; m < k; ++m)
          if (order[m]->value == order[k]->value) return false;
        return true;
      };
      for (; x_.batch_collectives_ && j < order.size() &&
             order[j]->kind == Instr::Kind::kCollective && !ring_step_instr(*order[j]) && fresh(j);
           ++j)
        if (!local_slice(*order[j])) batch.push_back(order[j]);
      collectives(batch);
      i = j;
    }
    for (int b : held_) x_.buffers_[b].last = std::numeric_limits<int64_t>::max();
    // Outputs live to the end of the program.
    for (ValueId v : g_.outputs()) {
      auto it = tiles_.find(v);
      if (it == tiles_.end()) continue;
      x_.buffers_[it->second].last = std::numeric_limits<int64_t>::max();
      out_buffers_.emplace_back(v, it->second);
    }
    carry_view_lifetimes(x_.buffers_);
  }

  std::vector<std::pair<ValueId, int>> out_buffers_;

 private:
  int define(ValueId v, const Box& region) {
    Buffer b;
    DType t = g_.type(v).dtype();
    b.tensor = Tensor::view(t, region, nullptr);
    b.first = b.last = pos_;
    b.bytes = region.volume() * element_bytes(t);
    x_.buffers_.push_back(std::move(b));
    return static_cast<int>(x_.buffers_.size() - 1);
  }
  // A loaded tile of `v`: a view of the feed where `box` is one run of it (no arena bytes), else
  // a copy load() makes.
  int define_load(ValueId v, const Box& box) {
    const int b = define(v, box);
    x_.buffers_[b].loaded = true;
    if (int64_t off = contiguous_offset(g_.type(v).shape(), box); off >= 0) {
      x_.buffers_[b].bytes = 0;
      x_.buffers_[b].feed_offset = off;
    }
    return b;
  }
  void use(int b) { x_.buffers_[b].last = std::max(x_.buffers_[b].last, pos_); }
  int tile(ValueId v) const {
    auto it = tiles_.find(v);
    HEDDLE_ASSERT(it != tiles_.end()) << "device " << x_.program_.device << " reads "
                                      << value_ref(g_.value(v).name) << ", which it does not hold";
    return it->second;
  }

  void instr(const Instr& in) {
    Step s;
    s.kind = in.kind;
    s.instr = &in;
    s.value = in.value;
    switch (in.kind) {
      case Instr::Kind::kLoad: {
        s.out = define_load(in.value, in.box);
        tiles_[in.value] = s.out;
        ++pos_;
        break;
      }
      case Instr::Kind::kCollective:  // collectives() handles them, but for ring steps
        HEDDLE_ASSERT(in.ring > 0) << "a collective outside collectives()";
        ring_step(in, s);
        break;
      case Instr::Kind::kFetch:
        s.in = tile(in.value);
        use(s.in);
        hold({s.in});
        s.out = define(in.value, in.box);
        halos_[in.value] = s.out;
        ++pos_;
        break;
      case Instr::Kind::kKernel: {
        if (in.ring >= 0) {
          ring_block(in, s);
          break;
        }
        if (alias(in) || view(in)) return;  // no step: the result is (a view of) its input's tile
        std::map<ValueId, int> temps;
        for (const KernelCall& kc : in.calls) {
          const Op& op = g_.op(kc.op);
          Call c;
          c.op = &op;
          c.box = kc.box;
          c.causal = kernels::causal_operand(g_, kc.op);
          for (const auto& x : op.inputs) {
            int b;
            if (auto h = halos_.find(x.value); h != halos_.end()) {
              b = h->second;
            } else if (auto t = temps.find(x.value); t != temps.end()) {
              b = t->second;
            } else {
              b = tile(x.value);
            }
            use(b);
            c.in_buffers.push_back(b);
          }
          for (const auto& r : op.results)
            c.out_buffers.push_back(define(r.value, r.proj.image(kc.box)));
          for (const auto& x : op.inputs) halos_.erase(x.value);
          for (size_t k = 0; k < op.results.size(); ++k) {
            ValueId v = op.results[k].value;
            bool temp =
                std::find(in.temporaries.begin(), in.temporaries.end(), v) != in.temporaries.end();
            (temp ? temps : tiles_)[v] = c.out_buffers[k];
          }
          s.calls.push_back(std::move(c));
        }
        // One position for the whole instruction: a fused chain reads its inputs while it writes
        // every result, a block at a time, so none of them may share memory.
        ++pos_;
        break;
      }
      case Instr::Kind::kFree:
        tiles_.erase(in.value);
        return;  // no step
    }
    x_.steps_.push_back(std::move(s));
  }

  // A ring step: sends the block received last (step 1: the device's own tile), receives the
  // previous member's into a buffer of its own and copies it into the gathered tile, which step
  // 1 defines (and fills with the device's block) and which is the value's tile from then on.
  void ring_step(const Instr& in, Step& s) {
    const ValueId v = in.value;
    s.kind = Instr::Kind::kFetch;  // run as a point-to-point exchange (run_step)
    s.in = in.ring == 1 ? tile(v) : ring_sent_.at(v);
    use(s.in);
    hold({s.in});
    s.out = define(v, in.box);
    if (in.ring == 1) {
      s.own = s.in;
      s.whole = define(v, in.whole);
      tiles_[v] = s.whole;
    } else {
      s.whole = tile(v);
      use(s.whole);
    }
    ring_sent_[v] = s.out;
    ++pos_;
  }

  // A ring block's kernel followed by the ring's next step: the step runs first, posted, and the
  // kernel while its exchange is in flight (the kernel reads the blocks the device already holds,
  // the step writes the next block's part of the gathered tile). Both are compiled in program
  // order, then swapped; every buffer either touches lives across both positions, so none of them
  // shares memory with another while they run at once.
  void overlap(const Instr& kernel, const Instr& step) {
    const int64_t p = pos_;
    const size_t k = x_.steps_.size();
    instr(kernel);
    instr(step);
    HEDDLE_ASSERT(x_.steps_.size() == k + 2) << "a ring block kernel or step made no step";
    std::swap(x_.steps_[k], x_.steps_[k + 1]);
    Step &posted = x_.steps_[k], &block = x_.steps_[k + 1];
    posted.post = true;
    block.waits_for = posted.instr;
    auto span = [&](int b) {
      if (b < 0) return;
      x_.buffers_[b].first = std::min(x_.buffers_[b].first, p);
      x_.buffers_[b].last = std::max(x_.buffers_[b].last, pos_);
    };
    for (int b : {posted.in, posted.out, posted.whole, posted.own}) span(b);
    for (const Call& c : block.calls) {
      for (int b : c.in_buffers) span(b);
      for (int b : c.out_buffers) span(b);
    }
  }

  // A ring block's kernel: one call on the block's index points; block 0 defines the results'
  // tiles over the whole local box, later blocks write into (or combine into) the same tiles.
  void ring_block(const Instr& in, Step& s) {
    const KernelCall& kc = in.calls.front();
    const Op& op = g_.op(kc.op);
    Call c;
    c.op = &op;
    c.box = kc.box;
    c.accumulate = in.combine;
    for (const auto& x : op.inputs) {
      int b = tile(x.value);
      use(b);
      c.in_buffers.push_back(b);
    }
    for (const auto& r : op.results) {
      int b;
      if (in.ring == 0) {
        b = define(r.value, r.proj.image(in.whole));
        tiles_[r.value] = b;
      } else {
        b = tile(r.value);
        use(b);
      }
      c.out_buffers.push_back(b);
    }
    s.calls.push_back(std::move(c));
    ++pos_;
  }

  // With hold_collective_inputs, `inputs` stay alive until the next collective or fetch (peers
  // read them until they reach it), and the ones held before until now.
  void hold(std::vector<int> inputs) {
    if (!x_.hold_collective_inputs_) return;
    for (int b : held_) use(b);
    held_ = std::move(inputs);
  }

  // Collectives run back to back, as one step and one position: every input and result is alive
  // while the batch runs, so none shares memory with another.
  void collectives(const std::vector<const Instr*>& batch) {
    Step s;
    s.kind = Instr::Kind::kCollective;
    s.instr = batch.front();
    s.value = batch.front()->value;
    for (const Instr* in : batch) {
      s.collectives.push_back(in);
      s.coll_in.push_back(tile(in->value));
      use(s.coll_in.back());
    }
    hold(s.coll_in);
    for (const Instr* in : batch) {
      s.coll_out.push_back(define(in->value, in->box));
      tiles_[in->value] = s.coll_out.back();
    }
    ++pos_;
    x_.steps_.push_back(std::move(s));
  }

  // A slice whose box lies inside the device's own tile (of a replicated value: ZeRO's
  // parameter and gradient shards) needs no peer, so it meets none: its result views the feed,
  // as a load, where the tile is a loaded feed's and the box one run of it; else it is copied
  // from the tile (Step::local). Every device decides alike when the value is replicated. False
  // (and nothing emitted) for other collectives.
  bool local_slice(const Instr& in) {
    if (in.kind != Instr::Kind::kCollective || in.collective != Collective::kSlice || in.ring > 0 ||
        halos_.count(in.value))
      return false;
    auto it = tiles_.find(in.value);
    if (it == tiles_.end() || !x_.buffers_[it->second].tensor.region().contains(in.box))
      return false;
    const int src = it->second;
    Step s;
    s.instr = &in;
    s.value = in.value;
    if (x_.buffers_[src].loaded && x_.buffers_[src].feed_offset >= 0 &&
        contiguous_offset(g_.type(in.value).shape(), in.box) >= 0) {
      s.kind = Instr::Kind::kLoad;
      s.out = define_load(in.value, in.box);
    } else {
      s.kind = Instr::Kind::kCollective;
      s.local = true;
      s.in = src;
      use(src);
      s.out = define(in.value, in.box);
    }
    tiles_[in.value] = s.out;
    ++pos_;
    x_.steps_.push_back(std::move(s));
    return true;
  }

  // A lone call that passes its input through (passes_through) over exactly the input's tile:
  // its result becomes that tile (whose lifetime then runs to the result's last use) and no
  // kernel runs. Values are never written after their definition, so sharing is safe.
  bool alias(const Instr& in) {
    if (in.calls.size() != 1) return false;
    const Op& op = g_.op(in.calls[0].op);
    if (!passes_through(op)) return false;
    ValueId v = op.inputs[0].value;
    if (halos_.count(v) || g_.type(v).dtype() != g_.type(op.results[0].value).dtype()) return false;
    int b = tile(v);
    if (x_.buffers_[b].tensor.region() != op.results[0].proj.image(in.calls[0].box)) return false;
    use(b);
    tiles_[op.results[0].value] = b;
    return true;
  }

  // A lone reshape that moves no element (moves_nothing) of a tile the program computed: its
  // result is a buffer of no bytes of its own that views the input's (bound after the arena is
  // laid out); no kernel runs. Loaded tiles are left alone: load() rebinds them every run.
  bool view(const Instr& in) {
    if (in.calls.size() != 1) return false;
    const Op& op = g_.op(in.calls[0].op);
    if (op.kind != OpKind::kReshape || op.inputs.size() != 1 || op.results.size() != 1)
      return false;
    ValueId v = op.inputs[0].value;
    if (halos_.count(v) || g_.type(v).dtype() != g_.type(op.results[0].value).dtype()) return false;
    int b = tile(v);
    if (x_.buffers_[b].loaded) return false;
    const Box& box = in.calls[0].box;
    Box region = op.results[0].proj.image(box);
    if (!moves_nothing(op, box, x_.buffers_[b].tensor.region(), region)) return false;
    use(b);
    int r = define(op.results[0].value, region);
    x_.buffers_[r].bytes = 0;
    x_.buffers_[r].view_of = b;
    x_.buffers_[b].viewed = true;
    tiles_[op.results[0].value] = r;
    ++pos_;
    return true;
  }

  DeviceExecutor& x_;
  const Graph& g_;
  int64_t pos_ = 0;
  std::vector<int> held_;  // the inputs of the last collectives, while peers may read them
  std::map<ValueId, int> tiles_, halos_;
  std::map<ValueId, int> ring_sent_;  // per value in a ring: the block the next step sends
};

DeviceExecutor::DeviceExecutor(const Graph& g, DeviceProgram program, bool hold_collective_inputs,
                               bool batch_collectives, bool in_place)
    : g_(g),
      program_(std::move(program)),
      hold_collective_inputs_(hold_collective_inputs),
      batch_collectives_(batch_collectives),
      in_place_(in_place) {
  Compiler c(*this);
  c.run();
  const ArenaLayout layout = plan_buffers(buffers_, steps_, in_place_);
  arena_bytes_ = layout.bytes;
  const size_t arena_size = static_cast<size_t>(std::max<int64_t>(arena_bytes_, 64));
  arena_ = huge_buffer<std::byte>(arena_size);
  // Zeroed once, so a first step reads the same as a fresh tensor would.
  std::memset(arena_.get(), 0, arena_size);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    Buffer& b = buffers_[i];
    if (b.view_of >= 0) {  // a view (reshape, in place): the (earlier, already bound) bytes
      Tensor& src = buffers_[b.view_of].tensor;
      b.tensor.rebind(src.is_int() ? static_cast<void*>(src.i64()) : static_cast<void*>(src.f32()));
    } else if (b.feed_offset < 0) {
      b.home = arena_.get() + layout.offsets[i];
      b.tensor.rebind(b.home);
    }
  }
  fallback_.resize(buffers_.size());
  for (Step& s : steps_) {
    for (size_t k = 0; k < s.collectives.size(); ++k) {
      const Instr& in = *s.collectives[k];
      s.batch.push_back({in.collective, &in.group, &buffers_[s.coll_in[k]].tensor,
                         &buffers_[s.coll_out[k]].tensor, in.monoid});
    }
    if (!s.collectives.empty()) batch_sizes_.push_back(static_cast<int64_t>(s.collectives.size()));
    if (s.kind == Instr::Kind::kFetch) batch_sizes_.push_back(0);
    for (Call& call : s.calls) {
      for (size_t k = 0; k < call.in_buffers.size(); ++k) {
        call.ins.push_back(&buffers_[call.in_buffers[k]].tensor);
        if (k < 32 && buffers_[call.in_buffers[k]].loaded) call.loaded_inputs |= 1u << k;
      }
      for (int b : call.out_buffers) call.outs.push_back(&buffers_[b].tensor);
      if (s.calls.size() > 1) s.chain.push_back({call.op, call.box, call.ins, call.outs});
    }
  }
  for (const auto& [v, b] : c.out_buffers_) {
    outputs_.emplace_back(v, &buffers_[b].tensor);
    output_buffers_.push_back(b);
  }
  bound_.assign(buffers_.size(), 0);
  // The trailing all-gathers whose every result is an output's buffer (read by nothing after).
  trailing_gathers_ = steps_.size();
  std::map<ValueId, const Tensor*> own;
  for (size_t i = steps_.size(); i-- > 0;) {
    const Step& s = steps_[i];
    bool gathers = s.kind == Instr::Kind::kCollective && !s.batch.empty();
    for (size_t k = 0; gathers && k < s.collectives.size(); ++k) {
      const ValueId v = s.collectives[k]->value;
      auto at = std::find_if(c.out_buffers_.begin(), c.out_buffers_.end(),
                             [&](const auto& o) { return o.first == v; });
      gathers = s.batch[k].c == Collective::kAllGather && at != c.out_buffers_.end() &&
                at->second == s.coll_out[k] && !own.count(v);
    }
    if (!gathers) break;
    for (size_t k = 0; k < s.collectives.size(); ++k)
      own[s.collectives[k]->value] = &buffers_[s.coll_in[k]].tensor;
    trailing_gathers_ = i;
  }
  gathered_.assign(own.begin(), own.end());
}

DeviceExecutor::~DeviceExecutor() = default;

void DeviceExecutor::fail(Diagnostic d) {
  if (!error_.ok()) return;
  error_ = Status(std::move(d));
  if (on_error_) on_error_();
}

void DeviceExecutor::load(const Step& s, const TensorMap& feeds) {
  Buffer& b = buffers_[s.out];
  auto it = feeds.find(s.value);
  const Tensor* feed = it == feeds.end() ? nullptr : &it->second;
  bool whole =
      feed && feed->is_int() == b.tensor.is_int() && feed->shape() == g_.type(s.value).shape() &&
      std::all_of(feed->origin().begin(), feed->origin().end(), [](int64_t o) { return o == 0; });
  if (b.feed_offset >= 0 && whole) {
    // The tile is one contiguous run of the feed: view it. Kernels never write their inputs.
    b.tensor.rebind(b.tensor.is_int()
                        ? static_cast<void*>(const_cast<int64_t*>(feed->i64()) + b.feed_offset)
                        : static_cast<void*>(const_cast<float*>(feed->f32()) + b.feed_offset));
    return;
  }
  if (!feed) fail(Diagnostic("no data for " + value_ref(g_.value(s.value).name)));
  if (b.feed_offset < 0 && feed) {
    b.tensor.copy_from(*feed);
    return;
  }
  // A viewed load whose feed is missing or not a whole tensor: an owning tile (rare; allocates).
  Tensor& own = fallback_[s.out];
  own = Tensor::tile(b.tensor.dtype(), b.tensor.region());
  if (feed) own.copy_from(*feed);
  b.tensor.rebind(own.is_int() ? static_cast<void*>(own.i64()) : static_cast<void*>(own.f32()));
}

void DeviceExecutor::run_kernels(const Step& s, const kernels::KernelOptions& ko) {
  if (!s.chain.empty()) {  // a fused elementwise chain: one loop over memory (ops/Chain.h)
    if (!error_.ok()) return;
    KernelScope scope;
    Status st = kernels::run_chain_into(s.chain, s.instr->temporaries, ko);
    if (!st.ok()) fail(st.error());
    return;
  }
  kernels::KernelOptions o = ko;
  for (const Call& c : s.calls) {
    if (!error_.ok()) return;
    KernelScope scope;
    // Loaded tiles hold the feeds' bytes; unchanged feeds leave them as the last run saw them.
    o.unchanged_inputs = feeds_unchanged_ ? c.loaded_inputs : 0;
    o.accumulate = c.accumulate;
    o.causal = c.causal ? &*c.causal : nullptr;
    Status st = kernels::run(*c.op, c.box, c.ins, c.outs, o);
    if (!st.ok()) fail(st.error());
  }
}

Status DeviceExecutor::run(Communicator& comm, const TensorMap& feeds, const ExecOptions& options,
                           int threads) {
  error_ = Status();
  kernels::KernelOptions ko;
  ko.optimizer_step = options.optimizer_step;
  ko.feeds_repeat = options.feeds_repeat;
  ko.threads = std::max(1, threads);
  feeds_unchanged_ = options.feeds_unchanged && runs_ > 0;
  overlap_ring_ = options.overlap_ring;
  on_ring_event_ = options.on_ring_event ? &options.on_ring_event : nullptr;
  ++runs_;
  if (feeds_unchanged_ != chain_unchanged_) {  // the chains' calls see it through their bits
    chain_unchanged_ = feeds_unchanged_;
    for (Step& s : steps_)
      for (size_t k = 0; k < s.chain.size(); ++k)
        s.chain[k].unchanged_inputs = feeds_unchanged_ ? s.calls[k].loaded_inputs : 0;
  }
  // ExecOptions::instr_times: this device's entry, sized to its program.
  InstrTimes* times = options.instr_times ? &options.instr_times->at(comm.rank()) : nullptr;
  if (times) {
    times->seconds.resize(program_.instrs.size());
    ++times->runs;
  }
  // A failed assert under throw_on_assert (InternalError) fails the run like a kernel error, so
  // the device still takes part in the remaining collectives; it is rethrown at the end. Other
  // exceptions (a communicator that lost its peers, an injected fault) leave at once: the
  // collectives they come from cannot go on.
  std::exception_ptr internal;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    try {
      if (i >= trailing_gathers_ && !trailing_batches_.empty()) {  // skip_gathers
        const std::vector<CollectiveCall>& b = trailing_batches_[i - trailing_gathers_];
        if (Status st = b.empty() ? Status{} : run_batch(comm, b); !st.ok()) fail(st.error());
        continue;
      }
      const size_t at = static_cast<size_t>(s.instr - program_.instrs.data());
      if (s.kind == Instr::Kind::kKernel && skip_ && (*skip_)[at]) continue;
      const auto t0 =
          times ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      run_step(s, comm, feeds, ko);
      if (times)
        times->seconds[at] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } catch (const InternalError&) {
      if (!internal) internal = std::current_exception();
      fail(Diagnostic("internal error on device " + std::to_string(comm.rank())));
    }
  }
  if (internal) std::rethrow_exception(internal);
  return error_;
}

void DeviceExecutor::run_step(const Step& s, Communicator& comm, const TensorMap& feeds,
                              const kernels::KernelOptions& ko) {
  switch (s.kind) {
    case Instr::Kind::kLoad:
      load(s, feeds);
      break;
    case Instr::Kind::kCollective:
      if (s.local) {
        buffers_[s.out].tensor.copy_from(buffers_[s.in].tensor);
        break;
      }
      if (Status st = run_batch(comm, s.batch); !st.ok()) fail(st.error());
      break;
    case Instr::Kind::kFetch: {
      auto event = [&](RingEvent::Kind k) {
        if (s.instr->ring > 0 && on_ring_event_) (*on_ring_event_)({k, s.instr});
      };
      event(RingEvent::Kind::kPosted);
      if (s.post && overlap_ring_) {
        if (!poster_) poster_ = std::make_unique<Poster>(*this);
        poster_->post(s, comm);
        break;
      }
      Status st = exchange(s, comm);
      event(RingEvent::Kind::kWaited);
      if (!st.ok()) fail(st.error());
      break;
    }
    case Instr::Kind::kKernel:
      if (s.instr->ring >= 0)
        run_block(s, ko);
      else
        run_kernels(s, ko);
      break;
    case Instr::Kind::kFree:
      break;
  }
}

Status DeviceExecutor::exchange(const Step& s, Communicator& comm) {
  const Instr& in = *s.instr;
  // A halo fetch, or a ring step's send-recv.
  Collective c = in.kind == Instr::Kind::kFetch ? Collective::kHaloExchange : in.collective;
  if (s.own >= 0) buffers_[s.whole].tensor.copy_from(buffers_[s.own].tensor);
  Status st =
      comm.collective(c, in.group, buffers_[s.in].tensor, buffers_[s.out].tensor, in.monoid);
  if (st.ok() && s.whole >= 0) buffers_[s.whole].tensor.copy_from(buffers_[s.out].tensor);
  return st;
}

void DeviceExecutor::run_block(const Step& s, const kernels::KernelOptions& ko) {
  auto event = [&](RingEvent::Kind k, const Instr* in) {
    if (on_ring_event_) (*on_ring_event_)({k, in});
  };
  // The ring step posted just before runs meanwhile; wait for it even when a kernel throws.
  const bool waits = s.waits_for != nullptr && overlap_ring_;
  auto finish = [&] {
    Status st = poster_->wait();
    event(RingEvent::Kind::kWaited, s.waits_for);
    if (!st.ok()) fail(st.error());
  };
  event(RingEvent::Kind::kKernelBegin, s.instr);
  try {
    run_kernels(s, ko);
  } catch (...) {
    if (waits) finish();
    throw;
  }
  event(RingEvent::Kind::kKernelEnd, s.instr);
  if (waits) finish();
}

}  // namespace heddle
