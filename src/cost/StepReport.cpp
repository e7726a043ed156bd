#include "heddle/cost/StepReport.h"

#include <fmt/format.h>

#include <algorithm>

#include "heddle/support/Strings.h"

namespace heddle::cost {

namespace {

// 3.1M, 12.3k, 512.
std::string count_text(double n) {
  if (n >= 1e9) return fmt::format("{:.3g}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.3g}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.3g}k", n / 1e3);
  return fmt::format("{:.4g}", n);
}

double tokens_per_step(const SimulationResult& r, const model::ScalableModel& src) {
  (void)r;
  return static_cast<double>(src.batch) * static_cast<double>(std::max<int64_t>(src.seq, 1));
}

}  // namespace

nlohmann::json breakdown_json(const StepBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& e : b.entries()) j[e.key] = e.seconds;
  j["total"] = b.total();
  return j;
}

void add_step_json(nlohmann::json& j, const SimulationResult& r, const model::ScalableModel& src,
                   const std::string& stages_key) {
  j["breakdown"] = breakdown_json(r.breakdown);
  if (j.contains(stages_key) && j[stages_key].is_array() && j[stages_key].size() == r.stages.size())
    for (size_t i = 0; i < r.stages.size(); ++i) {
      const StageResult& st = r.stages[i];
      auto& e = j[stages_key][i];
      e["breakdown"] = breakdown_json(st.breakdown);
      // Where the stage's peak memory goes (docs/cost-model.md, "Memory").
      e["state_bytes"] = st.state_bytes;
      e["buffer_bytes"] = st.buffer_bytes;
      e["activation_bytes"] = st.activation_bytes;
      e["allocator_bytes"] = st.allocator_bytes;
      e["peak_memory_bytes"] = st.peak_memory_bytes;
      e["in_flight"] = st.in_flight;
    }
  j["batch"] = src.batch;
  if (src.seq > 0) j["seq"] = src.seq;
  const double tokens = tokens_per_step(r, src);
  j["tokens_per_step"] = tokens;
  j["tokens_per_s_per_device"] =
      r.step_time_s > 0 ? tokens / r.step_time_s / static_cast<double>(r.devices) : 0.0;
  j["micro_batches"] = r.micro_batches;
  j["micro_batch"] = r.micro_batch;
}

std::string stage_memory_text(const SimulationResult& r) {
  if (r.stages.size() < 2) return "";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::vector<std::string> peaks;
  size_t worst = 0;
  for (size_t i = 0; i < r.stages.size(); ++i) {
    peaks.push_back(fmt::format("{:.1f}", r.stages[i].peak_memory_bytes / kGiB));
    if (r.stages[i].peak_memory_bytes > r.stages[worst].peak_memory_bytes) worst = i;
  }
  const StageResult& w = r.stages[worst];
  std::string buffers =
      w.buffer_bytes > 0 ? fmt::format(", buffers {:.1f}", w.buffer_bytes / kGiB) : "";
  return fmt::format(
      "per stage  {} GiB; worst stage {}: states {:.1f}{}, activations {:.1f} ({} micro-batch "
      "chunks in flight), allocator {:.1f} GiB\n",
      join(peaks, " | "), worst, w.state_bytes / kGiB, buffers, w.activation_bytes / kGiB,
      w.in_flight, w.allocator_bytes / kGiB);
}

std::string breakdown_text(const SimulationResult& r) {
  const double total = r.breakdown.total();
  std::string out =
      fmt::format("breakdown        seconds per device per step (sums to the step time{})\n",
                  r.stages.size() > 1 ? "; mean over stages" : "");
  std::vector<StepBreakdown::Entry> rows;
  for (const auto& e : r.breakdown.entries())
    if (e.seconds > 0) rows.push_back(e);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.overlapped != b.overlapped ? b.overlapped : a.seconds > b.seconds;
  });
  for (const auto& e : rows) {
    if (e.overlapped)
      out += fmt::format("  {:<30} {:>10.4g} s  hidden behind compute\n", e.name, e.seconds);
    else
      out += fmt::format("  {:<30} {:>10.4g} s  {:>5.1f}%\n", e.name, e.seconds,
                         total > 0 ? 100 * e.seconds / total : 0.0);
  }
  // Per stage, runs of stages with the same breakdown on one line.
  for (size_t i = 0; r.stages.size() > 1 && i < r.stages.size();) {
    const std::string text = r.stages[i].breakdown.to_string();
    size_t j = i + 1;
    while (j < r.stages.size() && r.stages[j].breakdown.to_string() == text) ++j;
    std::string which =
        j - i == 1 ? fmt::format("stage {}", i) : fmt::format("stages {}-{}", i, j - 1);
    out += fmt::format("  {:<12} {}\n", which, text);
    i = j;
  }
  return out;
}

