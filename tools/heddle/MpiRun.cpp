// `heddle run --backend mpi`: every process (one per device, started by mpirun or srun) checks the
// flags and loads the model, then runs the driver's rank (heddle/driver/RunMpi.h); rank 0 writes
// --output and reports. Every rank reports its own errors, prefixed with its rank and host
// (support/Log.h).
#include <fmt/format.h>

#include <filesystem>

#include "Command.h"
#include "RunCommand.h"
#include "RunReport.h"
#include "heddle/driver/RunMpi.h"
#include "heddle/frontend/Npy.h"

namespace heddle::cli {

namespace {

// The arguments that change what a run computes, in one canonical line (not paths: a model or
// input file may sit at another path on another host; their bytes are compared instead).
std::string arguments_text(const RunOptions& o) {
  std::error_code ec;
  const bool model_is_file = std::filesystem::is_regular_file(o.model, ec);
  std::string s = fmt::format(
      "model={} mesh={} strategy={} train={} steps={} lr={} optimizer={} seed={} check={} rtol={} "
      "atol={} inputs={} output={} emit={}",
      model_is_file ? "<file>" : o.model, o.mesh, o.strategy, o.train,
      driver::steps_of(run_request(o)), o.lr, o.optimizer, o.seed, o.check, o.rtol, o.atol,
      o.input_files.size(), !o.output_file.empty(), !o.emit_dir.empty());
  s += fmt::format(" layers={} hidden={} heads={} seq={} vocab={} batch={}",
                   o.overrides.layers.value_or(-1), o.overrides.hidden.value_or(-1),
                   o.overrides.heads.value_or(-1), o.overrides.seq.value_or(-1),
                   o.overrides.vocab.value_or(-1), o.overrides.batch.value_or(-1));
  for (const auto& [k, v] : o.dims) s += fmt::format(" dim.{}={}", k, v);
  return s;
}

}  // namespace

int run_mpi(const RunOptions& o) {
  Result<model::LoadedModel> loaded = Diagnostic("");
  if (auto st = check_run_options(o); !st.ok())
    loaded = st.error();
  else if (!(o.timeout_s > 0))
    loaded = Diagnostic("--timeout must be a positive number of seconds");
  else
    loaded = load_runnable(o);
  driver::MpiRunHooks hooks;
  hooks.report = report_failure;
  hooks.arguments = arguments_text(o);
  if (!o.input_files.empty() || !o.labels_file.empty())  // else random inputs
    hooks.inputs = [&](const Graph& g) { return read_input_files(g, o); };
  hooks.output = !o.output_file.empty();
  hooks.timeout_s = o.timeout_s;
  hooks.on_step = [&](int s, std::optional<float> loss) { print_step(o, s, loss, true); };
  driver::MpiRun ran = driver::run_mpi(run_request(o), std::move(loaded), hooks);
  if (ran.exit_code != 0 || !ran.summary) return ran.exit_code;
  if (ran.output)
    if (auto w = write_npy(o.output_file, *ran.output); !w.ok()) return user_error(w.error());
  return report_run(o, *ran.summary);
}

}  // namespace heddle::cli
