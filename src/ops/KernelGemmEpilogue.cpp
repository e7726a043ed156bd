// A contraction and the adds after it in a fused chain (a linear layer's bias, then the residual
// it joins) as one pass and one sgemm: the adds' other operands are summed into the last add's
// tile, then the product is added on top by the contraction kernel with accumulate (sgemm with
// beta 1). The product never reaches memory on its own and no separate loop reads it back.
#include <algorithm>

#include "KernelUtil.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {

using kernels::BoundCall;

bool contains(const std::vector<ValueId>& vs, ValueId v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

// True when a call at position j or later reads value v.
bool read_from(const std::vector<BoundCall>& calls, size_t j, ValueId v) {
  for (; j < calls.size(); ++j)
    for (const auto& x : calls[j].op->inputs)
      if (x.value == v) return true;
  return false;
}

// The other input of call c when c adds value v point for point to it into a float tile of
// `region` (v read through the result's own projection from a tile of that region, over a box
// whose image is the region); -1 otherwise.
int other_addend(const BoundCall& c, ValueId v, const Box& region) {
  const Op& op = *c.op;
  if (op.kind != OpKind::kAdd || op.inputs.size() != 2 || c.outs.size() != 1 ||
      op.space.has_reduce() || c.outs[0]->is_int() || c.outs[0]->region() != region ||
      op.results[0].proj.image(c.box) != region)
    return -1;
  for (int k : {0, 1}) {
    const Operand& x = op.inputs[k];
    const Operand& y = op.inputs[1 - k];
    if (x.value == v && y.value != v && !x.padded && !y.padded && x.proj == op.results[0].proj &&
        c.ins[k]->region() == region && !c.ins[1 - k]->is_int())
      return 1 - k;
  }
  return -1;
}

}  // namespace

bool run_gemm_epilogue(const std::vector<BoundCall>& calls, size_t i,
                       const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                       Status* status) {
  const BoundCall& mm = calls[i];
  if (o.reference || o.accumulate || mm.op->kind != OpKind::kEinsum || mm.outs.size() != 1 ||
      mm.ins.size() != 2 || mm.outs[0]->is_int() || store_mode(*mm.op) != Store::kSum)
    return false;
  const Box region = mm.outs[0]->region();
  if (mm.op->results[0].proj.image(mm.box) != region) return false;
  // Up to two adds, each reading the previous value, which nothing else reads (a temporary).
  std::vector<std::pair<size_t, int>> adds;  // (call, its other input)
  ValueId cur = mm.op->results[0].value;
  for (size_t k = i + 1; k < calls.size() && adds.size() < 2; ++k) {
    if (!contains(temporaries, cur) || read_from(calls, k + 1, cur)) break;
    int other = other_addend(calls[k], cur, region);
    if (other < 0) break;
    if (!adds.empty()) {  // walked over the first add's points: the same box and projection
      const BoundCall& first = calls[adds[0].first];
      if (calls[k].box != first.box || !(calls[k].op->results[0].proj == first.op->results[0].proj))
        break;
    }
    adds.push_back({k, other});
    cur = calls[k].op->results[0].value;
  }
  if (adds.empty()) return false;
  const BoundCall& first = calls[adds[0].first];
  Tensor* out = calls[adds.back().first].outs[0];
  Access d(*out, first.op->results[0]);
  std::vector<Access> xs;
  for (const auto& [k, other] : adds)
    xs.emplace_back(*calls[k].ins[other], calls[k].op->inputs[other]);
  const int64_t last = first.box.rank() - 1;
  float* dst = out->f32();
  for_each_row(first.box, [&](const int64_t* p, int64_t n) {
    const int64_t ds = last >= 0 ? d.coef[last] : 0;
    float* row = dst + d.offset(p);
    const Access& a = xs[0];
    const int64_t as = last >= 0 ? a.coef[last] : 0;
    const float* ar = a.fdata + a.offset(p);
    if (xs.size() == 1) {
      if (ds == 1 && as == 1)  // contiguous rows (a bias along the features): a vector copy
        std::copy(ar, ar + n, row);
      else
        for (int64_t j = 0; j < n; ++j) row[j * ds] = ar[j * as];
      return;
    }
    const Access& b = xs[1];
    const int64_t bs = last >= 0 ? b.coef[last] : 0;
    const float* br = b.fdata + b.offset(p);
    if (ds == 1 && as == 1 && bs == 1)
      for (int64_t j = 0; j < n; ++j) row[j] = ar[j] + br[j];
    else
      for (int64_t j = 0; j < n; ++j) row[j * ds] = ar[j * as] + br[j * bs];
  });
  KernelOptions acc = o;
  acc.accumulate = true;
  *status = kernels::run(*mm.op, mm.box, mm.ins, {out}, acc);
  *end = adds.back().first + 1;
  return true;
}

}  // namespace heddle::kdetail
