// Graph: SSA, topologically ordered block ops over index spaces. Shape only: building a graph
// allocates no tensor data, so a 175B-parameter model costs the same as a small one.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "heddle/ir/Attribute.h"
#include "heddle/ir/IndexProjection.h"
#include "heddle/ir/IndexSpace.h"
#include "heddle/ir/OpKind.h"
#include "heddle/ir/ShardAnnotation.h"
#include "heddle/ir/TensorType.h"
#include "heddle/support/Diagnostic.h"

namespace heddle {

using ValueId = int32_t;
using OpId = int32_t;
/// The producer of graph inputs and parameters.
inline constexpr OpId kNoOp = -1;

/// Where a value comes from.
enum class ValueRole : uint8_t { kInput, kParam, kResult };

/// `input`, `param`, `result`.
std::string_view value_role_name(ValueRole r);

/// A tensor value: named, typed, defined once.
struct Value {
  std::string name;  ///< without the leading `%`
  TensorType type;
  ValueRole role = ValueRole::kInput;
  OpId producer = kNoOp;     ///< the defining op for results
  int32_t result_index = 0;  ///< which result of the producer
  /// The user's tactic for this value (`shard{1=tp}`, `replicate`); default none.
  ShardAnnotation tactic;
};

/// One operand or result of an op: the value and how the op's index points address it.
struct Operand {
  ValueId value = -1;
  IndexProjection proj;
  /// Reads outside the tensor yield zero (padded convolutions and pooling). Inputs only.
  bool padded = false;
  bool operator==(const Operand&) const = default;
};

/// A block operation over an index space.
struct Op {
  OpKind kind = OpKind::kIdentity;
  Attrs attrs;
  IndexSpace space;
  std::vector<Operand> inputs;
  std::vector<Operand> results;
  int32_t line = 0;  ///< source position in the text form it was parsed from; 0 if built
  int32_t col = 0;
  /// The user's tactic for this op (`split{n=tp}`, `replicate`; dims are index dims); default
  /// none.
  ShardAnnotation tactic;
};

/// A whole program. Values and ops are appended in a topological order: an op's inputs are
/// inputs, params or results of earlier ops. Structural rules are checked by `verify()`.
///
/// The value and op tables never move: a reference returned by `value()`, `op()`, `type()` or
/// taken from `values()` / `ops()` stays valid for the graph's lifetime, across every later
/// `add_input`, `add_param` and `add_op` (and across moving the graph). Builders hold such
/// references while they append (a gradient rule reads its forward op's operand types while it
/// emits the backward ops); with a growing std::vector every append could free them. The tables
/// are std::deques, whose push_back never relocates existing elements. Iterators over `values()`
/// and `ops()` are still invalidated by appends: loop by index when a loop body appends.
class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  /// The file the graph was parsed from, for diagnostics; empty when built in code.
  const std::string& source_file() const { return source_file_; }
  void set_source_file(std::string file) { source_file_ = std::move(file); }

  /// Declares a graph input.
  ValueId add_input(std::string name, TensorType type);
  /// Declares a parameter (a weight).
  ValueId add_param(std::string name, TensorType type);
  /// Appends an op whose results are new values named `result_names` with `result_types`;
  /// `results[i].value` is filled in. Precondition: inputs name existing values; the three result
  /// vectors have equal sizes. Returns the new values' ids.
  std::vector<ValueId> add_op(Op op, const std::vector<std::string>& result_names,
                              const std::vector<TensorType>& result_types);
  /// Sets the tactic of value `v` (replacing any). Precondition: the value exists.
  void set_tactic(ValueId v, ShardAnnotation a);
  /// Marks a value as a graph output. Precondition: the value exists.
  void add_output(ValueId v);
  /// Sets attribute `name` of op `id` (replacing any). Precondition: the op exists; the caller
  /// keeps the op valid for its kind's schema.
  void set_attr(OpId id, const std::string& name, AttrValue value);

  int64_t num_values() const { return static_cast<int64_t>(values_.size()); }
  int64_t num_ops() const { return static_cast<int64_t>(ops_.size()); }
  /// Every value, by id. References to elements stay valid across appends (see the class note).
  const std::deque<Value>& values() const { return values_; }
  /// Every op, by id. References to elements stay valid across appends (see the class note).
  const std::deque<Op>& ops() const { return ops_; }
  /// Precondition: 0 <= id < num_values(). The reference stays valid across appends.
  const Value& value(ValueId id) const;
  /// Precondition: 0 <= id < num_ops(). The reference stays valid across appends.
  const Op& op(OpId id) const;
  /// Inputs, params and outputs in declaration order.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& params() const { return params_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  /// The first value called `name`, if any.
  std::optional<ValueId> find_value(std::string_view name) const;
  /// The type of value `id`. The reference stays valid across appends.
  const TensorType& type(ValueId id) const { return value(id).type; }
  /// The source location of op `id` (file, line, col where known).
  SourceLoc loc(OpId id) const;

 private:
  ValueId add_value(Value v);

  std::string name_;
  std::string source_file_;
  std::deque<Value> values_;  // deques: appends never move existing elements
  std::deque<Op> ops_;
  std::vector<ValueId> inputs_, params_, outputs_;
  std::unordered_map<std::string, ValueId> by_name_;
};

}  // namespace heddle
