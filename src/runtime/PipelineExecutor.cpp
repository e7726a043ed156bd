#include "heddle/runtime/PipelineExecutor.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "heddle/ops/Kernel.h"
#include "heddle/runtime/BlasThreads.h"
#include "heddle/runtime/ThreadedCommunicator.h"

namespace heddle {

Status OffsetCommunicator::collective(Collective c, const std::vector<int64_t>& group,
                                      const Tensor& mine, Tensor& out, Monoid monoid) {
  std::vector<int64_t> global;
  for (int64_t d : group) global.push_back(d + offset_);
  return inner_.collective(c, global, mine, out, monoid);
}

namespace {

constexpr const char* kGradPrefix = "pipe_grad.";

// One item device 0 collects at the end: produced on `stage`, named `key`.
struct Report {
  int64_t stage;
  std::string key;
  TensorType type;
};

class PipelineRun {
 public:
  PipelineRun(const PipelineProgram& P, int64_t device, Communicator& comm, Links& links,
              const PipelineFeeds& feeds, const ExecOptions& o, PipelineDeviceCache& cache)
      : P_(P), device_(device), comm_(comm), links_(links), feeds_(feeds), o_(o), cache_(cache) {
    stage_ = P.stage_of_device(device);
    local_ = device - P.stage_first[stage_];
    int64_t k = 0;
    for (const auto& [name, type] : P.param_types) param_index_[name] = k++;
    share_tag_ = tag_of(P.edges.size());
    // Per edge and direction (activation, gradient): the tile this device receives and the
    // devices it sends to, each with the tile it needs.
    edge_boxes_.resize(2 * P.edges.size());
    edge_sends_.resize(2 * P.edges.size());
    for (size_t e = 0; e < P.edges.size(); ++e)
      for (bool grad : {false, true}) {
        if (grad && !P.carries_grad(e)) continue;
        int64_t from = P.stage_of(P.edges[e].from), to = P.stage_of(P.edges[e].to);
        if (grad) std::swap(from, to);
        const size_t i = 2 * e + (grad ? 1 : 0);
        if (stage_ == to) edge_boxes_[i] = P.receive_box(e, local_, grad);
        if (stage_ == from)
          for (int64_t r : targets(to))
            edge_sends_[i].push_back({P.stage_first[to] + r, P.receive_box(e, r, grad)});
      }
    report_tag_ = share_tag_ + 2 * k;
    for (int64_t s = 0; s < P.stages; ++s) {
      std::set<std::string> reads;
      for (const auto& c : P.chunks)
        if (c.stage == s) reads.insert(c.params.begin(), c.params.end());
      reads_.push_back(std::move(reads));
      if (P.train)
        for (const auto& p : P.owned[s]) owner_[p] = s;
    }
    for (const auto& name : P.stage_params(stage_))
      if (auto it = feeds.params.find(name); it != feeds.params.end()) params_[name] = it->second;
  }

  Result<PipelineResult> run() {
    for (const PipelineStep& st : P_.order[stage_])
      st.weight ? weight(st) : st.backward ? backward(st) : forward(st);
    if (P_.train) update();
    PipelineResult r;
    r.counts = counts_;
    collect(r);
    if (internal_) std::rethrow_exception(internal_);
    if (!error_.ok()) return error_.error();
    if (P_.train)
      for (auto& [name, t] : params_) r.updated.insert_or_assign(name, std::move(t));
    return r;
  }

