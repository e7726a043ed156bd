// heddle.Cluster, heddle.plan and heddle.simulate: the search and the simulator, with the CLI's
// JSON keys, the exports and the trace.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "Bindings.h"
#include "heddle/cost/Simulator.h"
#include "heddle/driver/PlanModel.h"
#include "heddle/driver/SimulateModel.h"
#include "heddle/export/Export.h"
#include "heddle/export/PlanTarget.h"
#include "heddle/export/RankGroups.h"
#include "heddle/model/LoadModel.h"
#include "heddle/search/ConfigSearch.h"
#include "heddle/search/PlanReport.h"
#include "heddle/support/ByteSize.h"

namespace heddle::python {

namespace {

/// A priced plan: what `heddle plan --json` / `heddle simulate --json` print, and what is needed
/// to export and trace it.
struct PyPlan {
  std::string json;  ///< the attributes, as one JSON object
  model::ScalableModel source;
  cost::Cluster cluster;  ///< with the plan's device count and the memory limit it was priced at
  search::ConfigResult result;
  bool train = false;
  exporting::ExportPlan export_plan;
};

// A size as a number of bytes or the CLI's text (80GiB, 16GB, 1e10), parsed as the CLI does.
double bytes_arg(const py::object& v, const std::string& what) {
  if (py::isinstance<py::str>(v)) return unwrap(heddle::parse_bytes(v.cast<std::string>(), what));
  return v.cast<double>();
}

// Each stage's peak memory (for Plan.plot) and the micro-batch count, beside the CLI's keys.
void add_stage_memory(nlohmann::json& j, const search::ConfigResult& c) {
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& s : c.sim.stages) memory.push_back(s.peak_memory_bytes);
  j["stage_memory_bytes"] = memory;
  j["micro_batches"] = c.sim.micro_batches;
}

// The cluster a plan was priced on: its device count is the plan's.
cost::Cluster priced_cluster(cost::Cluster cluster, const search::ConfigResult& best) {
  cluster.count = best.sim.devices;
  return cluster;
}

// A size given as a number of bytes or as the CLI's text, as the CLI's flag takes it.
std::string size_text(const py::object& v) {
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  double d = v.cast<double>();
  return d == 0 ? "0" : fmt::format("{}", d);
}

exporting::Target target_of(const std::string& text) {
  return unwrap(exporting::parse_target(text));
}

}  // namespace

void bind_plan(py::module_& m) {
  py::class_<cost::Cluster>(m, "Cluster")
      .def(py::init([](const std::string& spec) { return unwrap(cost::resolve_cluster(spec)); }))
      .def_static("from_json",
                  [](const std::string& text, const std::string& name) {
                    return unwrap(cost::cluster_from_json(text, name));
                  })
      .def_readonly("name", &cost::Cluster::name)
      .def_readonly("count", &cost::Cluster::count)
      .def_readonly("devices_per_node", &cost::Cluster::devices_per_node)
      .def_readonly("source", &cost::Cluster::source)
      .def_property_readonly("device", [](const cost::Cluster& c) { return c.device.name; })
      .def_property_readonly("memory_bytes",
                             [](const cost::Cluster& c) { return c.device.memory_bytes; });

  py::class_<PyPlan>(m, "PlanResult")
      .def_readonly("json", &PyPlan::json)
      .def("export",
           [](const PyPlan& p, const std::string& format) {
             auto t = target_of(format);
             auto e = unwrap(exporting::export_plan(t, p.export_plan));
             return py::make_tuple(e.text, e.file_name, e.notes);
           })
      .def("trace_json", [](const PyPlan& p) {
        return interruptible([&p] {
          cost::SimulateOptions so;
          if (p.result.stage_planner != "tactics")
            so = search::intra_op_simulate_options(p.source, p.cluster, p.train, 60, nullptr);
          so.train = p.train;
          so.trace = true;
          return unwrap(cost::simulate(p.source, p.cluster, p.result.spec, so)).trace_json;
        });
      });

  m.def("plan", [](const PyModel& model, const cost::Cluster& cluster_in, bool train, int64_t batch,
                   const py::object& memory, const std::string& strategy,
                   const std::string& objective, double time_limit, int64_t max_devices,
                   double target_step_time, const std::string& target_text,
                   const py::object& memory_reserve) {
    cost::Cluster cluster = cluster_in;
    if (!memory.is_none()) {
      const double m = bytes_arg(memory, "memory");
      cluster.for_each_device([m](cost::DeviceProfile& d) { d.memory_bytes = m; });
    }
    driver::PlanModelRequest r;
    if (batch > 0) r.model.overrides.batch = batch;
    r.strategy = strategy;
    r.train = train;
    r.time_limit_s = time_limit;
    r.target_step_time_s = target_step_time;
    r.objective = objective;
    r.max_devices = max_devices;
    r.target.target = target_text;
    if (!memory_reserve.is_none()) r.target.memory_reserve = size_text(memory_reserve);
    auto src = model_source(model, batch);
    // The CLI's search and report: `heddle plan --json`'s keys, with the stages' memory.
    auto planned =
        interruptible([&] { return unwrap(driver::plan_resolved(r, cluster, std::move(src))); });
    nlohmann::json j = driver::plan_report_json(planned);
    add_stage_memory(j, planned.found.best);
    j["batch"] = planned.model.batch;
    return PyPlan{.json = j.dump(),
                  .source = planned.model,
                  .cluster = priced_cluster(planned.cluster, planned.found.best),
                  .result = planned.found.best,
                  .train = train,
                  .export_plan = planned.best_export};
  });

  m.def("simulate",
        [](const PyModel& model, const cost::Cluster& cluster_in, const std::string& strategy,
           bool train, int64_t batch, const py::object& memory, bool overlap) {
          cost::Cluster cluster = cluster_in;
          if (!memory.is_none()) {
            const double m = bytes_arg(memory, "memory");
            cluster.for_each_device([m](cost::DeviceProfile& d) { d.memory_bytes = m; });
          }
          driver::SimulateModelRequest r;
          r.strategy = strategy;
          r.train = train;
          r.overlap = overlap;
          // The CLI's simulation and report: `heddle simulate --json`'s keys, with the stages'
          // memory.
          auto s = interruptible([&] {
            return unwrap(driver::simulate_resolved(r, cluster, model_source(model, batch)));
          });
          nlohmann::json j = driver::simulate_report_json(s);
          add_stage_memory(j, s.priced);
          return PyPlan{.json = j.dump(),
                        .source = s.model,
                        .cluster = priced_cluster(cluster, s.priced),
                        .result = s.priced,
                        .train = train,
                        .export_plan = s.export_plan};
        });
}

}  // namespace heddle::python