std::string workload_text(const SimulationResult& r, const model::ScalableModel& src) {
  const double tokens = tokens_per_step(r, src);
  const double per_device =
      r.step_time_s > 0 ? tokens / r.step_time_s / static_cast<double>(r.devices) : 0.0;
  if (src.seq > 0)
    return fmt::format("batch {} x seq {} = {} tokens per step, {} tokens/s per device", src.batch,
                       src.seq, count_text(tokens), count_text(per_device));
  return fmt::format("batch {} samples per step, {} samples/s per device", src.batch,
                     count_text(per_device));
}

std::string micro_batches_text(const SimulationResult& r) {
  const std::string unit = r.micro_batches == 1 ? "micro-batch" : "micro-batches";
  if (r.heterogeneous) {
    std::vector<std::string> per;
    for (const auto& s : r.stages) per.push_back(std::to_string(s.micro_batch));
    return fmt::format("{} {} of {} sequences per data-parallel replica (by stage)",
                       r.micro_batches, unit, join(per, " | "));
  }
  return fmt::format("{} {} of {} {} per data-parallel replica", r.micro_batches, unit,
                     r.micro_batch, r.micro_batch == 1 ? "sequence" : "sequences");
}

std::vector<std::string> workload_warnings(const model::ScalableModel& src, bool batch_given,
                                           int64_t devices, bool train) {
  std::vector<std::string> out;
  if (!batch_given && src.batch < devices)
    out.push_back(fmt::format(
        "the batch is {} (the model's default) for {} devices: most of them idle or split one "
        "sequence, so step time, MFU and bubble say little about a real {}; give --batch (the "
        "global batch, e.g. the sequences per optimizer step)",
        src.batch, devices, train ? "training run" : "serving load"));
  return out;
}

nlohmann::json simulation_json(const SimulationResult& r, const model::ScalableModel& src) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages)
    stages.push_back({{"layers", s.layers},
                      {"dp", s.dp},
                      {"tp", s.tp},
                      {"devices", s.devices},
                      {"device", s.device},
                      {"micro_batch", s.micro_batch},
                      {"busy_s", s.busy_s},
                      {"idle_s", s.idle_s},
                      {"state_bytes", s.state_bytes},
                      {"activation_bytes", s.activation_bytes},
                      {"peak_memory_bytes", s.peak_memory_bytes},
                      {"parameters", s.parameters}});
  nlohmann::json j = {{"step_time_s", r.step_time_s},
                      {"mfu", r.mfu},
                      {"energy_j", r.energy_j},
                      {"tflops_per_device", r.tflops_per_device},
                      {"model_flops", r.model_flops},
                      {"published_mfu", r.published_mfu},
                      {"published_tflops_per_device", r.published_tflops_per_device},
                      {"published_model_flops", r.published_model_flops},
                      {"peak_memory_bytes", r.peak_memory_bytes},
                      {"memory_limit_bytes", r.memory_limit_bytes},
                      {"host_memory_bytes", r.host_memory_bytes},
                      {"host_memory_limit_bytes", r.host_memory_limit_bytes},
                      {"nvme_bytes", r.nvme_bytes},
                      {"nvme_limit_bytes", r.nvme_limit_bytes},
                      {"bubble_fraction", r.bubble_fraction},
                      {"comm_bytes", r.comm_bytes},
                      {"link_bytes", r.link_bytes},
                      {"strategy", r.strategy},
                      {"stages", stages},
                      {"micro_batches", r.micro_batches},
                      {"devices", r.devices},
                      {"events", r.events},
                      {"feasible", r.feasible},
                      {"cluster_source", r.cluster_source}};
  add_step_json(j, r, src, "stages");
  return j;
}

