#include "heddle/runtime/Executor.h"

#include <thread>

#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/runtime/BlasThreads.h"
#include "heddle/runtime/ThreadedCommunicator.h"

namespace heddle {

namespace {

class DeviceRun {
 public:
  DeviceRun(const Graph& g, Communicator& comm, const TensorMap& feeds, const ExecOptions& o)
      : g_(g), comm_(comm), feeds_(feeds), o_(o) {}

  Result<TensorMap> run(const DeviceProgram& p) {
    for (const Instr& in : p.instrs) step(in);
    if (!error_.ok()) return error_.error();
    TensorMap out;
    for (ValueId v : g_.outputs()) {
      auto it = tiles_.find(v);
      if (it != tiles_.end()) out.emplace(v, it->second);
    }
    return out;
  }

  const Status& error() const { return error_; }
  void set_on_error(std::function<void()> f) { on_error_ = std::move(f); }

 private:
  void fail(Diagnostic d) {
    if (!error_.ok()) return;
    error_ = Status(std::move(d));
    if (on_error_) on_error_();
  }

  void step(const Instr& in) {
    switch (in.kind) {
      case Instr::Kind::kLoad: {
        auto it = feeds_.find(in.value);
        if (it == feeds_.end()) {
          fail(Diagnostic("no data for " + value_ref(g_.value(in.value).name)));
          tiles_[in.value] = Tensor::tile(g_.type(in.value).dtype(), in.box);
        } else {
          tiles_[in.value] = it->second.crop(in.box);
        }
        return;
      }
      case Instr::Kind::kCollective:
      case Instr::Kind::kFetch: {
        Tensor out = Tensor::tile(g_.type(in.value).dtype(), in.box);
        Collective c = in.kind == Instr::Kind::kFetch ? Collective::kHaloExchange : in.collective;
        Status st = comm_.collective(c, in.group, tiles_.at(in.value), out, in.monoid);
        if (!st.ok()) fail(st.error());
        (in.kind == Instr::Kind::kFetch ? halos_ : tiles_)[in.value] = std::move(out);
        return;
      }
      case Instr::Kind::kKernel: {
        if (in.calls.size() > 1 && error_.ok() && fused(in)) return;  // one loop (ops/Chain.h)
        std::map<ValueId, Tensor> temps;
        for (const KernelCall& call : in.calls) kernel(call, temps, in.temporaries);
        return;
      }
      case Instr::Kind::kFree:
        tiles_.erase(in.value);
        return;
    }
  }

  // A fused chain: kernels::run_chain with this device's tiles; its results become tiles. On a
  // kernel error: false, after fail() (the caller's loop then gives the results zero tiles).
  bool fused(const Instr& in) {
    std::vector<kernels::ChainCall> calls;
    for (const KernelCall& c : in.calls) calls.push_back({c.op, c.box});
    kernels::KernelOptions ko;
    ko.optimizer_step = o_.optimizer_step;
    auto r = kernels::run_chain(
        g_, calls, in.temporaries,
        [&](ValueId v) -> const Tensor* {
          auto h = halos_.find(v);
          return h != halos_.end() ? &h->second : &tiles_.at(v);
        },
        ko);
    if (!r.ok()) {
      fail(r.error());
      return false;
    }
    for (const KernelCall& c : in.calls)
      for (const auto& x : g_.op(c.op).inputs) halos_.erase(x.value);
    for (auto& [v, t] : *r) tiles_[v] = std::move(t);
    return true;
  }

  void kernel(const KernelCall& call, std::map<ValueId, Tensor>& temps,
              const std::vector<ValueId>& temporaries) {
    const Op& op = g_.op(call.op);
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) {
      if (auto h = halos_.find(x.value); h != halos_.end()) {
        ins.push_back(&h->second);
      } else if (auto t = temps.find(x.value); t != temps.end()) {
        ins.push_back(&t->second);
      } else {
        ins.push_back(&tiles_.at(x.value));
      }
    }
    std::vector<Tensor> outs;
    for (const auto& r : op.results)
      outs.push_back(Tensor::tile(g_.type(r.value).dtype(), r.proj.image(call.box)));
    std::vector<Tensor*> out_ptrs;
    for (auto& t : outs) out_ptrs.push_back(&t);
    if (error_.ok()) {
      kernels::KernelOptions ko;
      ko.optimizer_step = o_.optimizer_step;
      Status st = kernels::run(op, call.box, ins, out_ptrs, ko);
      if (!st.ok()) fail(st.error());
    }
    for (const auto& x : op.inputs) halos_.erase(x.value);
    for (size_t k = 0; k < op.results.size(); ++k) {
      ValueId v = op.results[k].value;
      bool temp = std::find(temporaries.begin(), temporaries.end(), v) != temporaries.end();
      (temp ? temps : tiles_)[v] = std::move(outs[k]);
    }
  }

  const Graph& g_;
  Communicator& comm_;
  const TensorMap& feeds_;
  const ExecOptions& o_;
  std::map<ValueId, Tensor> tiles_, halos_;
  Status error_;
  std::function<void()> on_error_;
};

}  // namespace

Result<TensorMap> run_device(const Graph& g, const DeviceProgram& program, Communicator& comm,
                             const TensorMap& feeds, const ExecOptions& options) {
  return DeviceRun(g, comm, feeds, options).run(program);
}

namespace {

// Runs program_of(d) for every device d < n on its own thread; returns device 0's outputs.
template <class ProgramOf>
Result<TensorMap> run_devices(const Graph& g, int64_t n, ProgramOf&& program_of,
                              const TensorMap& feeds, const ExecOptions& options) {
  HEDDLE_ASSERT(n >= 1) << "no programs";
  SingleThreadedBlas blas(n);
  ThreadedWorld world(n);
  std::vector<std::optional<Result<TensorMap>>> results(static_cast<size_t>(n));
  auto body = [&](int64_t d) {
    DeviceRun run(g, world.endpoint(d), feeds, options);
    run.set_on_error([&world, d] { world.abort(d); });
    results[d] = run.run(program_of(d));
  };
  std::vector<std::thread> threads;
  for (int64_t d = 1; d < n; ++d) threads.emplace_back(body, d);
  body(0);
  for (auto& t : threads) t.join();
  // Report the error of the device that failed first (others only saw the abandonment).
  for (auto& r : results)
    if (!r->ok() && r->error().message.find("collective abandoned") == std::string::npos)
      return r->error();
  for (auto& r : results)
    if (!r->ok()) return r->error();
  TensorMap out = std::move(**results[0]);
  for (ValueId v : g.outputs()) {
    auto it = out.find(v);
    if (it == out.end() || it->second.region() != Box::of_shape(g.type(v).shape()))
      return Diagnostic("output " + value_ref(g.value(v).name) +
                        " is not whole on device 0; lower with replicate_outputs");
  }
  return out;
}

}  // namespace

Result<TensorMap> run_threaded(const Graph& g, const std::vector<DeviceProgram>& programs,
                               const TensorMap& feeds, const ExecOptions& options) {
  return run_devices(
      g, static_cast<int64_t>(programs.size()),
      [&](int64_t d) -> const DeviceProgram& { return programs[d]; }, feeds, options);
}

Result<TensorMap> run_threaded(const Graph& g, const ProgramTemplate& programs,
                               const TensorMap& feeds, const ExecOptions& options) {
  return run_devices(
      g, programs.mesh.num_devices(), [&](int64_t d) { return instantiate(g, programs, d); }, feeds,
      options);
}

}  // namespace heddle