 private:
  // Stages of different sizes: device r of a receiving stage takes what a stage sends it from
  // that stage's device r % (its size); every device holds the values sent whole (lowering
  // replicates block outputs). The sender of what stage `from` sends this device:
  int64_t source(int64_t from) const { return P_.stage_first[from] + local_ % P_.devices_of(from); }
  // The devices (local indices) of stage `to` this device sends to.
  std::vector<int64_t> targets(int64_t to) const {
    std::vector<int64_t> out;
    for (int64_t r = local_; r < P_.devices_of(to); r += P_.devices_of(stage_)) out.push_back(r);
    return out;
  }
  // Sends `t`, cropped to each receiver's tile, to the receivers of edge e (`grad`: gradient).
  void send_edge(size_t e, bool grad, const Tensor& t) {
    for (const auto& [to, box] : edge_sends_[2 * e + (grad ? 1 : 0)])
      send(to, tag_of(e) + (grad ? 1 : 0), t.crop(box));
  }
  // Calls f(e, edge) for the edges into (out of) `chunk`, in edge order.
  enum Direction { Into, OutOf };
  template <class F>
  void each_edge(Direction d, int64_t chunk, F f) const {
    for (size_t e = 0; e < P_.edges.size(); ++e) {
      const PipelineEdge& edge = P_.edges[e];
      if ((d == Into ? edge.to : edge.from) == chunk) f(e, edge);
    }
  }
  // Edge e's activation travels with this tag, its gradient with the next.
  static int64_t tag_of(size_t e) { return 16 + 2 * static_cast<int64_t>(e); }
  void fail(const Status& s) {
    if (!s.ok() && error_.ok()) error_ = s;
  }

  void send(int64_t to, int64_t tag, const Tensor& t) { fail(links_.send(to, tag, t)); }
  Tensor recv(int64_t from, int64_t tag, const TensorType& type) {
    return recv(from, tag, Tensor(type));
  }
  Tensor recv(int64_t from, int64_t tag, Tensor into) {
    fail(links_.recv(from, tag, into));
    return into;
  }
  // The tile of edge e's value (`grad`: gradient) the counterpart device on the receiving stage
  // needs; both sides compute the same box.
  const Box& edge_box(size_t e, bool grad) const { return edge_boxes_[2 * e + (grad ? 1 : 0)]; }

  // Runs a block with its feeds viewed, not copied; returns its outputs as views valid until
  // the block runs again (on a failure zeros of their types, so peers stay in step).
  using Outputs = std::map<ValueId, const Tensor*>;
  Outputs run_block(const StageBlock& b, const std::map<std::string, Tensor>& extra,
                    int64_t micro) {
    TensorMap feeds;
    for (const auto* ids : {&b.graph.inputs(), &b.graph.params()})
      for (ValueId v : *ids) {
        const std::string& n = b.graph.value(v).name;
        const Tensor* t = nullptr;
        if (auto it = extra.find(n); it != extra.end()) t = &it->second;
        if (!t && micro >= 0)
          if (auto it = feeds_.inputs[micro].find(n); it != feeds_.inputs[micro].end())
            t = &it->second;
        if (!t)
          if (auto it = params_.find(n); it != params_.end()) t = &it->second;
        if (!t) continue;  // a missing feed fails the block with a diagnostic
        void* data = t->is_int() ? static_cast<void*>(const_cast<int64_t*>(t->i64()))
                                 : static_cast<void*>(const_cast<float*>(t->f32()));
        feeds.emplace(v, Tensor::view(t->dtype(), t->region(), data));  // read only
      }
    const DeviceProgram& program = b.programs[local_];
    for (const Instr& in : program.instrs)
      for (const KernelCall& call : in.calls) {
        ++counts_.kernel_calls;
        if (std::binary_search(b.recomputed.begin(), b.recomputed.end(), call.op))
          ++counts_.recompute_calls;
      }
    DeviceExecutor& x = cache_.executor(b, local_);
    Status st;
    try {
      st = x.run(comm_, feeds, o_, o_.threads > 0 ? o_.threads : 1);
    } catch (...) {  // a failed block; rethrown by run() once the schedule is done
      if (!internal_) internal_ = std::current_exception();
      st = Diagnostic("internal error on device " + std::to_string(device_));
    }
    Outputs out;
    if (st.ok())
      for (const auto& [v, t] : x.outputs()) out.emplace(v, t);
    else
      fail(st);
    for (ValueId v : b.graph.outputs())
      if (!out.count(v)) out.emplace(v, &zeros_.emplace_back(b.graph.type(v)));
    return out;
  }

