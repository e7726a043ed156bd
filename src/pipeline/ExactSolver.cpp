#include "heddle/pipeline/ExactSolver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/pipeline/Validate.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>
#pragma GCC diagnostic pop

namespace heddle::pipeline {

namespace {

/// Rows and columns of the program, built incrementally.
struct Program {
  std::vector<double> col_lo, col_hi, obj;
  std::vector<bool> integer;
  CoinPackedMatrix rows{false, 0, 0};
  std::vector<double> row_lo, row_hi;

  int add_col(double lo, double hi, double cost, bool is_int) {
    col_lo.push_back(lo);
    col_hi.push_back(hi);
    obj.push_back(cost);
    integer.push_back(is_int);
    return static_cast<int>(obj.size()) - 1;
  }
  void add_row(const std::vector<std::pair<int, double>>& terms, double lo, double hi) {
    CoinPackedVector v;
    for (auto [c, a] : terms)
      if (a != 0) v.insert(c, a);
    rows.setDimensions(rows.getNumRows(), static_cast<int>(obj.size()));
    rows.appendRow(v);
    row_lo.push_back(lo);
    row_hi.push_back(hi);
  }
};

}  // namespace

Result<ExactResult> solve_exact(const BlockPlacement& p, int m, double memory_limit,
                                const ExactOptions& options) {
  HEDDLE_TRY(check_request(p, m, memory_limit));
  if (!has_integer_spans(p)) {
    return Diagnostic("the exact method needs whole-number spans; scale the spans");
  }
  const int nb = static_cast<int>(p.blocks.size());
  const int n = m * nb;
  int horizon = options.horizon;
  ExactResult out;
  if (horizon <= 0) {
    auto heuristic = search_schedule(p, m, memory_limit);
    HEDDLE_TRY(heuristic);
    horizon = static_cast<int>(std::lround(heuristic->makespan));
    out.schedule = heuristic->schedule;
    out.makespan = heuristic->makespan;
  }
  // Earliest and latest starts from the longest paths within a micro-batch.
  auto order = topological_order(p);
  auto pred = predecessors(p);
  auto succ = successors(p);
  std::vector<int> span(nb), head(nb, 0), tail(nb, 0);
  for (int b = 0; b < nb; ++b) span[b] = static_cast<int>(std::lround(p.blocks[b].span));
  for (int b : order)
    for (int a : pred[b]) head[b] = std::max(head[b], head[a] + span[a]);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int c : succ[*it]) tail[*it] = std::max(tail[*it], tail[c] + span[c]);
  long long vars = 0;
  for (int b = 0; b < nb; ++b) vars += std::max(0, horizon - tail[b] - span[b] - head[b] + 1);
  vars *= m;
  if (vars > options.max_variables) {
    return Diagnostic(
        fmt::format("the exact method would need {} variables (limit {}); use fewer "
                    "devices or micro-batches",
                    vars, options.max_variables));
  }