std::optional<Diagnostic> infeasibility(const SimulationResult& r) {
  if (r.feasible) return std::nullopt;
  if (r.nvme_bytes > r.nvme_limit_bytes && r.peak_memory_bytes <= r.memory_limit_bytes)
    return Diagnostic(fmt::format(
        "the plan's state on NVMe needs {} per device but the cluster gives {}; use more "
        "devices or describe more NVMe (nvme_bytes in a cluster file)",
        human_bytes(r.nvme_bytes), human_bytes(r.nvme_limit_bytes)));
  if (r.peak_memory_bytes <= r.memory_limit_bytes)  // the offloaded state overflows the host
    return Diagnostic(fmt::format(
        "the plan's offloaded state needs {} of host memory per device but the cluster gives {}; "
        "offload less (offload=optimizer), raise zero, or describe more host memory "
        "(host_memory_bytes in a cluster file)",
        human_bytes(r.host_memory_bytes), human_bytes(r.host_memory_limit_bytes)));
  return Diagnostic(fmt::format(
      "the plan needs {} on its fullest device but the device has {}; try a higher zero stage, "
      "recompute=selective or full, a smaller mb, or more tp/pp",
      human_bytes(r.peak_memory_bytes), human_bytes(r.memory_limit_bytes)));
}

namespace {

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

}  // namespace

std::string simulation_text(const SimulationResult& r, const model::ScalableModel& src,
                            const std::string& model, bool train, bool mixed) {
  std::string out;
  out += fmt::format("model            {} ({}, {} devices)\n", model,
                     train ? "training step" : "forward", r.devices);
  out += fmt::format("strategy         {}\n", r.strategy);
  out += fmt::format("workload         {}\n", workload_text(r, src));
  out += fmt::format("micro-batches    {}\n", micro_batches_text(r));
  out += fmt::format("step time        {:.6g} s\n", r.step_time_s);
  out += fmt::format("TFLOP/s/device   {:.1f} (MFU {:.1f}%; published count {:.1f}, {:.1f}%)\n",
                     r.tflops_per_device, 100 * r.mfu, r.published_tflops_per_device,
                     100 * r.published_mfu);
  out += fmt::format("bubble fraction  {:.2f}%\n", 100 * r.bubble_fraction);
  const bool device_fits = r.peak_memory_bytes <= r.memory_limit_bytes;
  out += fmt::format("peak memory      {} of {}{}\n", gib(r.peak_memory_bytes),
                     gib(r.memory_limit_bytes), device_fits ? "" : " (does not fit)");
  if (r.host_memory_bytes > 0)
    out += fmt::format("host memory      {} of {}{}\n", gib(r.host_memory_bytes),
                       gib(r.host_memory_limit_bytes), r.feasible ? "" : " (does not fit)");
  if (r.nvme_bytes > 0)
    out += fmt::format("nvme             {} of {}\n", gib(r.nvme_bytes), gib(r.nvme_limit_bytes));
  out += fmt::format("comm per device  {}\n", gib(r.comm_bytes));
  for (const auto& [link, bytes] : r.link_bytes)
    out += fmt::format("  {:<14} {}\n", link, gib(bytes));
  out += breakdown_text(r);
  out +=
      "stage  layers   busy s    idle s   states     buffers    activations  allocator  "
      "peak        in flight  mesh\n";
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const auto& s = r.stages[i];
    out += fmt::format(
        "{:>5}  {:>6}  {:>8.4g}  {:>8.4g}  {:>10}  {:>9}  {:>11}  {:>9}  {:>10}  {:>9}  dp {} x "
        "{}tp {}{}\n",
        i, s.layers, s.busy_s, s.idle_s, gib(s.state_bytes), gib(s.buffer_bytes),
        gib(s.activation_bytes), gib(s.allocator_bytes), gib(s.peak_memory_bytes), s.in_flight,
        s.dp, r.cp > 1 ? fmt::format("cp {} x ", r.cp) : "", s.tp, mixed ? " on " + s.device : "");
  }
  return out;
}

}  // namespace heddle::cost