  void forward(const PipelineStep& st) {
    const PipelineChunk& ch = P_.chunks[st.chunk];
    const Graph& g = ch.forward.graph;
    auto& stash = stash_[{st.micro, st.chunk}];
    each_edge(Into, st.chunk, [&](size_t e, const PipelineEdge& edge) {
      stash[edge.value] =
          recv(source(P_.stage_of(edge.from)), tag_of(e),
               Tensor::tile(g.type(*g.find_value(edge.value)).dtype(), edge_box(e, false)));
    });
    auto out = run_block(ch.forward, stash, st.micro);
    each_edge(OutOf, st.chunk, [&](size_t e, const PipelineEdge& edge) {
      send_edge(e, false, *out.at(*g.find_value(edge.value)));
    });
    for (const auto& o : ch.outputs) outputs_[{st.micro, o}] = *out.at(*g.find_value(o));
    if (!P_.train) {
      stash_.erase({st.micro, st.chunk});
      return;
    }
    for (const auto& v : ch.stashed) stash[v] = *out.at(*g.find_value(v));
  }

  // The element type of edge e's value.
  DType edge_dtype(size_t e) const {
    const Graph& g = P_.chunks[P_.edges[e].from].forward.graph;
    return g.type(*g.find_value(P_.edges[e].value)).dtype();
  }

  // Runs `block` (nothing when it has no programs) and names its outputs `named`; its outputs
  // named in `stash` go to `extra`.
  std::map<std::string, Tensor> run_named(const StageBlock& block,
                                          const std::vector<std::pair<std::string, ValueId>>& named,
                                          std::map<std::string, Tensor>& extra, int64_t micro,
                                          const std::vector<std::string>& stash = {}) {
    std::map<std::string, Tensor> out;
    if (block.programs.empty()) return out;
    Outputs got = run_block(block, extra, micro);
    for (const auto& [name, v] : named) out.emplace(name, *got.at(v));
    for (const auto& name : stash) extra[name] = *got.at(*block.graph.find_value(name));
    return out;
  }

  // Adds the chunk's parameter gradients in `grads` to the step's sums.
  void accumulate(const PipelineChunk& ch, const std::map<std::string, Tensor>& grads) {
    for (const auto& p : ch.params) {
      auto it = grads.find(p);
      if (it == grads.end()) continue;  // the loss does not reach it
      auto [acc, fresh] = acc_.emplace(p, it->second);
      if (!fresh) kernels::combine(Monoid::kSum, acc->second, it->second);
    }
  }

  // The backward block: with a split backward (zero-bubble) only B, the gradients of the values
  // received; the stash stays for the weight block.
  void backward(const PipelineStep& st) {
    const PipelineChunk& ch = P_.chunks[st.chunk];
    auto& extra = stash_[{st.micro, st.chunk}];
    // The gradient of every value sent, summed over its readers in edge order.
    each_edge(OutOf, st.chunk, [&](size_t e, const PipelineEdge& edge) {
      if (!P_.carries_grad(e)) return;  // integer values carry no gradient
      Tensor t = recv(source(P_.stage_of(edge.to)), tag_of(e) + 1,
                      Tensor::tile(edge_dtype(e), edge_box(e, true)));
      auto [it, fresh] = extra.emplace(kGradPrefix + edge.value, t);
      if (!fresh) kernels::combine(Monoid::kSum, it->second, t);
    });
    auto grads = run_named(ch.backward, ch.grads, extra, st.micro, ch.backward_stashed);
    if (!P_.split_backward) accumulate(ch, grads);
    each_edge(Into, st.chunk, [&](size_t e, const PipelineEdge& edge) {
      if (!P_.carries_grad(e)) return;
      auto it = grads.find(edge.value);
      if (it != grads.end()) {
        send_edge(e, true, it->second);
        return;
      }
      for (const auto& [to, box] : edge_sends_[2 * e + 1])
        send(to, tag_of(e) + 1, Tensor::tile(edge_dtype(e), box));
    });
    if (!P_.split_backward) stash_.erase({st.micro, st.chunk});
  }

