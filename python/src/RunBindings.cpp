// heddle.run: a model partitioned over thread-devices, as `heddle run` does it (the same planning,
// lowering, session, parameters and reference check), with numpy inputs and outputs.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "Bindings.h"
#include "Command.h"
#include "PipelineRun.h"
#include "Planning.h"
#include "RunCommand.h"
#include "RunReport.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/Session.h"

namespace heddle::python {

namespace {

// The model `heddle run` would load for `o`: files and zoo names through the CLI's loader, an
// in-memory ONNX model as imported.
model::LoadedModel runnable(const PyModel& m, cli::RunOptions& o) {
  if (!m.request.source.empty()) {
    o.model = m.request.source;
    o.overrides = m.request.overrides;
    o.dims = m.request.dims;
    return unwrap(cli::load_runnable(o));
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
                  bool check, const std::string& backend, uint64_t seed) {
    if (backend != "threads")
      raise(Diagnostic("backend '" + backend +
                       "': Python runs on thread-devices; run MPI ranks with `mpirun heddle run "
                       "--backend mpi`"));
    cli::RunOptions o;
    o.mesh = mesh;
    o.strategy = strategy;
    o.train = train;
    o.steps = steps;
    o.check = check;
    o.seed = seed;
    unwrap(cli::check_run_options(o));
    model::LoadedModel loaded = runnable(model, o);
    if (auto diags = verify(loaded.graph); !diags.empty()) raise(diags.front());
    Graph g = std::move(loaded.graph);
    auto spec = unwrap(cli::requested_strategy(o.mesh, o.strategy));
    std::optional<heddle::PipelinePlan> pipe = unwrap(cli::pipeline_if_asked(o, g, spec));
    std::vector<ParamUpdate> updates;
    const size_t outputs = g.outputs().size();
    if (o.train) {
      updates = unwrap(cli::make_train_step(o, g));
      if (o.check)
        for (const auto& u : updates) g.add_output(u.grad);
    }
    std::optional<cli::PlannedRun> planned;
    std::vector<DeviceProgram> programs;
    if (!pipe) {
      planned = unwrap(cli::plan_run(g, o.mesh, spec));
      programs = unwrap(lower(g, planned->propagation.plan));
    }
    const Mesh run_mesh = pipe ? pipe->mesh : planned->mesh;
    const std::string run_strategy = pipe ? pipe->spec.to_string() : planned->spec.to_string();
    Session session = pipe ? Session(g, updates, std::move(pipe->program))
                           : Session(g, updates, std::move(programs));
    std::vector<Tensor> given;
    if (inputs) {
      if (inputs->size() != g.inputs().size())
        raise(Diagnostic("inputs has " + std::to_string(inputs->size()) +
                         " array(s), but the model has " + std::to_string(g.inputs().size()) +
                         " input(s)"));
      for (size_t i = 0; i < inputs->size(); ++i)
        given.push_back(
            tensor_from((*inputs)[i], g.type(g.inputs()[i]), g.value(g.inputs()[i]).name));
    } else {
      given = random_inputs(g, o.seed + 1, heddle::integer_range(g));
    }
    TensorMap feeds;
    for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], given[i]);
    for (ValueId p : g.params()) {
      auto w = loaded.weights.find(p);
      feeds.emplace(p, w != loaded.weights.end() ? w->second
                                                 : init_param(g.value(p).name, g.type(p), o.seed));
    }
    std::optional<ReferenceCheck> reference;
    if (o.check) reference.emplace(cli::make_reference(g, o, updates, feeds, given));
    StepLoopOptions loop;
    loop.steps = cli::run_steps_of(o);
    loop.train = o.train;
    loop.reference = reference ? &*reference : nullptr;
    RunResult ran = interruptible([&] { return unwrap(session.run(std::move(feeds), loop)); });
    py::dict r;
    py::list outs;
    for (size_t i = 0; i < outputs && i < g.outputs().size(); ++i) {
      auto it = ran.outputs.find(g.outputs()[i]);
      if (it != ran.outputs.end()) outs.append(numpy_of(std::move(it->second)));
    }
    r["outputs"] = outs;
    r["ok"] = !reference || reference->errors().ok;
    r["devices"] = run_mesh.num_devices();
    r["mesh"] = run_mesh.to_string();
    r["strategy"] = run_strategy;
    r["wall_time_s"] = ran.wall_time_s();
    r["step_times_s"] = ran.step_times_s;
    r["median_step_s"] = ran.median_step_s();
    r["peak_bytes_per_device"] = session.peak_bytes_per_device();
    if (o.train) r["loss"] = ran.losses;
    if (reference) {
      r["max_abs_error"] = reference->errors().max_abs;
      r["max_rel_error"] = reference->errors().max_rel;
      r["reference_time_s"] = reference->errors().reference_time_s;
    }
    return r;
  });
}

}  // namespace heddle::python
