// `heddle calibrate`: measures this machine and writes the JSON profile `--cluster cpu` uses.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
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
  const cost::CpuCalibration cal =
      cost::calibrate_cpu(a.quick ? cost::quick_calibrate_options() : cost::CalibrateOptions{});
  if (auto st = write_file_atomic(path, cost::cluster_to_json(cal.cluster)); !st.ok())
    return user_error(st.error());
  fmt::print("{}wrote {}\n", cost::to_string(cal), path);
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
