// heddle._heddle: the C++ half of `import heddle`. It parses Python arguments, calls heddle's
// libraries and hands back values; heddle/__init__.py wraps them in the documented API.
#include <cstdio>

#include "Bindings.h"
#include "heddle/ir/TextParser.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedRunner.h"
#include "heddle/support/Assert.h"

namespace {

// The test hook behind _heddle._debug_assert: a failed HEDDLE_ASSERT on the calling thread
// (devices == 0), or on every device thread of a run over `devices` thread-devices whose feed has
// the wrong dtype (each device's load asserts), through interruptible() as heddle.run calls it.
void debug_assert(int64_t devices) {
  using namespace heddle;
  if (devices <= 0) {
    HEDDLE_ASSERT(devices > 0) << "_debug_assert on the calling thread";
    return;
  }
  python::interruptible([devices] {
    Graph g = *parse_graph(
        "graph hook {\n input %a: f32[8, 8]\n %r: f32[8, 8] = relu [m=8, n=8] %a(m, n) -> (m, "
        "n)\n output %r\n}");
    Mesh mesh = *Mesh::parse("x=" + std::to_string(devices));
    ThreadedRunner runner(g, *lower(g, ShardingPlan::replicated(g, mesh)));
    TensorMap feeds;
    feeds.emplace(g.inputs()[0], Tensor(TensorType(DType::kI64, IVec({8, 8}))));
    return runner.run(feeds).ok();
  });
}

}  // namespace

PYBIND11_MODULE(_heddle, m) {
  namespace py = pybind11;
  using namespace heddle::python;
  m.doc() = "heddle's C++ core; use the `heddle` package";
  static py::exception<UserError> error(m, "Error", PyExc_Exception);
  static py::exception<std::exception> internal(m, "InternalError", PyExc_Exception);
  // A broken invariant raises heddle.InternalError instead of aborting the interpreter; asserts
  // on the runtime's device threads reach the calling thread (ThreadedRunner, PipelineRunner).
  heddle::set_assert_handler(heddle::throw_on_assert);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const heddle::InternalError& e) {
      internal(e.what());
    } catch (const UserError& e) {
      error(e.what());
    } catch (const py::error_already_set&) {
      throw;
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::exception& e) {
      internal(e.what());
    }
  });
  bind_model(m);
  bind_plan(m);
  bind_run(m);
  bind_schedule(m);
  m.def("_debug_assert", &debug_assert, py::arg("devices") = 0,
        "Test hook, not API: fails an internal assert on the calling thread (devices=0) or on the "
        "device threads of a run over `devices` thread-devices; raises heddle.InternalError.");
}
