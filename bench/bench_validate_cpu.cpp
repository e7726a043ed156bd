// Validation of the cost model on this machine: predicted step time (`heddle simulate MODEL
// --cluster cpu`) against the measured step time of the threaded executor, forward and training,
// for small zoo models under 1 device, dp=2 and tp=2. Prints a markdown table per mode and the
// median absolute error. docs/validation.md records the figures.
//
// Usage: bench_validate_cpu [--calibrate] [--runs N] [--only MODEL] [--breakdown]
//   --calibrate   measure this machine first (as `heddle calibrate`, not written to disk) and
//                 use that profile; default: the `cpu` cluster (the profile `heddle calibrate`
//                 wrote)
//   --runs N      timed runs per case after one warm-up (default 5); the table shows the median
//                 and the minimum wall time and the CPU time per device
//   --only MODEL  only the cases of one model
//   --forward     only forward steps; --train: only training steps
//   --breakdown   also time device 0's kernels of each case alone (a row under the case), and
//                 every kernel of the 1-device programs against the cost model per op kind
//                 with the cost model's op_time (where the error comes from)
#include <cblas.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>

#include "common/RandomFeeds.h"
#include "heddle/cost/Calibrate.h"
#include "heddle/cost/ComputeCost.h"
#include "heddle/cost/Simulator.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"

using namespace heddle;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Case {
  std::string model;
  zoo::ZooOverrides over;
  std::string label;      // the overrides, for the table
  bool train_too = true;  // also a training step (ViT's conv weight gradient takes ~20 s)
};

// The graph the executor runs: the forward model, or its whole training step (forward with the
// loss, backward, AdamW) as `heddle run --train` builds it.
Result<Graph> executed_graph(const Case& c, bool train) {
  zoo::ModelOptions mo;
  mo.with_loss = train;
  auto g = zoo::build_zoo_model(c.model, c.over, mo);
  HEDDLE_TRY(g);
  if (!train) return g;
  auto step = build_train_step(*g);
  HEDDLE_TRY(step);
  return std::move(step->graph);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Measured {
  double median_s = 0, min_s = 0;              // wall time of a step
  double cpu_per_device_s = 0, cpu_min_s = 0;  // process CPU time over devices: median, min
};

Result<Measured> measure(const Graph& g, const Propagation& prop, int runs, bool train) {
  auto progs = lower(g, prop.plan);
  HEDDLE_TRY(progs);
  TensorMap feeds = testing::random_feeds(g, 1);
  ExecOptions eo;
  eo.optimizer_step = train ? 1 : 0;
  eo.threads = 1;  // one kernel and BLAS thread per device, as calibrated (docs/validation.md)
  auto warm = run_threaded(g, *progs, feeds, eo);
  HEDDLE_TRY(warm);
  std::vector<double> wall, cpu;
  for (int r = 0; r < runs; ++r) {
    double c0 = cpu_seconds();
    auto t0 = Clock::now();
    auto out = run_threaded(g, *progs, feeds, eo);
    wall.push_back(since(t0));
    cpu.push_back(cpu_seconds() - c0);
    HEDDLE_TRY(out);
  }
  Measured m;
  m.median_s = median(wall);
  m.min_s = *std::min_element(wall.begin(), wall.end());
  m.cpu_per_device_s = median(cpu) / static_cast<double>(progs->size());
  m.cpu_min_s = *std::min_element(cpu.begin(), cpu.end()) / static_cast<double>(progs->size());
  return m;
}

// Per op kind: the cost model's op_time against the kernel's measured thread CPU time (output
// tiles allocated as the executor does), over every op of the graph on one device.
void breakdown(const Graph& g, const cost::DeviceProfile& dev) {
  TensorMap feeds = testing::random_feeds(g, 1);
  std::map<ValueId, Tensor> vals(feeds.begin(), feeds.end());
  struct Sum {
    double predicted = 0, measured = 0;
    int64_t count = 0;
  };
  std::map<std::string, Sum> kinds;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(&vals.at(x.value));
    double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    std::vector<Tensor> outs;
    for (const auto& r : op.results)
      outs.push_back(Tensor::tile(g.type(r.value).dtype(), r.proj.image(op.space.box())));
    std::vector<Tensor*> ptrs;
    for (auto& t : outs) ptrs.push_back(&t);
    kernels::KernelOptions ko;
    ko.optimizer_step = 1;
    Status st = kernels::run(op, op.space.box(), ins, ptrs, ko);
    double dt = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    if (!st.ok()) {
      fmt::print("kernel {} failed: {}\n", op_kind_name(op.kind), st.error().message);
      return;
    }
    for (size_t r = 0; r < op.results.size(); ++r)
      vals.insert_or_assign(op.results[r].value, std::move(outs[r]));
    cost::OpTime t = cost::op_time(g, id, op.space.box(), dev);
    Sum& s = kinds[std::string(op_kind_name(op.kind))];
    s.predicted += t.seconds;
    s.measured += dt;
    ++s.count;
  }
  std::vector<std::pair<std::string, Sum>> rows(kinds.begin(), kinds.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.measured > b.second.measured; });
  double tp = 0, tm = 0;
  fmt::print("| op kind | ops | predicted (ms) | measured (ms) | ratio |\n|---|---|---|---|---|\n");
  for (const auto& [k, s] : rows) {
    tp += s.predicted;
    tm += s.measured;
    fmt::print("| {} | {} | {:.3f} | {:.3f} | {:.2f} |\n", k, s.count, 1e3 * s.predicted,
               1e3 * s.measured, s.predicted / s.measured);
  }
  fmt::print("| total | | {:.3f} | {:.3f} | {:.2f} |\n\n", 1e3 * tp, 1e3 * tm, tp / tm);
}

