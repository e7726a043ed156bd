#include "heddle/runtime/Session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>

#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/PipelineFeeds.h"

namespace heddle {

double RunResult::wall_time_s() const {
  double sum = 0;
  for (double t : step_times_s) sum += t;
  return sum;
}

namespace {

// The first element of `t`'s storage, whichever its dtype.
void* storage(Tensor& t) {
  return t.is_int() ? static_cast<void*>(t.i64()) : static_cast<void*>(t.f32());
}

// A view of all of `t`.
Tensor view_of(Tensor& t) { return Tensor::view(t.dtype(), t.region(), storage(t)); }

// The median of `t` (the mean of the middle two for an even count; 0 when empty).
double median_of(std::vector<double> t) {
  if (t.empty()) return 0;
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  return n % 2 == 1 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

// This process's CPU seconds so far (every thread).
double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

double RunResult::median_step_s() const { return median_of(step_times_s); }

double RunResult::median_step_cpu_s() const { return median_of(step_cpu_s); }

std::optional<size_t> RunResult::first_nonfinite_loss() const {
  for (size_t k = 0; k < losses.size(); ++k)
    if (!std::isfinite(losses[k])) return k + 1;
  return std::nullopt;
}

Result<RunResult> run_steps(const Graph& g, const StepFn& step, const StepLoopOptions& options) {
  HEDDLE_ASSERT(options.first_step >= 1 && options.steps >= options.first_step)
      << "steps " << options.first_step << ".." << options.steps;
  RunResult out;
  for (int s = options.first_step; s <= options.steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_s();
    auto got = step(s);
    out.step_times_s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    out.step_cpu_s.push_back(process_cpu_s() - c0);
    HEDDLE_TRY(got);
    if (!got->has_value()) continue;
    const TensorMap& outputs = **got;
    if (options.reference && (options.train || s == 1))
      HEDDLE_TRY(options.reference->check_step(s, outputs));
    if (options.train) out.losses.push_back(outputs.at(g.outputs()[0]).f32()[0]);
    if (options.on_step) options.on_step(s, outputs);
    out.outputs = std::move(**got);
  }
  return out;
}

Session::Session(const Graph& g, std::vector<ParamUpdate> updates,
                 std::vector<DeviceProgram> programs, SequenceLayout layout)
    : g_(g),
      layout_(std::move(layout)),
      updates_(std::move(updates)),
      programs_(std::move(programs)) {
  if (!layout_.in_order()) laid_out_.emplace(with_layout(g_, layout_));
}

namespace {

// `m` with the tensors `layout` names permuted into its order (`back`: into the sequence's),
// as copies, and views of the others.
TensorMap relaid(TensorMap& m, const SequenceLayout& layout, bool back = false) {
  TensorMap out;
  for (auto& [v, t] : m) out.emplace(v, view_of(t));
  permute_sequences(out, layout, back);
  return out;
}

}  // namespace

Session::Session(const Graph& g, std::vector<ParamUpdate> updates, PipelineProgram pipeline)
    : g_(g), updates_(std::move(updates)), pipeline_(std::move(pipeline)) {}

bool profiled_step(int step, const StepLoopOptions& loop) {
  return loop.profile && !(step == loop.first_step && loop.steps > step);
}

std::vector<InstrTimes>* Session::times_for(int step, const StepLoopOptions& loop) {
  if (pipeline_ || !profiled_step(step, loop)) return nullptr;
  times_.resize(programs_.size());
  return &times_;
}

Result<TensorMap> Session::execute(const TensorMap& feeds, int64_t optimizer_step,
                                   bool feeds_unchanged, const StepLoopOptions& loop,
                                   std::vector<InstrTimes>* times) {
  ExecOptions eo{.optimizer_step = optimizer_step,
                 .feeds_unchanged = feeds_unchanged,
                 .feeds_repeat = !loop.train,
                 .overlap_ring = loop.overlap_ring,
                 .on_ring_event = loop.on_ring_event,
                 .instr_times = times};
  if (!pipeline_) {
    if (!runner_)
      runner_ = std::make_unique<ThreadedRunner>(laid_out_ ? *laid_out_ : g_, programs_);
    return runner_->run(feeds, eo);
  }
  if (!pipeline_runner_) pipeline_runner_ = std::make_unique<PipelineRunner>(*pipeline_);
  auto r = pipeline_runner_->run(pack_pipeline_feeds(*pipeline_, g_, feeds), eo);
  HEDDLE_TRY(r);
  return unpack_pipeline_result(*pipeline_, g_, updates_, *r);
}

Result<RunResult> Session::run(TensorMap feeds, const StepLoopOptions& options) {
  if (options.train && !pipeline_) return train_in_place(std::move(feeds), options);
  TensorMap laid_out;  // the feeds in the programs' sequence order (forward: made once)
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    if (laid_out_ && (options.train || s == options.first_step)) laid_out = relaid(feeds, layout_);
    // Forward-only steps run on the same feeds: kernels may keep what they derive from them.
    auto got = execute(laid_out_ ? laid_out : feeds, options.train ? s : 0,
                       !options.train && s > options.first_step, options, times_for(s, options));
    HEDDLE_TRY(got);
    permute_sequences(*got, layout_, true);
    if (options.train)
      for (const auto& u : updates_) {
        feeds.insert_or_assign(u.param, got->at(u.updated));
        for (const auto& st : u.state) feeds.insert_or_assign(st.first, got->at(st.second));
      }
    if (options.train && options.after_update) HEDDLE_TRY(options.after_update(s, feeds));
    return std::optional<TensorMap>(std::move(*got));
  };
  return run_steps(g_, step, options);
}

Result<RunResult> Session::train_in_place(TensorMap feeds, const StepLoopOptions& options) {
  // The value each fed-back output replaces: updated parameters and optimizer state.
  std::map<ValueId, ValueId> feeds_back;
  for (const auto& u : updates_) {
    feeds_back[u.updated] = u.param;
    for (const auto& st : u.state) feeds_back[st.second] = st.first;
  }
  if (!runner_) runner_ = std::make_unique<ThreadedRunner>(laid_out_ ? *laid_out_ : g_, programs_);
  // The feeds stay in the programs' sequence order from step to step; what the step loop and
  // the checkpoints see is in the sequence's (copies of the few tensors the layout permutes).
  permute_sequences(feeds, layout_);
  TensorMap kept;  // the outputs' buffers, reused from step to step
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    HEDDLE_TRY(runner_->run_into(feeds, kept,
                                 {.optimizer_step = s,
                                  .overlap_ring = options.overlap_ring,
                                  .on_ring_event = options.on_ring_event,
                                  .instr_times = times_for(s, options)}));
    TensorMap out;
    for (auto& [v, t] : kept) {
      Tensor* now = &t;
      auto back = feeds_back.find(v);
      auto fed = back == feeds_back.end() ? feeds.end() : feeds.find(back->second);
      if (fed != feeds.end() && !fed->second.is_view() && fed->second.dtype() == t.dtype() &&
          fed->second.shape() == t.shape() && fed->second.origin() == t.origin()) {
        std::swap(fed->second, t);  // `t` keeps the old buffer for the next step to overwrite
        now = &fed->second;
      } else if (back != feeds_back.end()) {
        feeds.insert_or_assign(back->second, t);
      }
      out.emplace(v, view_of(*now));
    }
    permute_sequences(out, layout_, true);
    if (options.after_update)
      HEDDLE_TRY(options.after_update(s, laid_out_ ? relaid(feeds, layout_, true) : feeds));
    return std::optional<TensorMap>(std::move(out));
  };
  auto r = run_steps(g_, step, options);
  HEDDLE_TRY(r);
  // The last step's outputs view `feeds` and `kept`, which end here: each takes the buffer it
  // views (a copy only where none matches). Copying them instead allocated and filled as many
  // bytes again as the model's parameters and optimizer state (ViT-B/32: 1 GiB).
  for (auto& [v, t] : r->outputs) {
    if (!t.is_view()) continue;
    Tensor* owner = nullptr;
    auto back = feeds_back.find(v);
    auto fed = back == feeds_back.end() ? feeds.end() : feeds.find(back->second);
    if (auto k = kept.find(v);
        k != kept.end() && !k->second.is_view() && storage(k->second) == storage(t))
      owner = &k->second;
    else if (fed != feeds.end() && !fed->second.is_view() && storage(fed->second) == storage(t))
      owner = &fed->second;
    if (owner != nullptr && owner->dtype() == t.dtype() && owner->shape() == t.shape() &&
        owner->origin() == t.origin())
      t = std::move(*owner);
    else
      t = Tensor(t);
  }
  return r;
}

std::vector<int64_t> Session::peak_bytes_per_device() const {
  if (runner_) return runner_->peak_bytes_per_device();
  return pipeline_ ? pipeline_peak_bytes(*pipeline_) : heddle::peak_bytes_per_device(g_, programs_);
}

}  // namespace heddle
