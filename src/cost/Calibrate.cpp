#include "heddle/cost/Calibrate.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "heddle/cost/KernelRates.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ops/Kernel.h"

namespace heddle::cost {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// This thread's CPU time: what a measurement costs the thread that makes it, whatever else the
// machine runs (other processes' load stretches wall time, not this).
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs `f` until min_seconds of thread CPU time have passed; returns CPU seconds per call (best
// of the batches).
template <class F>
double time_per_call(F&& f, double min_seconds) {
  f();  // warm up
  double best = 1e30, total = 0;
  int64_t reps = 1;
  while (total < min_seconds) {
    double t0 = thread_seconds();
    for (int64_t i = 0; i < reps; ++i) f();
    double dt = thread_seconds() - t0;
    total += dt;
    best = std::min(best, dt / static_cast<double>(reps));
    reps *= 2;
  }
  return best;
}

// All-reduce of `n` floats between `threads` threads as the threaded executor's communicator
// does it: each thread publishes its tile, waits at a barrier, allocates its output, copies the
// first peer's tile and combines the others into it, and waits at a second barrier. Returns the
// best wall time of one repetition (barriers included) and the best thread CPU time of its data
// movement (a loaded machine stretches the first with waits for descheduled peers, not the
// second).
std::pair<double, double> allreduce_seconds(int64_t threads, int64_t n, double min_seconds) {
  std::vector<Tensor> mine;
  for (int64_t t = 0; t < threads; ++t) {
    mine.emplace_back(DType::kF32, IVec{n});
    for (int64_t i = 0; i < n; ++i) mine.back().f32()[i] = 1.0f;
  }
  std::barrier sync(static_cast<std::ptrdiff_t>(threads));
  double best = 1e30, best_work = 1e30;
  auto run = [&](int reps) {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int r = 0; r < reps; ++r) {
          auto t0 = Clock::now();
          sync.arrive_and_wait();
          double c0 = thread_seconds();
          Tensor out = Tensor::tile(DType::kF32, Box::of_shape(IVec{n}));
          out.copy_from(mine[0]);
          for (int64_t k = 1; k < threads; ++k)
            kernels::combine(Monoid::kSum, out, mine[static_cast<size_t>(k)]);
          double work = thread_seconds() - c0;
          sync.arrive_and_wait();
          if (t == 0) {
            best = std::min(best, seconds_since(t0));
            best_work = std::min(best_work, work);
          }
        }
      });
    for (auto& th : pool) th.join();
  };
  // Thread start-up is amortized over many repetitions inside one launch.
  int reps = n < 1024 ? 200 : 4;
  run(1);
  auto t0 = Clock::now();
  while (seconds_since(t0) < min_seconds) run(reps);
  return {std::max(best, 1e-9), std::max(best_work, 1e-9)};
}

// Seconds per call of the single op of `text` over its whole index space, through the same box
// kernels the threaded executor runs (so their overheads are part of the figure).
double kernel_seconds(const std::string& text, double min_seconds) {
  auto g = parse_graph(text, "<calibrate>");
  HEDDLE_ASSERT(g.ok()) << g.error().to_string();
  const Op& op = g->op(0);
  std::vector<Tensor> ins, outs;
  for (const Operand& o : op.inputs) {
    ins.emplace_back(g->type(o.value));
    for (int64_t i = 0; i < ins.back().numel(); ++i) ins.back().f32()[i] = 1.0f;
  }
  for (const Operand& o : op.results) outs.emplace_back(g->type(o.value));
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor*> out_ptrs;
  for (auto& t : ins) in_ptrs.push_back(&t);
  for (auto& t : outs) out_ptrs.push_back(&t);
  Box box = op.space.box();
  return time_per_call(
      [&] {
        Status st = kernels::run(op, box, in_ptrs, out_ptrs);
        HEDDLE_ASSERT(st.ok()) << st.error().to_string();
      },
      min_seconds);
}

std::string gemm_text(int64_t n) {
  return "graph g {\n input %a: f32[" + std::to_string(n) + ", " + std::to_string(n) +
         "]\n input %b: f32[" + std::to_string(n) + ", " + std::to_string(n) + "]\n %c: f32[" +
         std::to_string(n) + ", " + std::to_string(n) +
         "] = einsum{spec=\"mk,kn->mn\"} [m=" + std::to_string(n) + ", n=" + std::to_string(n) +
         ", k=" + std::to_string(n) + ":sum] %a(m, k), %b(k, n) -> (m, n)\n output %c\n}";
}

