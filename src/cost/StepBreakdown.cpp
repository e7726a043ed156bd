#include "heddle/cost/StepBreakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace heddle::cost {

namespace {

// Every field with its key and name, in the order entries() lists them.
struct Field {
  double StepBreakdown::*member;
  const char* key;
  const char* name;
  bool overlapped;
};

constexpr Field kFields[] = {
    {&StepBreakdown::compute_s, "compute", "compute", false},
    {&StepBreakdown::recompute_s, "recompute", "recompute", false},
    {&StepBreakdown::tp_sp_s, "tp_sp_collectives", "tp/sp collectives", false},
    {&StepBreakdown::cp_ep_s, "cp_ep_traffic", "cp/ep traffic", false},
    {&StepBreakdown::pipeline_send_s, "pipeline_sends", "pipeline sends", false},
    {&StepBreakdown::bubble_s, "bubble", "bubble", false},
    {&StepBreakdown::grad_reduction_s, "gradient_reduction", "gradient reduction", false},
    {&StepBreakdown::optimizer_s, "optimizer", "optimizer", false},
    {&StepBreakdown::offload_s, "host_offload", "host offload", false},
    {&StepBreakdown::overlapped_tp_s, "overlapped_tp_sp_collectives",
     "tp/sp collectives (overlapped)", true},
    {&StepBreakdown::overlapped_cp_s, "overlapped_cp_ep_traffic", "cp/ep traffic (overlapped)",
     true},
    {&StepBreakdown::overlapped_send_s, "overlapped_pipeline_sends", "pipeline sends (overlapped)",
     true},
    {&StepBreakdown::overlapped_grad_s, "overlapped_gradient_reduction",
     "gradient reduction (overlapped)", true},
    {&StepBreakdown::overlapped_offload_s, "overlapped_host_offload", "host offload (overlapped)",
     true},
};

}  // namespace

double StepBreakdown::total() const {
  double t = 0;
  for (const Field& f : kFields)
    if (!f.overlapped) t += this->*f.member;
  return t;
}

StepBreakdown StepBreakdown::operator+(const StepBreakdown& o) const {
  StepBreakdown r;
  for (const Field& f : kFields) r.*f.member = this->*f.member + o.*f.member;
  return r;
}

StepBreakdown StepBreakdown::scaled(double k) const {
  StepBreakdown r;
  for (const Field& f : kFields) r.*f.member = this->*f.member * k;
  return r;
}

std::vector<StepBreakdown::Entry> StepBreakdown::entries() const {
  std::vector<Entry> out;
  for (const Field& f : kFields) out.push_back({f.key, f.name, this->*f.member, f.overlapped});
  return out;
}

std::string StepBreakdown::to_string() const {
  const double t = total();
  std::vector<Entry> shown;
  for (const Entry& e : entries())
    if (!e.overlapped && t > 0 && e.seconds > 0.005 * t) shown.push_back(e);
  std::stable_sort(shown.begin(), shown.end(),
                   [](const Entry& x, const Entry& y) { return x.seconds > y.seconds; });
  std::string out;
  for (const Entry& e : shown)
    out += fmt::format("{}{} {:.4g} s ({:.0f}%)", out.empty() ? "" : ", ", e.name, e.seconds,
                       100 * e.seconds / t);
  return out.empty() ? "nothing" : out;
}

std::string explain_difference(const StepBreakdown& a, const StepBreakdown& b) {
  const double scale = std::max(a.total(), b.total());
  std::vector<std::pair<double, std::string>> diffs;
  auto ea = a.entries(), eb = b.entries();
  for (size_t i = 0; i < ea.size(); ++i) {
    double d = ea[i].seconds - eb[i].seconds;
    if (std::abs(d) > 0.005 * scale) diffs.push_back({d, ea[i].name});
  }
  std::stable_sort(diffs.begin(), diffs.end(), [](const auto& x, const auto& y) {
    return std::abs(x.first) > std::abs(y.first);
  });
  std::string out;
  for (const auto& [d, name] : diffs)
    out += fmt::format("{}{} {:+.4g} s", out.empty() ? "" : ", ", name, d);
  return out.empty() ? "no category differs" : out;
}

}  // namespace heddle::cost
