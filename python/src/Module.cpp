// heddle._heddle: the C++ half of `import heddle`. It parses Python arguments, calls heddle's
// libraries and hands back values; heddle/__init__.py wraps them in the documented API.
#include <cstdio>

#include "Bindings.h"

PYBIND11_MODULE(_heddle, m) {
  namespace py = pybind11;
  using namespace heddle::python;
  m.doc() = "heddle's C++ core; use the `heddle` package";
  static py::exception<UserError> error(m, "Error", PyExc_Exception);
  static py::exception<std::exception> internal(m, "InternalError", PyExc_Exception);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
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
}
