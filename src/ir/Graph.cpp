#include "heddle/ir/Graph.h"

#include "heddle/support/Assert.h"

namespace heddle {

std::string_view value_role_name(ValueRole r) {
  switch (r) {
    case ValueRole::kInput:
      return "input";
    case ValueRole::kParam:
      return "param";
    case ValueRole::kResult:
      return "result";
  }
  HEDDLE_UNREACHABLE();
}

ValueId Graph::add_value(Value v) {
  auto id = static_cast<ValueId>(values_.size());
  by_name_.emplace(v.name, id);  // keeps the first on duplicates; verify() reports them
  values_.push_back(std::move(v));
  return id;
}

ValueId Graph::add_input(std::string name, TensorType type) {
  ValueId id = add_value({std::move(name), std::move(type), ValueRole::kInput, kNoOp, 0, {}});
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_param(std::string name, TensorType type) {
  ValueId id = add_value({std::move(name), std::move(type), ValueRole::kParam, kNoOp, 0, {}});
  params_.push_back(id);
  return id;
}

std::vector<ValueId> Graph::add_op(Op op, const std::vector<std::string>& result_names,
                                   const std::vector<TensorType>& result_types) {
  HEDDLE_ASSERT(result_names.size() == result_types.size() &&
                result_names.size() == op.results.size())
      << op_kind_name(op.kind) << ": " << result_names.size() << " names, " << result_types.size()
      << " types, " << op.results.size() << " result projections";
  for (const auto& in : op.inputs)
    HEDDLE_ASSERT(in.value >= 0 && in.value < num_values())
        << op_kind_name(op.kind) << " reads unknown value " << in.value;
  auto op_id = static_cast<OpId>(ops_.size());
  std::vector<ValueId> ids;
  for (size_t i = 0; i < result_names.size(); ++i) {
    ids.push_back(add_value({result_names[i],
                             result_types[i],
                             ValueRole::kResult,
                             op_id,
                             static_cast<int32_t>(i),
                             {}}));
    op.results[i].value = ids.back();
  }
  ops_.push_back(std::move(op));
  return ids;
}

void Graph::set_tactic(ValueId v, ShardAnnotation a) {
  HEDDLE_ASSERT(v >= 0 && v < num_values()) << "tactic for value " << v;
  values_[static_cast<size_t>(v)].tactic = std::move(a);
}

void Graph::set_attr(OpId id, const std::string& name, AttrValue value) {
  HEDDLE_ASSERT(id >= 0 && id < num_ops()) << "attribute of op " << id;
  ops_[static_cast<size_t>(id)].attrs[name] = std::move(value);
}

void Graph::add_output(ValueId v) {
  HEDDLE_ASSERT(v >= 0 && v < num_values()) << "output " << v;
  outputs_.push_back(v);
}

const Value& Graph::value(ValueId id) const {
  HEDDLE_ASSERT(id >= 0 && id < num_values()) << "value id " << id;
  return values_[static_cast<size_t>(id)];
}

const Op& Graph::op(OpId id) const {
  HEDDLE_ASSERT(id >= 0 && id < num_ops()) << "op id " << id;
  return ops_[static_cast<size_t>(id)];
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

SourceLoc Graph::loc(OpId id) const {
  const Op& o = op(id);
  return SourceLoc{source_file_, o.line, o.col};
}

}  // namespace heddle
