// GraphBuilder: building graphs in C++ in the notation of the text form, so code reads like the
// math: b.op(OpKind::kEinsum, "[m=64, n=32, k=128:sum]", {{x, "(m, k)"}, {w, "(k, n)"}}, ...).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/Graph.h"

namespace heddle {

/// `f32[shape]`, and friends, for brevity in builders and tests.
TensorType f32(std::vector<int64_t> shape);
TensorType i64(std::vector<int64_t> shape);

/// Appends values and ops to a graph. Index spaces and projections are given as text; text that
/// does not parse is a programming error (asserts). Rule violations are left to verify().
class GraphBuilder {
 public:
  /// One input of an op: a value and its projection over the op's index dims.
  struct Use {
    ValueId value;
    std::string_view proj;  ///< e.g. "(m, k)" or "(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 3, 3]"
    bool padded = false;    ///< out-of-bounds reads are zero
  };

  explicit GraphBuilder(std::string name = "main") : g_(std::move(name)) {}

  /// Declares a graph input.
  ValueId input(std::string name, TensorType type) { return g_.add_input(std::move(name), type); }
  /// Declares a parameter.
  ValueId param(std::string name, TensorType type) { return g_.add_param(std::move(name), type); }
  /// Appends a single-result op. `name` empty: a fresh name `t<N>`.
  /// Precondition: `space` and the projections parse.
  ValueId op(OpKind kind, std::string_view space, const std::vector<Use>& inputs, TensorType result,
             std::string_view result_proj, Attrs attrs = {}, std::string name = "");
  /// Marks an output.
  void output(ValueId v) { g_.add_output(v); }

  /// The graph so far.
  const Graph& graph() const { return g_; }
  /// Hands over the graph.
  Graph finish() && { return std::move(g_); }

 private:
  std::string fresh_name();

  Graph g_;
  int64_t next_ = 0;
};

}  // namespace heddle
