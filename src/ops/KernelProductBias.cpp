// A linear layer's product and the add of its bias after it in a fused chain as one oneDNN matmul
// with the bias in its epilogue: the bias is added to each block of the product while it is in
// cache, and the product without it never reaches memory. Recognized on the bound calls: the
// product's result is read only by the add, point for point, whose other input holds one value
// per column of it. Where the product is not one plain product the primitive takes
// (product_bias), the calls run as before.
#include "KernelUtil.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {

using kernels::BoundCall;

bool same_layout(const Tensor& a, const Tensor& b) {
  return !a.is_int() && !b.is_int() && a.region() == b.region() && a.strides() == b.strides();
}

// True when the float buffers of a and b share memory.
bool overlap(const Tensor& a, const Tensor& b) {
  const float *a0 = a.f32(), *b0 = b.f32();
  return a0 < b0 + b.numel() && b0 < a0 + a.numel();
}

// The input of add call c that is not value v, when c adds v (identity projections, v read
// point for point into a float result over box `box`) to something else: its index, else -1.
int other_input(const BoundCall& c, ValueId v, const Box& box) {
  const Op& op = *c.op;
  if (op.kind != OpKind::kAdd || op.inputs.size() != 2 || op.results.size() != 1 ||
      c.outs.size() != 1 || c.ins.size() != 2 || c.box != box ||
      !same_coordinates(op.results[0].proj))
    return -1;
  for (int k = 0; k < 2; ++k)
    if (op.inputs[k].value == v && op.inputs[1 - k].value != v &&
        same_coordinates(op.inputs[k].proj) && !op.inputs[1 - k].padded && !c.ins[1 - k]->is_int())
      return 1 - k;
  return -1;
}

}  // namespace

bool run_product_bias(const std::vector<BoundCall>& calls, size_t i,
                      const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                      Status* status) {
  if (o.reference || o.accumulate || i + 1 >= calls.size()) return false;
  const BoundCall& pc = calls[i];
  const Op& prod = *pc.op;
  if (prod.kind != OpKind::kEinsum || prod.results.size() != 1 || pc.outs.size() != 1 ||
      pc.ins.size() != 2 || pc.outs[0]->is_int() || pc.ins[0]->is_int() || pc.ins[1]->is_int())
    return false;
  const ValueId t = prod.results[0].value;
  const Box rbox = prod.results[0].proj.image(pc.box);
  const BoundCall& bc = calls[i + 1];
  const int bi = other_input(bc, t, rbox);
  if (bi < 0 || !is_temporary(temporaries, t) || read_from(calls, t, i + 2) ||
      !same_layout(*pc.outs[0], *bc.outs[0]))
    return false;
  // The sum must be stored: not a temporary that a later call of the chain reads.
  const ValueId u = bc.op->results[0].value;
  if (is_temporary(temporaries, u) && read_from(calls, u, i + 2)) return false;
  Tensor& out = *bc.outs[0];
  for (const Tensor* x : {pc.ins[0], pc.ins[1], bc.ins[bi]})
    if (overlap(out, *x)) return false;
  // The bias's strides, from the add's index dims (the result's tensor dims) to the product's.
  Access bias(*bc.ins[bi], bc.op->inputs[bi]);
  if (bias.window_size() != 1) return false;
  ProductBias pb;
  pb.out = out.f32();
  pb.coef.assign(static_cast<size_t>(prod.space.rank()), 0);
  const AffineMap& rmap = prod.results[0].proj.map();
  for (int64_t d = 0; d < rmap.out_rank(); ++d)
    for (int64_t k = 0; k < rmap.in_rank(); ++k)
      if (rmap.at(d, k) != 0) pb.coef[k] = bias.coef[d];
  const std::vector<int64_t> start(rbox.start().values());
  pb.bias = bias.fdata + bias.offset(start.data());
  if (!product_bias(prod, pc.box, pc.ins, *pc.outs[0], pb, o)) return false;
  *status = {};
  *end = i + 2;
  return true;
}

}  // namespace heddle::kdetail