// A bias add, [rows, cols] + [cols], the most common elementwise pattern of the zoo's models.
std::string add_text(int64_t n) {
  int64_t cols = std::min<int64_t>(n, 1024), rows = std::max<int64_t>(n / cols, 1);
  std::string r = std::to_string(rows), c = std::to_string(cols);
  return "graph g {\n input %a: f32[" + r + ", " + c + "]\n input %b: f32[" + c + "]\n %c: f32[" +
         r + ", " + c + "] = add [i=" + r + ", j=" + c +
         "] %a(i, j), %b(j) -> (i, j)\n output %c\n}";
}

}  // namespace

CpuCalibration calibrate_cpu(const CalibrateOptions& o) {
  CpuCalibration cal;
  int64_t threads =
      o.threads > 0 ? o.threads : std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  int saved_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  for (int64_t n : o.gemm_sizes) {
    double t = kernel_seconds(gemm_text(n), o.min_seconds);
    cal.gemm.push_back({n, 2.0 * static_cast<double>(n * n * n) / t});
  }
  // Streaming bandwidth of one device's elementwise kernel (2 reads, 1 write per element), and
  // the fixed cost of a kernel call from a one-element add.
  int64_t elems = std::max<int64_t>(o.bandwidth_bytes / 4, 1);
  double t_add = kernel_seconds(add_text(elems), o.min_seconds);
  elems = std::min<int64_t>(elems, 1024) * std::max<int64_t>(elems / 1024, 1);
  cal.kernel_bandwidth = 2.0 * 4.0 * static_cast<double>(elems) / t_add;
  cal.launch_s = kernel_seconds(add_text(1), o.min_seconds);
  // Non-GEMM work: op_cost counts a GeLU as 1 FLOP per element; its transcendental makes it the
  // compute-bound end of the elementwise kernels.
  {
    std::string r = std::to_string(std::max<int64_t>(elems / 1024, 1));
    double t =
        kernel_seconds("graph g {\n input %a: f32[" + r + ", 1024]\n %c: f32[" + r +
                           ", 1024] = gelu [i=" + r + ", j=1024] %a(i, j) -> (i, j)\n output %c\n}",
                       o.min_seconds);
    cal.vector_flops = static_cast<double>(std::max<int64_t>(elems / 1024, 1) * 1024) / t;
  }
  if (o.kernel_rates) {
    KernelRateOptions ko;
    ko.threads = threads;
    ko.launch_s = cal.launch_s;
    ko.models = o.kernel_rate_models;
    cal.kernel_element_s = measure_kernel_rates(ko);
  }
  openblas_set_num_threads(saved_threads);
  {
    size_t bytes = static_cast<size_t>(o.bandwidth_bytes);
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    double s = time_per_call([&] { std::memcpy(dst.data(), src.data(), bytes); }, o.min_seconds);
    cal.memory_bandwidth = 2.0 * static_cast<double>(bytes) / s;
  }
  double peak = 0;
  for (auto& [n, f] : cal.gemm) peak = std::max(peak, f);
  // Fit f(n) = E (n/(n+knee))^3 to the measured fractions of the best rate: least squares in
  // log space over a grid of knees; E is the geometric-mean ratio for each knee.
  double best_err = 1e30, best_knee = 1, best_e = 1;
  for (double knee = 1; knee <= 512; knee *= 1.05) {
    double sum_log = 0;
    for (auto& [n, f] : cal.gemm) {
      double x = static_cast<double>(n);
      sum_log += std::log(f / peak) - 3 * std::log(x / (x + knee));
    }
    double e = std::exp(sum_log / static_cast<double>(cal.gemm.size())), err = 0;
    for (auto& [n, f] : cal.gemm) {
      double x = static_cast<double>(n);
      double d = std::log(f / peak) - std::log(e * std::pow(x / (x + knee), 3));
      err += d * d;
    }
    if (err < best_err) best_err = err, best_knee = knee, best_e = e;
  }
  if (threads > 1) {
    int64_t small = 2, large = o.bandwidth_bytes / 16;
    double t_small = allreduce_seconds(threads, small, o.min_seconds).first;
    double t_large = t_small + allreduce_seconds(threads, large, o.min_seconds).second;
    double steps = static_cast<double>(threads - 1), frac = steps / static_cast<double>(threads);
    cal.allreduce_latency = t_small / (2 * steps);
    double bw_time = std::max(t_large - t_small, 1e-9);
    cal.allreduce_bandwidth = 2 * frac * static_cast<double>(large) * 4 / bw_time;
  } else {
    cal.allreduce_latency = 1e-6;
    cal.allreduce_bandwidth = cal.memory_bandwidth / 2;
  }
  Cluster& c = cal.cluster;
  c.name = "cpu";
  c.device.name = "cpu";
  c.device.peak_flops = peak;
  c.device.vector_flops = cal.vector_flops;
  c.device.gemm_efficiency = std::min(best_e, 1.0);
  c.device.gemm_knee = best_knee;
  c.device.memory_bandwidth = cal.memory_bandwidth / static_cast<double>(threads);
  c.device.elementwise_bandwidth = std::min(cal.kernel_bandwidth, c.device.memory_bandwidth);
  c.device.memory_efficiency = 1.0;
  c.device.memory_bytes = 8e9;
  c.device.launch_s = cal.launch_s;
  c.device.element_bytes = 4;
  c.device.fuses_elementwise = false;  // the executor groups kernel calls but each makes its pass
  c.device.kernel_element_s = cal.kernel_element_s;
  c.device.batched_gemm = false;  // the einsum kernel calls sgemm once per batch point
  c.count = threads;
  c.devices_per_node = threads;
  c.intra_node = {"shared-memory", cal.allreduce_bandwidth, cal.allreduce_latency};
  c.inter_node = c.intra_node;
  c.source = "calibrated on this machine";
  return cal;
}

