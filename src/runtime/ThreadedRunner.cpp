#include "heddle/runtime/ThreadedRunner.h"

#include <algorithm>
#include <cstring>

#include "heddle/ir/TextPrinter.h"
#include "heddle/runtime/BlasThreads.h"
#include "heddle/runtime/HostCores.h"
#include "heddle/runtime/OutputKernels.h"

namespace heddle {

ThreadedRunner::ThreadedRunner(const Graph& g, const std::vector<DeviceProgram>& programs)
    : g_(g),
      world_(static_cast<int64_t>(programs.size()), true),
      status_(programs.size()),
      exceptions_(programs.size()) {
  HEDDLE_ASSERT(!programs.empty()) << "no programs";
  for (const DeviceProgram& p : programs)
    devices_.push_back(std::make_unique<DeviceExecutor>(g, p, true, true));
  if (!batches_agree())
    for (size_t d = 0; d < programs.size(); ++d)
      devices_[d] = std::make_unique<DeviceExecutor>(g, programs[d], true, false);
  start_workers();
}

ThreadedRunner::ThreadedRunner(const Graph& g, const ProgramTemplate& programs)
    : g_(g),
      world_(programs.mesh.num_devices(), true),
      status_(static_cast<size_t>(programs.mesh.num_devices())),
      exceptions_(status_.size()) {
  int64_t n = world_.size();
  devices_.resize(static_cast<size_t>(n));
  std::vector<std::thread> build;
  auto compile = [&](int64_t d, bool batch) {
    try {
      devices_[d] = std::make_unique<DeviceExecutor>(g, instantiate(g, programs, d), true, batch);
    } catch (...) {
      exceptions_[d] = std::current_exception();
    }
  };
  for (bool batch : {true, false}) {
    for (int64_t d = 1; d < n; ++d) build.emplace_back(compile, d, batch);
    compile(0, batch);
    for (auto& t : build) t.join();
    build.clear();
    rethrow_first();
    if (batches_agree()) break;
  }
  start_workers();
}

bool ThreadedRunner::batches_agree() const {
  for (const auto& d : devices_)
    if (d->collective_batches() != devices_[0]->collective_batches()) return false;
  return true;
}

void ThreadedRunner::start_workers() {
  for (int64_t d = 0; d < num_devices(); ++d)
    devices_[d]->set_on_error([this, d] { world_.abort(d); });
  for (int64_t d = 1; d < num_devices(); ++d) workers_.emplace_back([this, d] { worker(d); });
}

ThreadedRunner::~ThreadedRunner() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

std::vector<int64_t> ThreadedRunner::peak_bytes_per_device() const {
  std::vector<int64_t> out;
  for (const auto& d : devices_) out.push_back(d->peak_bytes());
  return out;
}

void ThreadedRunner::run_device_step(int64_t d) {
  try {
    status_[d] = devices_[d]->run(world_.endpoint(d), *feeds_, options_, threads_);
    auto copy_mine = [d](const std::vector<OutputCopy>& copies) {
      for (const OutputCopy& c : copies)
        if (c.device == d) c.dst->copy_from(*c.src);
    };
    if (status_[d].ok()) copy_mine(tile_copies_);
    if (split_copy_ && status_[d].ok()) copy_mine(copies_);
  } catch (...) {  // kept for the caller's thread (rethrow_first)
    exceptions_[d] = std::current_exception();
    status_[d] = Diagnostic("internal error on device " + std::to_string(d));
    world_.abort(d);
  }
}

void ThreadedRunner::rethrow_first() {
  for (std::exception_ptr& e : exceptions_)
    if (e) {
      std::exception_ptr first = e;
      for (std::exception_ptr& other : exceptions_) other = nullptr;
      std::rethrow_exception(first);
    }
}

void ThreadedRunner::worker(int64_t d) {
  uint64_t seen = 0;
  while (true) {
    generation_.wait(seen);  // sleeps until the next step (or shutdown) bumps the generation
    seen = generation_.load();
    if (stop_.load()) return;
    run_device_step(d);
    if (pending_.fetch_sub(1) == 1) pending_.notify_all();
  }
}

Status ThreadedRunner::run_into(const TensorMap& feeds, TensorMap& outputs,
                                const ExecOptions& options) {
  int64_t n = num_devices();
  feeds_ = &feeds;
  options_ = options;
  threads_ = threads_per_device(n, options.threads);
  world_.reset();
  if (!assembly_) assembly_ = plan_assembly();
  if (!assembly_->ok()) return *assembly_;
  // The assembled outputs' tensors (kept from step to step), which the devices' tiles fill.
  tile_copies_.clear();
  for (const Assembled& a : assembled_) {
    const TensorType& type = g_.type(a.value);
    auto it = outputs.find(a.value);
    if (it == outputs.end() || it->second.is_view() || it->second.dtype() != type.dtype() ||
        it->second.shape() != type.shape() ||
        std::any_of(it->second.origin().begin(), it->second.origin().end(),
                    [](int64_t o) { return o != 0; }))
      it = outputs.insert_or_assign(a.value, Tensor(type)).first;
    for (const auto& [d, t] : a.parts) tile_copies_.push_back({d, t, &it->second});
  }
  split_copy_ = copies_planned_ && bind_output_copies(outputs);
  // One device: its outputs are computed in `outputs`' tensors themselves, not copied there.
  // Several, once copies are planned: each device computes the outputs it copies there, and
  // skips the output-only kernels whose outputs another device copies.
  if (n == 1) devices_[0]->bind_outputs(outputs);
  for (int64_t d = 0; n > 1 && d < static_cast<int64_t>(skips_.size()); ++d) {
    devices_[d]->skip_kernels(split_copy_ ? &skips_[d] : nullptr);
    devices_[d]->bind_outputs(outputs, split_copy_ ? binds_[d] : unbound_[d]);
  }
  {
    BlasThreads blas(device_blas_threads(threads_));
    pending_.store(n - 1);
    generation_.fetch_add(1);
    generation_.notify_all();
    run_device_step(0);
    for (int64_t left = pending_.load(); left != 0; left = pending_.load()) pending_.wait(left);
  }
  feeds_ = nullptr;
  rethrow_first();  // a device's internal error, on this thread (device order)
  // Report the error of the device that failed first (others only saw the abandonment).
  for (const Status& s : status_)
    if (!s.ok() && s.error().message.find("collective abandoned") == std::string::npos) return s;
  for (const Status& s : status_)
    if (!s.ok()) return s;
  const DeviceExecutor& d0 = *devices_[0];
  if (!split_copy_) {
    d0.copy_outputs(outputs, whole_);
    if (!copies_planned_) plan_output_copies();
  }
  return {};
}

namespace {

// Device `x`'s replica of device 0's output tile `t0` of `v` when it equals it bit for bit.
const Tensor* equal_replica(const DeviceExecutor& x, ValueId v, const Tensor& t0) {
  for (const auto& [w, t] : x.outputs()) {
    if (w != v || t->dtype() != t0.dtype() || t->shape() != t0.shape() ||
        t->origin() != t0.origin())
      continue;
    const size_t elem = t0.is_int() ? sizeof(int64_t) : sizeof(float);
    const void* p0 = t0.is_int() ? static_cast<const void*>(t0.i64()) : t0.f32();
    const void* p = t->is_int() ? static_cast<const void*>(t->i64()) : t->f32();
    return std::memcmp(p, p0, static_cast<size_t>(t0.numel()) * elem) == 0 ? t : nullptr;
  }
  return nullptr;
}

}  // namespace

void ThreadedRunner::plan_output_copies() {
  copies_planned_ = true;
  const int64_t n = num_devices();
  std::vector<int64_t> load(static_cast<size_t>(n), 0);  // bytes each device copies
  const auto& outs0 = devices_[0]->outputs();
  // Units of assignment, each a set of indices into outs0 that one device copies: the outputs
  // of an output-only kernel that every device has alike, then every other output alone.
  std::vector<std::vector<OutputKernel>> kernels;
  for (const auto& d : devices_) kernels.push_back(output_only_kernels(g_, d->program()));
  std::vector<std::vector<size_t>> units;
  std::vector<std::vector<size_t>> instrs;  // per unit: the kernel's instruction on each device
  std::vector<char> grouped(outs0.size(), 0);
  for (const OutputKernel& k0 : kernels[0]) {
    std::vector<size_t> at;
    for (int64_t d = 0; d < n; ++d) {
      auto it = std::find_if(kernels[d].begin(), kernels[d].end(),
                             [&](const OutputKernel& k) { return k.outputs == k0.outputs; });
      if (it != kernels[d].end()) at.push_back(it->instr);
    }
    std::vector<size_t> unit;
    bool assembled = false;  // its outputs are tiles every device computes its own of
    for (size_t k = 0; k < outs0.size(); ++k)
      if (std::binary_search(k0.outputs.begin(), k0.outputs.end(), outs0[k].first)) {
        unit.push_back(k);
        assembled |= !whole_[k];
      }
    if (static_cast<int64_t>(at.size()) != n || unit.size() != k0.outputs.size() || assembled)
      continue;
    for (size_t k : unit) grouped[k] = 1;
    units.push_back(std::move(unit));
    instrs.push_back(std::move(at));
  }
  for (size_t k = 0; k < outs0.size(); ++k)
    if (!grouped[k] && whole_[k]) units.push_back({k});
  auto bytes = [&](const std::vector<size_t>& u) {
    int64_t b = 0;
    for (size_t k : u) b += outs0[k].second->numel();
    return b;
  };
  std::vector<size_t> order(units.size());
  for (size_t u = 0; u < order.size(); ++u) order[u] = u;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes(units[a]) > bytes(units[b]); });
  copies_.assign(outs0.size(), OutputCopy{.device = -1});  // assembled ones stay so
  skips_.assign(static_cast<size_t>(n), {});
  binds_.assign(static_cast<size_t>(n), {});
  for (int64_t d = 0; d < n; ++d) {
    skips_[d].assign(devices_[d]->program().instrs.size(), 0);
    binds_[d].assign(devices_[d]->outputs().size(), 0);
  }
  unbound_ = binds_;
  for (size_t u : order) {
    int64_t to = 0;
    std::vector<const Tensor*> src;
    for (size_t k : units[u]) src.push_back(outs0[k].second);
    for (int64_t d = 1; d < n; ++d) {
      if (load[d] >= load[to]) continue;
      std::vector<const Tensor*> replicas;
      for (size_t k : units[u])
        if (const Tensor* t = equal_replica(*devices_[d], outs0[k].first, *outs0[k].second))
          replicas.push_back(t);
      if (replicas.size() != units[u].size()) continue;
      to = d;
      src = std::move(replicas);
    }
    for (size_t i = 0; i < units[u].size(); ++i) copies_[units[u][i]] = {to, src[i], nullptr};
    load[to] += bytes(units[u]);
    // The device's outputs() entries of the unit are computed in the caller's tensors.
    const auto& outs = devices_[to]->outputs();
    for (size_t j = 0; j < outs.size(); ++j)
      for (const Tensor* t : src)
        if (outs[j].second == t) binds_[to][j] = 1;
    if (u < instrs.size())
      for (int64_t d = 0; d < n; ++d)
        if (d != to) skips_[d][instrs[u][d]] = 1;
  }
}

