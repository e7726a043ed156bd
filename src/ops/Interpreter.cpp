#include "heddle/ops/Interpreter.h"

#include <cblas.h>

#include <cmath>

#include "heddle/ops/Kernel.h"
#include "heddle/ops/TileInit.h"
#include "heddle/support/Assert.h"

namespace heddle {

Tensor init_param(const std::string& name, const TensorType& type, uint64_t seed) {
  return init_param_tile(name, type, seed, Box::of_shape(type.shape()));
}

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, int64_t int_hi) {
  std::vector<Tensor> out;
  for (ValueId v : g.inputs())
    out.push_back(random_input_tile(g.value(v).name, g.type(v), seed, int_hi,
                                    Box::of_shape(g.type(v).shape())));
  return out;
}

Interpreter::Interpreter(const Graph& g, InterpreterOptions options) : g_(g) {
  if (options.blas_threads > 0) openblas_set_num_threads(options.blas_threads);
  values_.resize(static_cast<size_t>(g.num_values()));
  allocated_.assign(static_cast<size_t>(g.num_values()), false);
  for (ValueId p : g.params()) values_[p] = init_param(g.value(p).name, g.type(p), options.seed);
}

const Tensor& Interpreter::param(ValueId v) const {
  HEDDLE_ASSERT(g_.value(v).role == ValueRole::kParam) << g_.value(v).name << " is not a param";
  return values_[v];
}

void Interpreter::set_param(ValueId v, Tensor t) {
  HEDDLE_ASSERT(g_.value(v).role == ValueRole::kParam) << g_.value(v).name << " is not a param";
  HEDDLE_ASSERT(t.shape() == g_.type(v).shape()) << "set_param " << g_.value(v).name;
  values_[v] = std::move(t);
}

const Tensor& Interpreter::value(ValueId v) const {
  HEDDLE_ASSERT(v >= 0 && v < g_.num_values()) << "value " << v;
  return values_[v];
}

Result<std::vector<Tensor>> Interpreter::run(const std::vector<Tensor>& inputs,
                                             int64_t optimizer_step) {
  if (inputs.size() != g_.inputs().size())
    return Diagnostic("the graph takes " + std::to_string(g_.inputs().size()) + " input(s), got " +
                      std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId v = g_.inputs()[i];
    if (inputs[i].shape() != g_.type(v).shape() ||
        inputs[i].is_int() != !dtype_is_float(g_.type(v).dtype()))
      return Diagnostic("input %" + g_.value(v).name + " must be " + g_.type(v).to_string() +
                        ", got " + inputs[i].to_string());
    values_[v] = inputs[i];
  }
  kernels::KernelOptions ko;
  ko.optimizer_step = optimizer_step;
  for (OpId id = 0; id < g_.num_ops(); ++id) {
    const Op& op = g_.op(id);
    std::vector<const Tensor*> in;
    for (const auto& o : op.inputs) in.push_back(&values_[o.value]);
    std::vector<Tensor*> out;
    for (const auto& r : op.results) {
      // Results keep their buffers across runs: every kernel overwrites its whole output when
      // not accumulating, so no zeroing pass is needed.
      if (!allocated_[r.value]) {
        values_[r.value] = Tensor(g_.type(r.value));
        allocated_[r.value] = true;
      }
      out.push_back(&values_[r.value]);
    }
    Status s = kernels::run(op, op.space.box(), in, out, ko);
    if (!s.ok()) return Diagnostic(g_.loc(id), s.error().message);
    if (after_op_)
      for (const auto& r : op.results) after_op_(r.value, values_[r.value]);
  }
  std::vector<Tensor> outs;
  for (ValueId v : g_.outputs()) outs.push_back(values_[v]);
  return outs;
}

}  // namespace heddle
