// A small interface to integer linear programming, so the planner states problems once and the
// solver (COIN-OR CBC) stays swappable and testable.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "heddle/support/Result.h"

namespace heddle::search {

/// min c^T x subject to row_lo <= A x <= row_hi, col_lo <= x <= col_hi, some x integer.
struct IlpProblem {
  std::vector<double> obj, col_lo, col_hi;
  std::vector<bool> integer;
  struct Row {
    std::vector<std::pair<int, double>> terms;  ///< (column, coefficient)
    double lo, hi;
  };
  std::vector<Row> rows;

  /// Adds a column and returns its index.
  int add_column(double objective, double lo, double hi, bool is_integer);
  /// Adds a row `lo <= sum terms <= hi`. Precondition: columns exist.
  void add_row(std::vector<std::pair<int, double>> terms, double lo, double hi);
  int num_columns() const { return static_cast<int>(obj.size()); }
};

/// Options of a solve.
struct IlpOptions {
  double time_limit_s = 60;  ///< wall-clock limit; default 60 s
};

/// A solution: the values of every column, the objective, and whether it is proven optimal.
struct IlpSolution {
  std::vector<double> x;
  double objective = 0;
  double bound = 0;      ///< the best lower bound the solver proved
  bool optimal = false;  ///< false when the time limit stopped the search first
};

/// Solves integer programs.
class IlpSolver {
 public:
  virtual ~IlpSolver() = default;
  /// Solves `p`. An infeasible problem, or one without a solution within the time limit, is a
  /// diagnostic. Deterministic: the same problem gives the same solution.
  virtual Result<IlpSolution> solve(const IlpProblem& p, const IlpOptions& o) const = 0;
};

/// COIN-OR CBC (branch and cut over CLP), single-threaded and silent.
class CbcSolver : public IlpSolver {
 public:
  Result<IlpSolution> solve(const IlpProblem& p, const IlpOptions& o) const override;
};

}  // namespace heddle::search
