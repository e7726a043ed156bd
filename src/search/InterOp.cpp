#include "heddle/search/InterOp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Bubble factor and chunks of a schedule; one the search does not know: nullopt.
std::optional<std::pair<double, int64_t>> schedule_shape(const pipeline::PipelineSchedule& s) {
  switch (s.kind) {
    case pipeline::ScheduleKind::k1f1b:
      return std::make_pair(1.0, int64_t{1});
    case pipeline::ScheduleKind::kZbH1:
      return std::make_pair(1.0 / 3, int64_t{1});
    case pipeline::ScheduleKind::kInterleaved:
      return std::make_pair(1.0 / static_cast<double>(s.chunks), s.chunks);
    default:
      return std::nullopt;
  }
}

Diagnostic unknown_schedule(const pipeline::PipelineSchedule& s) {
  return Diagnostic("schedule '" + s.to_string() +
                    "' is not one the inter-op search knows; use 1f1b, "
                    "interleaved:V or zb-h1");
}

// Every stage's cost, [first][last][submesh index], for one micro-batch count.
using Table = std::vector<std::vector<std::vector<StageCost>>>;

Table price(const InterOpProblem& p, int64_t m) {
  Table t(static_cast<size_t>(p.layers),
          std::vector<std::vector<StageCost>>(static_cast<size_t>(p.layers) + 1));
  for (int64_t k = 0; k < p.layers; ++k)
    for (int64_t j = k + 1; j <= p.layers; ++j)
      for (int64_t n : p.submesh_sizes) t[k][j].push_back(p.cost(k, j, n, m));
  return t;
}

bool fits(const StageCost& c, int64_t s, int64_t m, const pipeline::PipelineSchedule& sched,
          double limit) {
  return c.feasible && c.state_bytes + in_flight(s, m, sched) * c.activation_bytes <= limit;
}

// The least stage memory any slicing needs (one micro-batch in flight), for the diagnostic.
double least_memory(const Table& t) {
  double least = kInf;
  for (const auto& row : t)
    for (const auto& cell : row)
      for (const auto& c : cell)
        if (c.feasible) least = std::min(least, c.state_bytes + c.activation_bytes);
  return least;
}

Result<InterOpPlan> no_fit(const InterOpProblem& p, double least) {
  if (!std::isfinite(least))
    return Diagnostic(fmt::format("no slicing of {} layer clusters onto {} devices is possible",
                                  p.layers, p.devices));
  return Diagnostic("no pipeline fits in " + human_bytes(p.memory_limit) +
                    " per device; the smallest stage needs " + human_bytes(least));
}

}  // namespace

Result<double> pipeline_step_time(const std::vector<double>& t, int64_t m,
                                  const pipeline::PipelineSchedule& schedule) {
  auto shape = schedule_shape(schedule);
  if (!shape) return unknown_schedule(schedule);
  double sum = 0, mx = 0;
  for (double x : t) sum += x, mx = std::max(mx, x);
  return static_cast<double>(m) * mx + shape->first * (sum - mx);
}

double in_flight(int64_t s, int64_t m, const pipeline::PipelineSchedule& schedule) {
  auto shape = schedule_shape(schedule);
  double v = shape ? static_cast<double>(shape->second) : 1;
  double held = static_cast<double>(s);
  if (v > 1) held += static_cast<double>(s - 1) / v;
  return std::min(static_cast<double>(m), held);
}

std::vector<int64_t> balance_layers(const std::vector<double>& fixed, double unit_s,
                                    int64_t units) {
  return balance_layers(fixed, std::vector<double>(fixed.size(), unit_s), units);
}

std::vector<int64_t> balance_layers(const std::vector<double>& fixed,
                                    const std::vector<double>& unit_s, int64_t units) {
  const int64_t C = static_cast<int64_t>(fixed.size());
  HEDDLE_ASSERT(C >= 1 && units >= C && unit_s.size() == fixed.size()) << "an impossible split";
  for (double u : unit_s) HEDDLE_ASSERT(u >= 0) << "a negative unit time " << u;
  // Water filling: every chunk starts with one unit, each further unit goes to the chunk it
  // leaves quickest; with linear chunk times this minimizes the largest.
  std::vector<int64_t> n(static_cast<size_t>(C), 1);
  for (int64_t left = units - C; left > 0; --left) {
    size_t at = 0;
    double least = kInf;
    for (size_t c = 0; c < n.size(); ++c) {
      double t = fixed[c] + static_cast<double>(n[c] + 1) * unit_s[c];
      if (t < least) least = t, at = c;
    }
    ++n[at];
  }
  return n;
}