  // Zero-bubble's weight block W: the parameters' gradients, from the stash B left.
  void weight(const PipelineStep& st) {
    const PipelineChunk& ch = P_.chunks[st.chunk];
    accumulate(ch, run_named(ch.weight, ch.weight_grads, stash_[{st.micro, st.chunk}], st.micro));
    stash_.erase({st.micro, st.chunk});
  }

  Tensor grad_of(const std::string& p) const {
    auto it = acc_.find(p);
    return it != acc_.end() ? it->second : Tensor(P_.param_types.at(p));
  }

  // Parameters read on several stages: the readers send their gradients to the owner, which
  // adds them in stage order, updates, and sends the new value back.
  void update() {
    // Parameters the loss does not reach have no owner and stay as they are.
    auto owner = [&](const std::string& p) {
      auto it = owner_.find(p);
      return it == owner_.end() ? stage_ : it->second;
    };
    for (const auto& p : reads_[stage_])
      if (owner(p) != stage_)
        for (int64_t o : targets(owner(p)))
          send(P_.stage_first[owner(p)] + o, share_tag_ + 2 * param_index_.at(p), grad_of(p));
    for (const auto& p : P_.owned[stage_]) {
      Tensor g = grad_of(p);
      for (int64_t s = 0; s < P_.stages; ++s)
        if (s != stage_ && reads_[s].count(p))
          kernels::combine(
              Monoid::kSum, g,
              recv(source(s), share_tag_ + 2 * param_index_.at(p), P_.param_types.at(p)));
      acc_.insert_or_assign(p, std::move(g));
    }
    if (!P_.owned[stage_].empty()) {
      std::map<std::string, Tensor> extra;
      for (const auto& p : P_.owned[stage_]) extra.emplace(kGradPrefix + p, acc_.at(p));
      auto out = run_block(P_.optimizer[stage_], extra, -1);
      const Graph& og = P_.optimizer[stage_].graph;
      for (const auto& u : P_.updates[stage_]) {
        params_.insert_or_assign(og.value(u.param).name, *out.at(u.updated));
        for (const auto& [s, n] : u.state) params_.insert_or_assign(og.value(s).name, *out.at(n));
      }
    }
    for (const auto& p : P_.owned[stage_])
      for (int64_t s = 0; s < P_.stages; ++s)
        if (s != stage_ && reads_[s].count(p))
          for (int64_t r : targets(s))
            send(P_.stage_first[s] + r, share_tag_ + 2 * param_index_.at(p) + 1, params_.at(p));
    for (const auto& p : reads_[stage_])
      if (owner(p) != stage_)
        params_[p] =
            recv(source(owner(p)), share_tag_ + 2 * param_index_.at(p) + 1, P_.param_types.at(p));
  }

  std::vector<Report> reports() const {
    std::vector<Report> r;
    if (P_.train)
      for (int64_t s = 0; s < P_.stages; ++s) {
        const Graph& og = P_.optimizer[s].graph;
        for (const auto& u : P_.updates[s]) {
          const std::string& p = og.value(u.param).name;
          r.push_back({s, "grad:" + p, og.type(u.param)});
          r.push_back({s, "upd:" + p, og.type(u.param)});
          for (const auto& st : u.state)
            r.push_back({s, "upd:" + og.value(st.first).name, og.type(st.first)});
        }
      }
    for (const auto& c : P_.chunks)
      for (const auto& o : c.outputs)
        for (int64_t m = 0; m < P_.micro_batches; ++m)
          r.push_back({c.stage, "out:" + std::to_string(m) + ":" + o,
                       c.forward.graph.type(*c.forward.graph.find_value(o))});
    return r;
  }

  Tensor local_report(const std::string& key) const {
    if (key.rfind("grad:", 0) == 0) return grad_of(key.substr(5));
    if (key.rfind("upd:", 0) == 0) return params_.at(key.substr(4));
    size_t colon = key.find(':', 4);
    return outputs_.at({std::stoll(key.substr(4, colon - 4)), key.substr(colon + 1)});
  }