  Program prog;
  const int cmax = prog.add_col(0, horizon, 1.0, false);
  // first[o], x column of operation o starting at first_t[o] + k.
  std::vector<int> first_col(n), first_t(n), last_t(n);
  for (int op = 0; op < n; ++op) {
    int b = op % nb;
    first_t[op] = head[b];
    last_t[op] = horizon - tail[b] - span[b];
    first_col[op] = static_cast<int>(prog.obj.size());
    for (int t = first_t[op]; t <= last_t[op]; ++t) prog.add_col(0, 1, 0, true);
  }
  auto x = [&](int op, int t) { return first_col[op] + (t - first_t[op]); };
  auto starts_by = [&](int op, int t, double coef, std::vector<std::pair<int, double>>& terms) {
    for (int tau = first_t[op]; tau <= std::min(t, last_t[op]); ++tau)
      terms.push_back({x(op, tau), coef});
  };
  for (int op = 0; op < n; ++op) {
    std::vector<std::pair<int, double>> once, end;
    starts_by(op, horizon, 1.0, once);
    prog.add_row(once, 1, 1);
    if (succ[op % nb].empty()) {
      end.push_back({cmax, 1.0});
      for (int t = first_t[op]; t <= last_t[op]; ++t)
        end.push_back({x(op, t), -(t + span[op % nb])});
      prog.add_row(end, 0, COIN_DBL_MAX);
    }
  }
  // Dependencies: b cannot have started by t unless a started by t - span(a).
  for (int i = 0; i < m; ++i) {
    for (auto [a, b] : p.deps) {
      int oa = i * nb + a, ob = i * nb + b;
      for (int t = first_t[ob]; t <= last_t[ob]; ++t) {
        std::vector<std::pair<int, double>> terms;
        starts_by(ob, t, 1.0, terms);
        starts_by(oa, t - span[a], -1.0, terms);
        prog.add_row(terms, -COIN_DBL_MAX, 0);
      }
    }
  }
  // Devices: at most one running block; memory of started blocks within the limit.
  for (int d = 0; d < p.num_devices; ++d) {
    std::vector<int> on;
    bool any_memory = false;
    for (int op = 0; op < n; ++op) {
      const auto& devs = p.blocks[op % nb].devices;
      if (std::find(devs.begin(), devs.end(), d) == devs.end()) continue;
      on.push_back(op);
      any_memory = any_memory || p.blocks[op % nb].memory != 0;
    }
    for (int t = 0; t < horizon; ++t) {
      std::vector<std::pair<int, double>> run, mem;
      for (int op : on) {
        int s = span[op % nb];
        for (int tau = std::max(first_t[op], t - s + 1); tau <= std::min(t, last_t[op]); ++tau) {
          run.push_back({x(op, tau), 1.0});
        }
        if (any_memory) starts_by(op, t, p.blocks[op % nb].memory, mem);
      }
      if (run.size() > 1) prog.add_row(run, -COIN_DBL_MAX, 1);
      if (!mem.empty()) prog.add_row(mem, -COIN_DBL_MAX, memory_limit);
    }
  }
  // Interchangeable micro-batches: order them by the start of block order[0].
  for (int i = 0; i + 1 < m; ++i) {
    std::vector<std::pair<int, double>> terms;
    int o0 = i * nb + order[0], o1 = (i + 1) * nb + order[0];
    for (int t = first_t[o0]; t <= last_t[o0]; ++t) terms.push_back({x(o0, t), t});
    for (int t = first_t[o1]; t <= last_t[o1]; ++t) terms.push_back({x(o1, t), -t});
    prog.add_row(terms, -COIN_DBL_MAX, 0);
  }

  OsiClpSolverInterface solver;
  prog.rows.setDimensions(static_cast<int>(prog.row_lo.size()), static_cast<int>(prog.obj.size()));
  solver.loadProblem(prog.rows, prog.col_lo.data(), prog.col_hi.data(), prog.obj.data(),
                     prog.row_lo.data(), prog.row_hi.data());
  for (size_t c = 0; c < prog.integer.size(); ++c)
    if (prog.integer[c]) solver.setInteger(static_cast<int>(c));
  solver.messageHandler()->setLogLevel(0);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(options.time_limit_s);
  model.branchAndBound();
  out.bound = std::ceil(model.getBestPossibleObjValue() - 1e-6);
  out.optimal = model.isProvenOptimal();
  const double* sol = model.bestSolution();
  if (sol) {
    Schedule s{m, nb, std::vector<double>(n, 0.0)};
    for (int op = 0; op < n; ++op)
      for (int t = first_t[op]; t <= last_t[op]; ++t)
        if (sol[x(op, t)] > 0.5) s.start[op] = t;
    HEDDLE_ASSERT(validate_schedule(p, s, memory_limit).ok())
        << "CBC returned an invalid schedule: "
        << validate_schedule(p, s, memory_limit).error().to_string();
    double ms = compute_stats(p, s).makespan;
    if (out.schedule.num_ops() == 0 || ms < out.makespan) {
      out.schedule = std::move(s);
      out.makespan = ms;
    }
  } else if (out.schedule.num_ops() == 0) {
    return Diagnostic(fmt::format("the exact method found no schedule within horizon {}", horizon));
  }
  if (out.optimal) out.bound = out.makespan;
  return out;
}

}  // namespace heddle::pipeline