Result<InterOpPlan> solve_inter_op(const InterOpProblem& p) {
  HEDDLE_ASSERT(p.layers >= 1 && p.devices >= 1 && p.cost) << "an empty inter-op problem";
  for (const auto& s : p.schedules)
    if (!schedule_shape(s)) return unknown_schedule(s);
  const int64_t L = p.layers, N = p.devices, Z = static_cast<int64_t>(p.submesh_sizes.size());
  std::optional<InterOpPlan> best;
  double least = kInf;
  // F[s][k][d]: least total stage time for layers k.. in s stages on d devices; choice records
  // (end layer, submesh index) for the reconstruction.
  using Grid = std::vector<std::vector<std::vector<double>>>;
  for (int64_t m : p.micro_batches) {
    Table t = price(p, m);
    least = std::min(least, least_memory(t));
    for (const auto& sched : p.schedules) {
      double b = schedule_shape(sched)->first;
      std::vector<double> bounds;
      for (const auto& row : t)
        for (const auto& cell : row)
          for (const auto& c : cell)
            if (c.feasible) bounds.push_back(c.seconds);
      std::sort(bounds.begin(), bounds.end());
      bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
      for (double tmax : bounds) {
        if (best && (static_cast<double>(m) - b) * tmax >= best->step_time_s) break;
        Grid F(
            static_cast<size_t>(L) + 1,
            std::vector<std::vector<double>>(
                static_cast<size_t>(L) + 1, std::vector<double>(static_cast<size_t>(N) + 1, kInf)));
        std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> how(
            static_cast<size_t>(L) + 1,
            std::vector<std::vector<std::pair<int64_t, int64_t>>>(
                static_cast<size_t>(L) + 1,
                std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(N) + 1)));
        F[0][L][0] = 0;
        // F[s] needs only F[s - 1]: a pinned stage count bounds the rows.
        const int64_t rows = p.pinned_stages > 0 ? std::min(p.pinned_stages, L) : L;
        for (int64_t s = 1; s <= rows; ++s)
          for (int64_t k = L - 1; k >= 0; --k)
            for (int64_t d = 1; d <= N; ++d)
              for (int64_t j = k + 1; j <= L; ++j)
                for (int64_t z = 0; z < Z; ++z) {
                  int64_t n = p.submesh_sizes[static_cast<size_t>(z)];
                  if (n > d) continue;
                  const StageCost& c = t[k][j][z];
                  if (c.seconds > tmax || !fits(c, s, m, sched, p.memory_limit)) continue;
                  double rest = F[s - 1][j][d - n];
                  if (rest + c.seconds < F[s][k][d]) {
                    F[s][k][d] = rest + c.seconds;
                    how[s][k][d] = {j, z};
                  }
                }
        for (int64_t s = 1; s <= rows; ++s) {
          if (p.pinned_stages > 0 && s != p.pinned_stages) continue;
          double sum = F[s][0][N];
          if (!std::isfinite(sum)) continue;
          // Rebuild the slicing; its true step time uses its own largest stage.
          InterOpPlan plan;
          plan.micro_batches = m;
          plan.schedule = sched;
          std::vector<double> times;
          for (int64_t q = s, k = 0, d = N; q > 0; --q) {
            auto [j, z] = how[q][k][d];
            int64_t n = p.submesh_sizes[static_cast<size_t>(z)];
            plan.stages.push_back({k, j, n, t[k][j][z]});
            times.push_back(t[k][j][z].seconds);
            k = j;
            d -= n;
          }
          plan.step_time_s = *pipeline_step_time(times, m, sched);
          if (!best || plan.step_time_s < best->step_time_s * (1 - 1e-12)) best = std::move(plan);
        }
      }
    }
  }
  if (!best) return no_fit(p, least);
  return *best;
}

Result<InterOpPlan> enumerate_inter_op(const InterOpProblem& p) {
  for (const auto& s : p.schedules)
    if (!schedule_shape(s)) return unknown_schedule(s);
  std::optional<InterOpPlan> best;
  double least = kInf;
  for (int64_t m : p.micro_batches) {
    Table t = price(p, m);
    least = std::min(least, least_memory(t));
    for (const auto& sched : p.schedules) {
      std::vector<InterOpStage> stages;
      std::function<void(int64_t, int64_t)> walk = [&](int64_t k, int64_t d) {
        if (k == p.layers) {
          int64_t S = static_cast<int64_t>(stages.size());
          if (d != 0 || (p.pinned_stages > 0 && S != p.pinned_stages)) return;
          std::vector<double> times;
          for (int64_t i = 0; i < S; ++i) {
            const StageCost& c = stages[static_cast<size_t>(i)].cost;
            if (!fits(c, S - i, m, sched, p.memory_limit)) return;
            times.push_back(c.seconds);
          }
          double T = *pipeline_step_time(times, m, sched);
          if (!best || T < best->step_time_s * (1 - 1e-12)) best = InterOpPlan{stages, m, sched, T};
          return;
        }
        for (int64_t j = k + 1; j <= p.layers; ++j)
          for (size_t z = 0; z < p.submesh_sizes.size(); ++z) {
            int64_t n = p.submesh_sizes[z];
            if (n > d) continue;
            stages.push_back({k, j, n, t[k][j][z]});
            walk(j, d - n);
            stages.pop_back();
          }
      };
      walk(0, p.devices);
    }
  }
  if (!best) return no_fit(p, least);
  return *best;
}

}  // namespace heddle::search