  // Device 0 collects every stage's results from that stage's first device.
  void collect(PipelineResult& r) {
    auto items = reports();
    if (local_ != 0) return;
    for (size_t k = 0; k < items.size(); ++k) {
      const Report& it = items[k];
      const int64_t tag = report_tag_ + static_cast<int64_t>(k);
      if (device_ != 0) {
        if (it.stage == stage_) send(0, tag, local_report(it.key));
        continue;
      }
      Tensor t =
          it.stage == 0 ? local_report(it.key) : recv(P_.stage_first[it.stage], tag, it.type);
      if (it.key.rfind("grad:", 0) == 0) {
        r.grads[it.key.substr(5)] = std::move(t);
      } else if (it.key.rfind("upd:", 0) == 0) {
        r.updated[it.key.substr(4)] = std::move(t);
      } else {
        size_t colon = it.key.find(':', 4);
        auto m = static_cast<size_t>(std::stoll(it.key.substr(4, colon - 4)));
        if (r.outputs.size() <= m) r.outputs.resize(m + 1);
        r.outputs[m][it.key.substr(colon + 1)] = std::move(t);
      }
    }
  }

  const PipelineProgram& P_;
  int64_t device_, stage_ = 0, local_ = 0;
  Communicator& comm_;
  Links& links_;
  const PipelineFeeds& feeds_;
  const ExecOptions& o_;
  PipelineDeviceCache& cache_;
  int64_t share_tag_ = 0, report_tag_ = 0;
  std::map<std::string, int64_t> param_index_;
  std::vector<Box> edge_boxes_;  // per edge: activation, gradient (received here)
  std::vector<std::vector<std::pair<int64_t, Box>>> edge_sends_;  // the same: receivers, tiles
  std::vector<std::set<std::string>> reads_;
  std::map<std::string, int64_t> owner_;
  std::map<std::string, Tensor> params_, acc_;
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, Tensor>> stash_;
  std::map<std::pair<int64_t, std::string>, Tensor> outputs_;
  PipelineCounts counts_;
  std::deque<Tensor> zeros_;  // outputs of failed blocks
  Status error_;
  std::exception_ptr internal_;  // the first block's exception (a failed assert)
};

// Messages between threads: a FIFO per (sender, receiver, tag); end(d) is device d's side.
class Mailbox {
 public:
  class End : public Links {
   public:
    End(Mailbox& box, int64_t me) : box_(box), me_(me) {}
    Status send(int64_t to, int64_t tag, const Tensor& t) override {
      std::lock_guard lock(box_.mu_);
      box_.queues_[{me_, to, tag}].push_back(t);
      box_.cv_.notify_all();
      return {};
    }
    Status recv(int64_t from, int64_t tag, Tensor& out) override {
      std::unique_lock lock(box_.mu_);
      auto& q = box_.queues_[{from, me_, tag}];
      box_.cv_.wait(lock, [&] { return !q.empty(); });
      out = std::move(q.front());
      q.pop_front();
      return {};
    }

