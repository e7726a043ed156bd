#include "RunReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "heddle/support/Strings.h"

namespace heddle::cli {

ReferenceCheck make_reference(const Graph& g, const RunOptions& o,
                              const std::vector<ParamUpdate>& updates, TensorMap params,
                              std::vector<Tensor> inputs) {
  return ReferenceCheck(g, updates, std::move(params), std::move(inputs),
                        driver::check_options(run_request(o)));
}

namespace {

// The split report's JSON keys: `idle_axes` (names) and `unsplit_ops`, one entry per op and axis.
void split_json(const Graph& g, const RunSummary& s, nlohmann::json& j) {
  j["idle_axes"] = nlohmann::json::array();
  for (int64_t a : s.split.idle_axes) j["idle_axes"].push_back(s.mesh.axis(a).name);
  nlohmann::json ops = nlohmann::json::array();
  for (const UnsplitOp& u : s.split.unsplit) {
    const Op& op = g.op(u.op);
    nlohmann::json dims = nlohmann::json::array();
    for (const DimVerdict& d : u.dims)
      dims.push_back({{"dim", op.space.dim(d.dim).name},
                      {"reason", std::string(no_split_name(d.reason))},
                      {"detail", d.detail}});
    ops.push_back({{"op", std::string(op_kind_name(op.kind))},
                   {"result", g.value(op.results[0].value).name},
                   {"axis", s.mesh.axis(u.axis).name},
                   {"dims", dims}});
  }
  j["unsplit_ops"] = ops;
}

// `text`'s lines after the first indented to the report's value column.
std::string indent_after_first(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += "           ";
  }
  return out;
}

}  // namespace

int report_run(const RunOptions& o, const Graph& g, const RunSummary& s) {
  const CheckErrors* c = s.check;
  if (o.json) {
    nlohmann::json j = {{"ok", c == nullptr || c->ok},
                        {"devices", s.mesh.num_devices()},
                        {"mesh", s.mesh.to_string()},
                        {"strategy", s.strategy},
                        {"wall_time_s", s.result.wall_time_s()},
                        {"collectives", s.stats.collectives},
                        {"reshards", s.reshards},
                        {"backend", o.backend},
                        {"output_digest", s.digest}};
    if (s.stages > 0) {
      j["pipeline"] = {
          {"stages", s.stages}, {"micro_batches", s.micro_batches}, {"schedule", s.schedule}};
      if (!s.recompute.empty()) {
        j["pipeline"]["recompute"] = s.recompute;
        j["pipeline"]["recompute_kernel_calls"] = s.counts.recompute_calls;
        j["pipeline"]["kernel_calls"] = s.counts.kernel_calls;
      }
    }
    if (s.feed_bytes) {
      j["rank_feed_bytes_max"] = s.feed_bytes->first;
      j["model_feed_bytes"] = s.feed_bytes->second;
    }
    if (c) {
      j["max_abs_error"] = c->max_abs;
      j["max_rel_error"] = c->max_rel;
      j["reference_time_s"] = c->reference_time_s;
      j["adamw_elements_compared_by_gradient"] = c->adamw_skipped;
    }
    if (o.train) j["loss"] = s.result.losses;
    if (!s.params_digest.empty()) j["params_digest"] = s.params_digest;
    j["step_times_s"] = s.result.step_times_s;
    j["median_step_s"] = s.result.median_step_s();
    if (!s.peak_bytes_per_device.empty()) j["peak_bytes_per_device"] = s.peak_bytes_per_device;
    if (s.stages == 0) split_json(g, s, j);
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops{})\n", g.name(), g.num_ops(),
               o.train ? ", training step: forward, loss, backward, " + o.optimizer : "");
    fmt::print("plan       {}\n", s.note);
    fmt::print("devices    {}\n", s.devices_text);
    fmt::print(
        "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
        "fetches over all devices\n",
        s.stats.kernels, s.stats.fused, s.stats.collectives, s.stats.fetches);
    if (s.reshards > 0)
      fmt::print(
          "reshards   {} inserted by propagation (heddle show MODEL --mesh ... --strategy "
          "... lists them)\n",
          s.reshards);
    if (const std::string u = s.split.to_string(g, s.mesh, 4); !u.empty())
      fmt::print("not split  {}", indent_after_first(u));
    if (s.feed_bytes)
      fmt::print("shards     the largest rank holds {} of the {} bytes of parameters and inputs\n",
                 s.feed_bytes->first, s.feed_bytes->second);
    const size_t steps = s.result.step_times_s.size();
    fmt::print("wall time  {:.4f} s{}\n", s.result.wall_time_s(),
               o.train || steps > 1
                   ? fmt::format(" for {} steps (median {:.4f} s)", steps, s.result.median_step_s())
                   : "");
    if (!s.peak_bytes_per_device.empty())
      fmt::print("memory     largest device peak {} of live tiles\n",
                 human_bytes(static_cast<double>(*std::max_element(
                     s.peak_bytes_per_device.begin(), s.peak_bytes_per_device.end()))));
    if (c) {
      fmt::print("reference  {:.4f} s (single-device interpreter)\n", c->reference_time_s);
      fmt::print("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n", c->max_abs,
                 c->max_rel, o.atol, o.rtol);
      if (c->adamw_skipped > 0)
        fmt::print(
            "           {} AdamW-updated weights with gradients near zero (below 1e-5 or 1e-3 of "
            "their tensor's largest) were compared through their gradients only\n",
            c->adamw_skipped);
      fmt::print("check      {}\n", c->ok ? std::string("ok: every output") +
                                                (o.train ? " and updated parameter" : "") +
                                                " matches the reference"
                                          : std::string("MISMATCH"));
    }
  }
  if (c && !c->ok)
    return report_failure(Diagnostic(fmt::format(
                              "outputs differ from the reference beyond tolerance (max abs {:.3g}, "
                              "max rel {:.3g})",
                              c->max_abs, c->max_rel)),
                          FailureKind::kCheckMismatch);
  return 0;
}

}  // namespace heddle::cli
