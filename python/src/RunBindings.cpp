// heddle.run: a model partitioned over thread-devices through the driver `heddle run` calls
// (heddle/driver/RunRequest.h: planning, lowering, session, feeds, reference check), with numpy
// inputs and outputs.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "Bindings.h"
#include "heddle/driver/RunArguments.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/ir/Verifier.h"

namespace heddle::python {

namespace {

// The model `heddle run` would load for `o`: files and zoo names through the driver's loader, an
// in-memory ONNX model as imported.
model::LoadedModel runnable(const PyModel& m, driver::RunArguments& o) {
  if (!m.request.source.empty()) {
    o.model = m.request.source;
    o.overrides = m.request.overrides;
    o.dims = m.request.dims;
    return unwrap(driver::load_runnable(o));
  }
  o.model = m.name;
  if (o.train)
    raise(Diagnostic(SourceLoc{m.name, 0, 0},
                     "train=True applies to zoo and text-IR models; an imported ONNX model has "
                     "no loss"));
  if (!m.loaded.missing_weights.empty())
    raise(Diagnostic(SourceLoc{m.name, 0, 0},
                     "weights are missing for " + std::to_string(m.loaded.missing_weights.size()) +
                         " parameter(s) (first: '" + m.loaded.missing_weights[0] + "')"));
  return m.loaded;
}

// `arr` as an input of type `want` (float32 or int64 storage); errors name the input.
Tensor tensor_from(const py::array& arr, const TensorType& want, const std::string& name) {
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  IVec expect = want.shape();
  if (shape != std::vector<int64_t>(expect.begin(), expect.end()))
    raise(Diagnostic("input '" + name + "' is " + want.to_string() + ", but the array has shape " +
                     IVec(shape).to_string()));
  Tensor t(want);
  if (t.is_int()) {
    auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
    if (!a) raise(Diagnostic("input '" + name + "' needs integers"));
    std::copy(a.data(), a.data() + t.numel(), t.i64());
  } else {
    auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(arr);
    if (!a) raise(Diagnostic("input '" + name + "' needs floating-point values"));
    std::copy(a.data(), a.data() + t.numel(), t.f32());
  }
  return t;
}

// A numpy array over `t`'s storage: the capsule owns the tensor, nothing is copied.
py::array numpy_of(Tensor&& t) {
  auto* owned = new Tensor(std::move(t));
  py::capsule keep(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  if (owned->is_int()) return py::array_t<int64_t>(shape, owned->i64(), keep);
  return py::array_t<float>(shape, owned->f32(), keep);
}

}  // namespace

void bind_run(py::module_& m) {
  m.def("run", [](const PyModel& model, const std::string& mesh, const std::string& strategy,
                  const std::optional<std::vector<py::array>>& inputs, bool train, int steps,
                  bool check, const std::string& backend, uint64_t seed, double lr,
                  const std::string& optimizer, bool ring_overlap, double rtol, double atol,
                  const std::string& host_memory, bool profile) {
    if (backend != "threads")
      raise(Diagnostic("backend '" + backend +
                       "': Python runs on thread-devices; run MPI ranks with `mpirun heddle run "
                       "--backend mpi`"));
    driver::RunArguments o;
    o.mesh = mesh;
    o.strategy = strategy;
    o.train = train;
    o.steps = steps;
    o.check = check;
    o.seed = seed;
    o.lr = lr;
    o.optimizer = optimizer;
    o.no_ring_overlap = !ring_overlap;
    o.rtol = rtol;
    o.atol = atol;
    o.host_memory = host_memory;
    o.profile = profile;
    unwrap(driver::check_run_arguments(o));
    model::LoadedModel loaded = runnable(model, o);
    if (auto diags = verify(loaded.graph); !diags.empty()) raise(diags.front());
    const driver::RunRequest request = driver::run_request(o);
    driver::PreparedRun prepared = unwrap(driver::prepare_run(request, std::move(loaded)));
    const Graph& g = prepared.graph;
    driver::ThreadRunHooks hooks;
    hooks.before_feeds = [&](const Graph& graph, const Session& session) {
      return driver::check_run_fits(o, graph, session);
    };
    if (inputs) {  // converted here, with the GIL; the run itself releases it
      if (inputs->size() != g.inputs().size())
        raise(Diagnostic("inputs has " + std::to_string(inputs->size()) +
                         " array(s), but the model has " + std::to_string(g.inputs().size()) +
                         " input(s)"));
      std::vector<Tensor> given;
      for (size_t i = 0; i < inputs->size(); ++i)
        given.push_back(
            tensor_from((*inputs)[i], g.type(g.inputs()[i]), g.value(g.inputs()[i]).name));
      hooks.inputs = [given](const Graph&) -> Result<std::vector<Tensor>> { return given; };
    }
    driver::ThreadRun ran =
        interruptible([&] { return unwrap(driver::run_threads(request, prepared, hooks)); });
    const driver::RunSummary& s = ran.summary;
    const CheckErrors* c = s.check;
    py::dict r;
    py::list outs;
    TensorMap& outputs = ran.summary.result.outputs;  // handed to numpy, not copied
    for (size_t i = 0; i < prepared.model_outputs && i < g.outputs().size(); ++i) {
      auto it = outputs.find(g.outputs()[i]);
      if (it != outputs.end()) outs.append(numpy_of(std::move(it->second)));
    }
    r["outputs"] = outs;
    r["ok"] = !c || c->ok;
    r["devices"] = s.mesh.num_devices();
    r["mesh"] = s.mesh.to_string();
    r["strategy"] = s.strategy;
    r["wall_time_s"] = s.result.wall_time_s();
    r["step_times_s"] = s.result.step_times_s;
    r["median_step_s"] = s.result.median_step_s();
    r["step_cpu_s"] = s.result.step_cpu_s;
    r["median_step_cpu_s"] = s.result.median_step_cpu_s();
    r["peak_bytes_per_device"] = s.peak_bytes_per_device;
    if (!s.held_bytes_per_device.empty()) r["held_bytes_per_device"] = s.held_bytes_per_device;
    if (!s.predicted_peak_bytes_per_device.empty())
      r["predicted_peak_bytes_per_device"] = s.predicted_peak_bytes_per_device;
    if (o.train) r["loss"] = s.result.losses;
    if (profile) {  // as the CLI's JSON `profile`: device 0's timed step by kernel
      py::list rows;
      for (const ProfileRow& row : s.profile) {
        py::dict d;
        d["kernel"] = row.label;
        d["calls"] = row.calls;
        d["seconds"] = row.seconds;
        d["share"] = row.share;
        rows.append(d);
      }
      r["profile"] = rows;
    }
    if (c) {
      r["max_abs_error"] = c->max_abs;
      r["max_rel_error"] = c->max_rel;
      r["reference_time_s"] = c->reference_time_s;
    }
    return r;
  });
}

}  // namespace heddle::python