   private:
    Mailbox& box_;
    int64_t me_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::deque<Tensor>> queues_;
};

}  // namespace

Tensor micro_batch_of(const Tensor& t, int64_t m, int64_t k) {
  HEDDLE_ASSERT(t.rank() >= 1 && m >= 1 && t.shape()[0] % m == 0 && k >= 0 && k < m)
      << t.to_string() << " into " << m;
  std::vector<int64_t> shape = t.shape().values();
  shape[0] /= m;
  Tensor out(t.dtype(), IVec(shape));
  const int64_t n = out.numel(), at = k * n;
  if (t.is_int())
    std::copy(t.i64() + at, t.i64() + at + n, out.i64());
  else
    std::copy(t.f32() + at, t.f32() + at + n, out.f32());
  return out;
}

Tensor concat_micro_batches(const std::vector<Tensor>& parts) {
  HEDDLE_ASSERT(!parts.empty() && parts[0].rank() >= 1);
  std::vector<int64_t> shape = parts[0].shape().values();
  shape[0] = 0;
  for (const auto& p : parts) shape[0] += p.shape()[0];
  Tensor out(parts[0].dtype(), IVec(shape));
  int64_t at = 0;
  for (const auto& p : parts) {
    if (p.is_int())
      std::copy(p.i64(), p.i64() + p.numel(), out.i64() + at);
    else
      std::copy(p.f32(), p.f32() + p.numel(), out.f32() + at);
    at += p.numel();
  }
  return out;
}

PipelineDeviceCache::PipelineDeviceCache() = default;
PipelineDeviceCache::~PipelineDeviceCache() = default;

DeviceExecutor& PipelineDeviceCache::executor(const StageBlock& block, int64_t local) {
  auto& x = executors_[&block];
  if (!x) x = std::make_unique<DeviceExecutor>(block.graph, block.programs[local]);
  return *x;
}

int64_t PipelineDeviceCache::arena_bytes() const {
  int64_t bytes = 0;
  for (const auto& [block, x] : executors_) bytes += x->peak_bytes();
  return bytes;
}

Result<PipelineResult> run_pipeline_device(const PipelineProgram& program, int64_t device,
                                           Communicator& stage_comm, Links& links,
                                           const PipelineFeeds& feeds, const ExecOptions& options,
                                           PipelineDeviceCache* cache) {
  PipelineDeviceCache local;
  return PipelineRun(program, device, stage_comm, links, feeds, options, cache ? *cache : local)
      .run();
}

Result<PipelineResult> run_pipeline_threaded(const PipelineProgram& program,
                                             const PipelineFeeds& feeds,
                                             const ExecOptions& options) {
  return PipelineRunner(program).run(feeds, options);
}

Result<PipelineResult> run_pipeline_threaded(
    const PipelineProgram& program, const std::function<const PipelineFeeds&(int64_t)>& feeds_of,
    const ExecOptions& options) {
  return PipelineRunner(program).run(feeds_of, options);
}

PipelineRunner::PipelineRunner(const PipelineProgram& program) : program_(program) {
  for (int64_t d = 0; d < program.num_devices(); ++d)
    caches_.push_back(std::make_unique<PipelineDeviceCache>());
}

Result<PipelineResult> PipelineRunner::run(const PipelineFeeds& feeds, const ExecOptions& options) {
  return run([&](int64_t) -> const PipelineFeeds& { return feeds; }, options);
}

Result<PipelineResult> PipelineRunner::run(
    const std::function<const PipelineFeeds&(int64_t)>& feeds_of, const ExecOptions& options) {
  const PipelineProgram& program = program_;
  const int64_t n = program.num_devices();
  SingleThreadedBlas blas(n);
  std::vector<std::unique_ptr<ThreadedWorld>> worlds;
  for (int64_t s = 0; s < program.stages; ++s)
    worlds.push_back(std::make_unique<ThreadedWorld>(program.devices_of(s), false, n));
  Mailbox box;
  std::vector<std::optional<Result<PipelineResult>>> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> exceptions(static_cast<size_t>(n));
  auto body = [&](int64_t d) {
    Mailbox::End end(box, d);
    const int64_t s = program.stage_of_device(d);
    try {
      results[d] = run_pipeline_device(
          program, d, worlds[static_cast<size_t>(s)]->endpoint(d - program.stage_first[s]), end,
          feeds_of(d), options, caches_[static_cast<size_t>(d)].get());
    } catch (...) {  // for the caller's thread, below
      exceptions[d] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int64_t d = 1; d < n; ++d) threads.emplace_back(body, d);
  body(0);
  for (auto& t : threads) t.join();
  for (const std::exception_ptr& e : exceptions)
    if (e) std::rethrow_exception(e);
  PipelineCounts counts;
  for (auto& r : results) {
    if (!r->ok()) return r->error();
    counts.kernel_calls += (*r)->counts.kernel_calls;
    counts.recompute_calls += (*r)->counts.recompute_calls;
  }
  PipelineResult out = std::move(**results[0]);
  out.counts = counts;
  return out;
}

}  // namespace heddle
