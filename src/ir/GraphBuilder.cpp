#include "heddle/ir/GraphBuilder.h"

#include "heddle/ir/TextParser.h"
#include "heddle/support/Assert.h"

namespace heddle {

TensorType f32(std::vector<int64_t> shape) {
  return TensorType(DType::kF32, IVec(std::move(shape)));
}
TensorType i64(std::vector<int64_t> shape) {
  return TensorType(DType::kI64, IVec(std::move(shape)));
}

std::string GraphBuilder::fresh_name() {
  while (true) {
    std::string n = "t" + std::to_string(next_++);
    if (!g_.find_value(n)) return n;
  }
}

ValueId GraphBuilder::op(OpKind kind, std::string_view space, const std::vector<Use>& inputs,
                         TensorType result, std::string_view result_proj, Attrs attrs,
                         std::string name) {
  auto sp = parse_index_space(space);
  HEDDLE_ASSERT(sp.ok()) << "index space '" << std::string(space) << "': " << sp.error().message;
  std::vector<std::string> dims = sp->names();
  Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.space = std::move(*sp);
  for (const auto& u : inputs) {
    auto p = parse_projection(u.proj, dims);
    HEDDLE_ASSERT(p.ok()) << "projection '" << std::string(u.proj) << "': " << p.error().message;
    op.inputs.push_back({u.value, std::move(*p), u.padded});
  }
  auto rp = parse_projection(result_proj, dims);
  HEDDLE_ASSERT(rp.ok()) << "projection '" << std::string(result_proj)
                         << "': " << rp.error().message;
  op.results.push_back({-1, std::move(*rp), false});
  if (name.empty()) name = fresh_name();
  return g_.add_op(std::move(op), {std::move(name)}, {std::move(result)}).front();
}

}  // namespace heddle
