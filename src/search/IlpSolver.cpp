#include "heddle/search/IlpSolver.h"

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

namespace heddle::search {

int IlpProblem::add_column(double objective, double lo, double hi, bool is_integer) {
  obj.push_back(objective);
  col_lo.push_back(lo);
  col_hi.push_back(hi);
  integer.push_back(is_integer);
  return num_columns() - 1;
}

void IlpProblem::add_row(std::vector<std::pair<int, double>> terms, double lo, double hi) {
  for (const auto& [c, v] : terms)
    HEDDLE_ASSERT(c >= 0 && c < num_columns()) << "row refers to column " << c;
  rows.push_back({std::move(terms), lo, hi});
}

Result<IlpSolution> CbcSolver::solve(const IlpProblem& p, const IlpOptions& o) const {
  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, p.num_columns());
  std::vector<double> row_lo, row_hi;
  for (const auto& r : p.rows) {
    CoinPackedVector v;
    for (const auto& [c, coef] : r.terms) v.insert(c, coef);
    matrix.appendRow(v);
    row_lo.push_back(r.lo);
    row_hi.push_back(r.hi);
  }
  OsiClpSolverInterface solver;
  solver.loadProblem(matrix, p.col_lo.data(), p.col_hi.data(), p.obj.data(), row_lo.data(),
                     row_hi.data());
  for (int c = 0; c < p.num_columns(); ++c)
    if (p.integer[c]) solver.setInteger(c);
  solver.messageHandler()->setLogLevel(0);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(o.time_limit_s);
  model.setNumberThreads(0);
  model.setAllowableGap(1e-7);
  model.setAllowableFractionGap(1e-9);
  model.branchAndBound();
  const double* sol = model.bestSolution();
  if (!sol) {
    if (model.isProvenInfeasible()) return Diagnostic("the integer program is infeasible");
    return Diagnostic("the solver found no solution within " + std::to_string(o.time_limit_s) +
                      " s");
  }
  IlpSolution out;
  out.x.assign(sol, sol + p.num_columns());
  out.objective = model.getObjValue();
  out.bound = model.getBestPossibleObjValue();
  out.optimal = model.isProvenOptimal();
  return out;
}

}  // namespace heddle::search