Status ThreadedRunner::plan_assembly() {
  const int64_t n = num_devices();
  const auto& outs0 = devices_[0]->outputs();
  whole_.assign(outs0.size(), 1);
  std::vector<int64_t> load(static_cast<size_t>(n), 0);  // elements each device copies
  for (ValueId v : g_.outputs()) {
    const Box whole(IVec::zeros(g_.type(v).shape().size()), g_.type(v).shape());
    auto tile_of = [&](int64_t d) -> const Tensor* {
      for (const auto& [w, t] : devices_[d]->outputs())
        if (w == v) return t;
      return nullptr;
    };
    if (const Tensor* t0 = tile_of(0); t0 != nullptr && t0->region() == whole) continue;
    for (size_t k = 0; k < outs0.size(); ++k)
      if (outs0[k].first == v) whole_[k] = 0;
    // Each distinct tile goes to the device holding it that copies the fewest elements so far.
    Assembled a{v, {}};
    int64_t covered = 0;
    for (int64_t d = 0; d < n; ++d) {
      const Tensor* t = tile_of(d);
      if (t == nullptr || t->region().empty()) continue;
      auto same = std::find_if(a.parts.begin(), a.parts.end(),
                               [&](const auto& p) { return p.second->region() == t->region(); });
      if (same == a.parts.end()) {
        bool apart = whole.contains(t->region()) && t->dtype() == g_.type(v).dtype();
        for (const auto& p : a.parts) apart &= p.second->region().intersect(t->region()).empty();
        if (!apart) break;
        covered += t->region().volume();
        load[d] += t->region().volume();
        a.parts.emplace_back(d, t);
      } else if (load[d] < load[same->first]) {
        load[same->first] -= t->region().volume();
        load[d] += t->region().volume();
        *same = {d, t};
      }
    }
    if (covered != whole.volume())
      return Diagnostic("output " + value_ref(g_.value(v).name) +
                        " is whole on no device and the devices' tiles do not cover it exactly "
                        "once; lower with replicate_outputs");
    assembled_.push_back(std::move(a));
  }
  return {};
}

bool ThreadedRunner::bind_output_copies(TensorMap& outputs) {
  const auto& outs0 = devices_[0]->outputs();
  for (size_t k = 0; k < copies_.size(); ++k) {
    if (copies_[k].device < 0) continue;  // assembled from tiles
    auto it = outputs.find(outs0[k].first);
    const Tensor& src = *copies_[k].src;
    if (it == outputs.end() || it->second.is_view() || it->second.dtype() != src.dtype() ||
        it->second.shape() != src.shape() || it->second.origin() != src.origin())
      return false;
    copies_[k].dst = &it->second;
  }
  return true;
}

Result<TensorMap> ThreadedRunner::run(const TensorMap& feeds, const ExecOptions& options) {
  TensorMap out;
  Status st = run_into(feeds, out, options);
  if (!st.ok()) return st.error();
  return out;
}

}  // namespace heddle
