#include "heddle/runtime/Executor.h"

#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/ThreadedRunner.h"

namespace heddle {

Result<TensorMap> run_device(const Graph& g, const DeviceProgram& program, Communicator& comm,
                             const TensorMap& feeds, const ExecOptions& options) {
  DeviceExecutor x(g, program);
  Status st = x.run(comm, feeds, options, options.threads > 0 ? options.threads : 1);
  if (!st.ok()) return st.error();
  TensorMap out;
  x.copy_outputs(out);
  return out;
}

Result<TensorMap> run_threaded(const Graph& g, const std::vector<DeviceProgram>& programs,
                               const TensorMap& feeds, const ExecOptions& options) {
  return ThreadedRunner(g, programs).run(feeds, options);
}

Result<TensorMap> run_threaded(const Graph& g, const ProgramTemplate& programs,
                               const TensorMap& feeds, const ExecOptions& options) {
  return ThreadedRunner(g, programs).run(feeds, options);
}

}  // namespace heddle