std::string cluster_to_json(const Cluster& c) {
  const DeviceProfile& d = c.device;
  nlohmann::json j = {{"name", c.name},
                      {"device",
                       {{"name", d.name},
                        {"peak_flops", d.peak_flops},
                        {"vector_flops", d.vector_flops},
                        {"elementwise_bandwidth", d.elementwise_bandwidth},
                        {"memory_bytes", d.memory_bytes},
                        {"memory_bandwidth", d.memory_bandwidth},
                        {"launch_s", d.launch_s},
                        {"gemm_efficiency", d.gemm_efficiency},
                        {"gemm_knee", d.gemm_knee},
                        {"memory_efficiency", d.memory_efficiency},
                        {"element_bytes", d.element_bytes},
                        {"fuses_elementwise", d.fuses_elementwise},
                        {"batched_gemm", d.batched_gemm},
                        {"kernel_element_s", d.kernel_element_s}}},
                      {"count", c.count},
                      {"devices_per_node", c.devices_per_node},
                      {"intra_node",
                       {{"name", c.intra_node.name},
                        {"bandwidth", c.intra_node.bandwidth},
                        {"latency", c.intra_node.latency}}},
                      {"inter_node",
                       {{"name", c.inter_node.name},
                        {"bandwidth", c.inter_node.bandwidth},
                        {"latency", c.inter_node.latency}}}};
  return j.dump(2) + "\n";
}

CalibrateOptions quick_calibrate_options() {
  CalibrateOptions co;
  co.gemm_sizes = {32, 64, 128, 256};
  co.min_seconds = 0.01;
  co.kernel_rate_models = {"gpt-tiny"};
  return co;
}

std::string to_string(const CpuCalibration& cal) {
  std::string out;
  for (auto& [n, f] : cal.gemm)
    out += fmt::format("gemm {:>5}^3        {:8.2f} GFLOP/s\n", n, f / 1e9);
  out += fmt::format("memory bandwidth   {:8.2f} GB/s (copy, all threads)\n",
                     cal.memory_bandwidth / 1e9);
  out += fmt::format("kernel bandwidth   {:8.2f} GB/s (elementwise kernel, one thread)\n",
                     cal.kernel_bandwidth / 1e9);
  out += fmt::format("vector work        {:8.2f} GFLOP/s (GeLU kernel)\n", cal.vector_flops / 1e9);
  out += fmt::format("kernel call        {:8.2f} us\n", cal.launch_s * 1e6);
  out += fmt::format("kernel rates       {} op kinds", cal.kernel_element_s.size());
  for (const char* kind : {"add", "softmax", "adamw"})
    if (auto it = cal.kernel_element_s.find(kind); it != cal.kernel_element_s.end())
      out += fmt::format(", {} {:.2f} ns", kind, it->second * 1e9);
  out += " per element\n";
  out += fmt::format("all-reduce alpha   {:8.2f} us\n", cal.allreduce_latency * 1e6);
  out += fmt::format("all-reduce busbw   {:8.2f} GB/s ({} threads)\n",
                     cal.allreduce_bandwidth / 1e9, cal.cluster.count);
  out += fmt::format("GEMM fit           {:.2f} of {:.2f} GFLOP/s, knee {:.1f}\n",
                     cal.cluster.device.gemm_efficiency, cal.cluster.device.peak_flops / 1e9,
                     cal.cluster.device.gemm_knee);
  return out;
}

}  // namespace heddle::cost
