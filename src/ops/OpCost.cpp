#include "heddle/ops/OpCost.h"

namespace heddle {

OpCost op_cost(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  OpCost c;
  auto vol = static_cast<double>(op.space.volume());
  for (const auto& in : op.inputs) {
    const TensorType& t = g.type(in.value);
    Box img = in.proj.image(op.space.box()).intersect(Box::of_shape(t.shape()));
    c.bytes_read += static_cast<double>(img.volume() * dtype_bytes(t.dtype()));
  }
  for (const auto& r : op.results) c.bytes_written += static_cast<double>(g.type(r.value).bytes());
  double window = 1;
  for (const auto& in : op.inputs)
    window = std::max(window, static_cast<double>(in.proj.window().product()));
  switch (op.kind) {
    case OpKind::kEinsum:
      c.flops = 2 * vol;
      break;
    case OpKind::kEmbedding:
    case OpKind::kEmbeddingGrad:
      c.flops = 0;
      break;
    case OpKind::kConv2d:
    case OpKind::kConv2dGradInput:
      c.flops = 2 * vol * static_cast<double>(op.inputs[1].proj.window().product());
      break;
    case OpKind::kConv2dGradWeight:
      c.flops = 2 * vol;
      break;
    case OpKind::kSgdMomentum:
      c.flops = 4 * vol;
      break;
    case OpKind::kAdamW:
      c.flops = 12 * vol;
      break;
    case OpKind::kTopkGating:
      c.flops = 4 * window;
      break;
    default:
      switch (op_kind_info(op.kind).category) {
        case OpCategory::kUnary:
        case OpCategory::kBinary:
        case OpCategory::kSelect:
          c.flops = vol;
          break;
        case OpCategory::kReduction:
        case OpCategory::kWindow:
          c.flops = vol * window;
          break;
        case OpCategory::kNormalization:
        case OpCategory::kLoss:
          c.flops = 5 * vol * window;
          break;
        default:
          c.flops = 0;
      }
  }
  return c;
}

double graph_flops(const Graph& g) {
  double f = 0;
  for (OpId i = 0; i < g.num_ops(); ++i) f += op_cost(g, i).flops;
  return f;
}

}  // namespace heddle
