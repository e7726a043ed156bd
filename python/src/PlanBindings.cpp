// heddle.Cluster, heddle.plan and heddle.simulate: the search and the simulator, with the CLI's
// JSON keys, the exports and the trace.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "Bindings.h"
#include "heddle/cost/Simulator.h"
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

// The CLI's keys, and each stage's peak memory (for Plan.plot).
nlohmann::json result_json(const search::ConfigResult& c) {
  nlohmann::json j = search::plan_json(c);
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& s : c.sim.stages) memory.push_back(s.peak_memory_bytes);
  j["stage_memory_bytes"] = memory;
  j["micro_batches"] = c.sim.micro_batches;
  return j;
}

PyPlan finish(nlohmann::json j, const model::ScalableModel& src, const cost::Cluster& cluster,
              const search::ConfigResult& best, bool train, const exporting::PlanTarget& target) {
  PyPlan p;
  p.source = src;
  p.cluster = cluster;
  p.cluster.count = best.sim.devices;
  p.result = best;
  p.train = train;
  p.export_plan = exporting::export_plan_of(src, cluster, best, train);
  j["batch"] = src.batch;
  exporting::add_target_json(j, target, p.export_plan);
  p.json = j.dump();
  return p;
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
    auto src = model_source(model, batch);
    search::ConfigSearchOptions o;
    o.train = train;
    o.pins = unwrap(StrategySpec::parse(strategy));
    o.time_limit_s = time_limit;
    o.max_devices = max_devices;
    o.target_step_time_s = target_step_time;
    if (objective == "energy")
      o.objective = search::Objective::kEnergy;
    else if (objective != "time")
      raise(Diagnostic("objective '" + objective + "' is not an objective; use time or energy"));
    exporting::TargetFlags flags;
    flags.target = target_text;
    if (!memory_reserve.is_none()) flags.memory_reserve = size_text(memory_reserve);
    const exporting::PlanTarget target = unwrap(exporting::apply_target_flags(flags, cluster, o));
    auto found = interruptible([&] { return unwrap(search::search_configs(src, cluster, o)); });
    nlohmann::json j = result_json(found.best);
    j["search_time_s"] = found.search_time_s;
    j["evaluated"] = found.evaluated;
    j["proven_best"] = found.complete && found.ilp.optimal;
    j["objective"] = objective;
    nlohmann::json ranking = nlohmann::json::array();
    for (const auto& c : found.ranking) ranking.push_back(result_json(c));
    j["ranking"] = ranking;
    return finish(j, src, cluster, found.best, train, target);
  });

  m.def("simulate",
        [](const PyModel& model, const cost::Cluster& cluster_in, const std::string& strategy,
           bool train, int64_t batch, const py::object& memory, bool overlap) {
          cost::Cluster cluster = cluster_in;
          if (!memory.is_none()) {
            const double m = bytes_arg(memory, "memory");
            cluster.for_each_device([m](cost::DeviceProfile& d) { d.memory_bytes = m; });
          }
          auto src = model_source(model, batch);
          search::ConfigResult c;
          c.spec = unwrap(StrategySpec::parse(strategy));
          cost::SimulateOptions so;
          so.train = train;
          so.overlap = overlap;
          c.sim = interruptible([&] { return unwrap(cost::simulate(src, cluster, c.spec, so)); });
          return finish(result_json(c), src, cluster, c, train, exporting::PlanTarget{});
        });
}

}  // namespace heddle::python
