// `heddle calibrate`: measures this machine and writes the JSON profile `--cluster cpu` uses.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "Command.h"
#include "heddle/cost/Calibrate.h"
#include "heddle/support/AtomicFile.h"

namespace heddle::cli {

namespace {

struct CalibrateArgs {
  std::string out;
  bool quick = false;
};

int run_calibrate(const CalibrateArgs& a) {
  std::string path = a.out.empty() ? cost::cpu_profile_path() : a.out;
  // Check the profile's location before measuring: an unwritable path fails at once, not after
  // the run. Only the default location's directories are created.
  auto parent = std::filesystem::path(path).parent_path().string();
  if (a.out.empty() && !parent.empty())
    if (auto st = make_dirs(parent); !st.ok()) return user_error(st.error());
  if (auto st = check_writable_file(path, "--out"); !st.ok()) return user_error(st.error());
  std::fprintf(stderr,
               "calibrating (GEMM, memory bandwidth, kernel rates per op kind, threaded "
               "all-reduce)...\n");
  cost::CalibrateOptions co;
  if (a.quick) {
    co.gemm_sizes = {32, 64, 128, 256};
    co.min_seconds = 0.01;
    co.kernel_rate_models = {"gpt-tiny"};
  }
  cost::CpuCalibration cal = cost::calibrate_cpu(co);
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
  if (auto st = write_file_atomic(path, cost::cluster_to_json(cal.cluster)); !st.ok())
    return user_error(st.error());
  out += fmt::format("wrote {}\n", path);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& root) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* app = root.add_subcommand(
      "calibrate",
      "Measure this machine (GEMM throughput, memory bandwidth, threaded all-reduce) and write "
      "the profile `--cluster cpu` uses.");
  app->add_option(
      "--out", args->out,
      "Profile path (default $HEDDLE_CPU_PROFILE or ~/.config/heddle/cpu-profile.json)");
  app->add_flag("--quick", args->quick,
                "A rough profile in a fraction of the time: fewer GEMM sizes, shorter timings, "
                "kernel rates from one model (for tests)");
  return {app, [args] { return run_calibrate(*args); }};
}

}  // namespace heddle::cli
