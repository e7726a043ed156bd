// `heddle run --backend mpi`: every process (one per device, started by mpirun or srun) checks the
// flags and loads the model, then runs the driver's rank (heddle/driver/RunMpi.h); rank 0 writes
// --output and reports. Every rank reports its own errors, prefixed with its rank and host
// (support/Log.h).
#include "Command.h"
#include "RunCommand.h"
#include "heddle/driver/RunMpi.h"
#include "heddle/frontend/Npy.h"

namespace heddle::cli {

int run_mpi(const RunOptions& o) {
  const driver::RunArguments& a = o.args;
  Result<model::LoadedModel> loaded = Diagnostic("");
  if (auto st = driver::check_run_arguments(a); !st.ok())
    loaded = st.error();
  else
    loaded = driver::load_runnable(a);
  driver::MpiRunHooks hooks;
  hooks.report = report_failure;
  hooks.arguments = driver::launch_arguments(a);
  if (!a.input_files.empty() || !a.labels_file.empty())  // else random inputs
    hooks.inputs = [&](const Graph& g) { return read_input_files(g, o); };
  hooks.output = !a.output_file.empty();
  hooks.timeout_s = a.timeout_s;
  hooks.on_step = [&](int s, std::optional<float> loss) { print_step(o, s, loss, true); };
  driver::MpiRun ran = driver::run_mpi(driver::run_request(a), std::move(loaded), hooks);
  if (ran.exit_code != 0 || !ran.summary) return ran.exit_code;
  if (ran.output)
    if (auto w = write_npy(a.output_file, *ran.output); !w.ok()) return user_error(w.error());
  return report_run(o, *ran.summary);
}

}  // namespace heddle::cli
