// Shared pieces of the heddle._heddle extension: errors as Python exceptions, long C++ work run
// with the GIL released and Ctrl-C turned into heddle's cancellation, and the loaded model.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "heddle/cost/Simulator.h"
#include "heddle/model/LoadModel.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/Result.h"

namespace heddle::python {

namespace py = pybind11;

/// A user's mistake or an infeasible request: heddle.Error, with the CLI's message.
struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws UserError for `d`, as `error: ...` is printed by the CLI (without the prefix).
[[noreturn]] inline void raise(const Diagnostic& d) { throw UserError(d.to_string()); }

template <class T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise(r.error());
  return std::move(*r);
}
inline void unwrap(const Status& s) {
  if (!s.ok()) raise(s.error());
}

/// Runs `work` on a worker thread while this thread, without the GIL, checks every 100 ms for
/// Ctrl-C (PyErr_CheckSignals); on one it asks heddle's long work to stop (request_cancel),
/// waits for the worker and raises KeyboardInterrupt. Exceptions of `work` propagate.
template <class F>
auto interruptible(F work) -> decltype(work()) {
  using R = decltype(work());
  clear_cancel();
  std::packaged_task<R()> task(std::move(work));
  auto done = task.get_future();
  std::thread worker(std::move(task));
  bool interrupted = false;
  for (;;) {
    {
      py::gil_scoped_release release;
      if (done.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) break;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;
      request_cancel(CancelReason::kInterrupt);
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  clear_cancel();
  if (interrupted) throw py::error_already_set();
  return done.get();
}

/// A model as `heddle.load` or `heddle.from_torch` made it.
struct PyModel {
  model::ModelRequest request;  ///< zoo name or file (source empty for in-memory ONNX)
  std::string onnx_bytes;       ///< from_torch: the exported model
  std::string name;
  model::LoadedModel loaded;  ///< the forward graph (and ONNX weights)
  bool is_zoo = false;
};

/// The simulator's view of `m` with `batch` (> 0: the global batch; zoo models only).
model::ScalableModel model_source(const PyModel& m, int64_t batch);

void bind_model(py::module_& m);
void bind_plan(py::module_& m);
void bind_run(py::module_& m);
void bind_schedule(py::module_& m);

}  // namespace heddle::python