// Device 0's kernel calls of the lowered plan, each on fresh tiles of the regions it reads (filled
// with values in the run's ranges), in
// thread CPU time, against op_time of the same local boxes: the compute part of a partitioned step
// without the executor's collectives, loads and frees.
std::pair<double, double> device0_kernels(const Graph& g, const Propagation& prop,
                                          const cost::DeviceProfile& dev) {
  auto progs = lower(g, prop.plan);
  if (!progs.ok()) return {0, 0};
  double predicted = 0, measured = 0;
  kernels::KernelOptions ko;
  ko.optimizer_step = 1;
  for (const Instr& in : (*progs)[0].instrs) {
    if (in.kind != Instr::Kind::kKernel) continue;
    for (const KernelCall& call : in.calls) {
      const Op& op = g.op(call.op);
      std::vector<Tensor> ins;
      for (const auto& x : op.inputs) {
        ins.push_back(
            Tensor::tile(g.type(x.value).dtype(),
                         x.proj.image(call.box).intersect(Box::of_shape(g.type(x.value).shape()))));
        Tensor& t = ins.back();
        for (int64_t i = 0; i < t.numel(); ++i) {  // values like the run's (-1..1; ids 0..2)
          if (t.is_int())
            t.i64()[i] = i % 3;
          else
            t.f32()[i] = static_cast<float>((i * 7919) % 2000) / 1000.0f - 1.0f;
        }
      }
      std::vector<const Tensor*> in_ptrs;
      for (auto& t : ins) in_ptrs.push_back(&t);
      double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      std::vector<Tensor> outs;
      for (const auto& r : op.results)
        outs.push_back(Tensor::tile(g.type(r.value).dtype(), r.proj.image(call.box)));
      std::vector<Tensor*> out_ptrs;
      for (auto& t : outs) out_ptrs.push_back(&t);
      Status st = kernels::run(op, call.box, in_ptrs, out_ptrs, ko);
      measured += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
      if (!st.ok()) return {0, 0};
      predicted += cost::op_time(g, call.op, call.box, dev).seconds;
    }
  }
  return {predicted, measured};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  std::string only;
  bool show_breakdown = false, calibrate = false, forward = true, training = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--breakdown") == 0) {
      show_breakdown = true;
    } else if (std::strcmp(argv[i], "--calibrate") == 0) {
      calibrate = true;
    } else if (std::strcmp(argv[i], "--forward") == 0) {
      training = false;
    } else if (std::strcmp(argv[i], "--train") == 0) {
      forward = false;
    } else {
      fmt::print(stderr,
                 "usage: bench_validate_cpu [--calibrate] [--runs N] [--only MODEL] [--forward | "
                 "--train] [--breakdown]\n");
      return 1;
    }
  }
  // One BLAS thread per device, as calibrate measures: parallelism comes from the device threads
  // (more BLAS threads would oversubscribe the cores and spin, inflating the CPU time).
  openblas_set_num_threads(1);
  auto cluster = calibrate ? Result<cost::Cluster>(cost::calibrate_cpu().cluster)
                           : cost::resolve_cluster("cpu");
  if (!cluster.ok()) {
    fmt::print(stderr, "error: {}\n", cluster.error().to_string());
    return 1;
  }
  {
    std::ifstream load("/proc/loadavg");
    std::string l1;
    load >> l1;
    fmt::print("cpu profile: {}; {} devices; load average {} at start\n", cluster->source,
               cluster->count, l1);
    if (calibrate) fmt::print("```\n{}```\n", cost::cluster_to_json(*cluster));
    fmt::print("\n");
  }
  const std::vector<Case> cases = {
      {"mlp", zoo::ZooOverrides::sized(512), "batch 512", true},
      {"gpt-tiny", zoo::ZooOverrides::sized(8, 256, 128), "batch 8, hidden 256, seq 128", true},
      {"llama-tiny", zoo::ZooOverrides::sized(8, 256, 128), "batch 8, hidden 256, seq 128", true},
      {"moe-tiny", zoo::ZooOverrides::sized(8, 128, 64), "batch 8, hidden 128, seq 64", true},
      {"vit-b16", zoo::ZooOverrides::sized(2, 192, {}, 2), "batch 2, hidden 192, 2 layers", false},
  };
  const std::vector<std::string> strategies = {"dp=1", "dp=2", "tp=2"};
  std::vector<double> all_errors, all_cpu_errors;
  for (bool train : {false, true}) {
    if (!(train ? training : forward)) continue;
    fmt::print("### {}\n\n", train ? "training step (forward, backward, AdamW)" : "forward");
    fmt::print(
        "| model | overrides | strategy | predicted (s) | wall, median (s) | wall, min (s) | CPU "
        "per device, median (s) | CPU per device, min (s) | error vs wall median | error vs CPU "
        "min |\n|---|---|---|---|---|---|---|---|---|---|\n");
    std::vector<double> errors, cpu_errors;
    for (const Case& c : cases) {
      if ((!only.empty() && c.model != only) || (train && !c.train_too)) continue;
      auto src = model::zoo_scalable_model(c.model, c.over);
      auto g = executed_graph(c, train);
      if (!src.ok() || !g.ok()) {
        fmt::print("| {} | {} | | error: {} |\n", c.model, c.label,
                   (src.ok() ? g.error() : src.error()).message);
        continue;
      }
      for (const std::string& s : strategies) {
        auto spec = StrategySpec::parse(s);
        cost::Cluster cl = *cluster;
        cl.count = spec->dp.value_or(1) * spec->tp.value_or(1);
        auto mesh = spec->mesh(cl.count);
        cost::SimulateOptions so;
        so.train = train;
        so.autodiff = true;
        so.executor_io = true;
        auto pred = cost::simulate(*src, cl, *spec, so);
        if (!mesh.ok() || !pred.ok()) {
          fmt::print("| {} | {} | {} | error: {} |\n", c.model, c.label, s,
                     (mesh.ok() ? pred.error() : mesh.error()).message);
          continue;
        }
        auto prop = cost::stage_plan(*g, *mesh, cl, *spec);
        if (!prop.ok()) {
          fmt::print("| {} | {} | {} | plan: {} |\n", c.model, c.label, s, prop.error().message);
          continue;
        }
        auto m = measure(*g, *prop, runs, train);
        if (!m.ok()) {
          fmt::print("| {} | {} | {} | run: {} |\n", c.model, c.label, s, m.error().message);
          continue;
        }
        double err = (pred->step_time_s - m->median_s) / m->median_s;
        double cpu_err = (pred->step_time_s - m->cpu_min_s) / m->cpu_min_s;
        errors.push_back(std::abs(err));
        cpu_errors.push_back(std::abs(cpu_err));
        fmt::print(
            "| {} | {} | {} | {:.4g} | {:.4g} | {:.4g} | {:.4g} | {:.4g} | {:+.0f}% | {:+.0f}% |\n",
            c.model, c.label, s, pred->step_time_s, m->median_s, m->min_s, m->cpu_per_device_s,
            m->cpu_min_s, 100 * err, 100 * cpu_err);
        if (show_breakdown) {
          auto [kp, km] = device0_kernels(*g, *prop, cl.device);
          fmt::print("| | | device 0's kernels alone | {:.4g} | | | | {:.4g} | | {:+.0f}% |\n", kp,
                     km, km > 0 ? 100 * (kp - km) / km : 0.0);
        }
        std::fflush(stdout);
      }
      if (show_breakdown) {
        fmt::print("\n{} {} on one device, per op kind:\n\n", c.model,
                   train ? "training" : "forward");
        breakdown(*g, cluster->device);
      }
    }
    if (!errors.empty())
      fmt::print(
          "\nmedian absolute error ({}): {:.0f}% against the median wall time, {:.0f}% against "
          "the least CPU time per device, over {} cases\n\n",
          train ? "training" : "forward", 100 * median(errors), 100 * median(cpu_errors),
          errors.size());
    all_errors.insert(all_errors.end(), errors.begin(), errors.end());
    all_cpu_errors.insert(all_cpu_errors.end(), cpu_errors.begin(), cpu_errors.end());
  }
  std::ifstream load("/proc/loadavg");
  std::string l1;
  load >> l1;
  fmt::print(
      "median absolute error (all): {:.0f}% against the median wall time, {:.0f}% against the "
      "least CPU time per device, over {} cases; load average {} at the end\n",
      100 * median(all_errors), 100 * median(all_cpu_errors), all_errors.size(), l1);
  return 0;
}
