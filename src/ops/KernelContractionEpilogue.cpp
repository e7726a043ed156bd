// An einsum and the adds after it in a fused chain (a linear layer's bias, then a residual) as one
// product: the addends are summed into the last add's tile first, and the product adds into it
// (sgemm's beta = 1), so the product's own result and the values in between never reach memory.
// The GPT training step's projections had a pass over their result per add (bias, residual), each
// reading and writing a 1 to 4 MB tile (docs/benchmarks.md, 2026-11-27).
#include <algorithm>

#include "KernelUtil.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {

using kernels::BoundCall;

bool contains(const std::vector<ValueId>& vs, ValueId v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

// True when value v is read by a call at or after j.
bool read_from(const std::vector<BoundCall>& calls, ValueId v, size_t j) {
  for (size_t r = j; r < calls.size(); ++r)
    for (const auto& x : calls[r].op->inputs)
      if (x.value == v) return true;
  return false;
}

// True when tiles a and b are float tiles of one region with the same strides.
bool same_layout(const Tensor& a, const Tensor& b) {
  return !a.is_int() && !b.is_int() && a.region() == b.region() && a.strides() == b.strides();
}

// True when the float storage of tiles a and b shares a byte.
bool overlap(const Tensor& a, const Tensor& b) {
  if (a.is_int() || b.is_int()) return false;
  const float *a0 = a.f32(), *b0 = b.f32();
  return a0 < b0 + b.numel() && b0 < a0 + a.numel();
}

// The add at call k that reads the chain's last value `cur` point for point into the einsum's
// `region` (`like`: the tile the value was written to), and the index of its other input; -1
// when call k is not one.
int add_step(const BoundCall& c, ValueId cur, const Box& region, const Tensor& like) {
  const Op& op = *c.op;
  if (op.kind != OpKind::kAdd || op.inputs.size() != 2 || c.outs.size() != 1 ||
      op.space.has_reduce() || op.inputs[0].value == op.inputs[1].value)
    return -1;
  int at = op.inputs[0].value == cur ? 0 : op.inputs[1].value == cur ? 1 : -1;
  if (at < 0) return -1;
  const Operand& x = op.inputs[static_cast<size_t>(at)];
  const Operand& other = op.inputs[static_cast<size_t>(1 - at)];
  if (x.padded || other.padded || !(x.proj == op.results[0].proj) ||
      op.results[0].proj.image(c.box) != region ||
      !same_layout(*c.ins[static_cast<size_t>(at)], like) || !same_layout(*c.outs[0], like))
    return -1;
  const Tensor& t = *c.ins[static_cast<size_t>(1 - at)];
  if (t.is_int() || Access(t, other).window_size() != 1) return -1;
  return 1 - at;
}

// out = the sum of the addends, in call order, over the box of the adds (which share it and their
// result's projection): one pass, rows of contiguous addends as plain loops.
void sum_addends(const std::vector<BoundCall>& calls,
                 const std::vector<std::pair<size_t, int>>& adds, Tensor& out) {
  const BoundCall& first = calls[adds.front().first];
  const Box& box = first.box;
  const Access dst(out, first.op->results[0]);
  std::vector<Access> src;
  for (const auto& [k, in] : adds)
    src.emplace_back(*calls[k].ins[static_cast<size_t>(in)],
                     calls[k].op->inputs[static_cast<size_t>(in)]);
  const int64_t last = box.rank() - 1;
  auto step = [&](const Access& a) { return last >= 0 ? a.coef[static_cast<size_t>(last)] : 0; };
  bool unit = step(dst) == 1;
  for (const Access& a : src) unit = unit && step(a) == 1;
  float* o = out.f32();
  for_each_row(box, [&](const int64_t* p, int64_t n) {
    float* __restrict d = o + dst.offset(p);
    if (unit) {
      const float* __restrict s0 = src[0].fdata + src[0].offset(p);
      std::copy(s0, s0 + n, d);
      for (size_t q = 1; q < src.size(); ++q) {
        const float* __restrict s = src[q].fdata + src[q].offset(p);
        for (int64_t j = 0; j < n; ++j) d[j] += s[j];
      }
      return;
    }
    const int64_t ds = step(dst);
    for (int64_t j = 0; j < n; ++j) {
      float v = 0.0f;
      for (size_t q = 0; q < src.size(); ++q) {
        const float x = src[q].fdata[src[q].offset(p) + j * step(src[q])];
        v = q == 0 ? x : v + x;
      }
      d[j * ds] = v;
    }
  });
}

}  // namespace

bool run_einsum_epilogue(const std::vector<BoundCall>& calls, size_t i,
                         const std::vector<ValueId>& temporaries, const KernelOptions& o,
                         size_t* end, Status* status) {
  const BoundCall& mm = calls[i];
  const Op& op = *mm.op;
  if (o.reference || o.accumulate || op.kind != OpKind::kEinsum || op.results.size() != 1 ||
      mm.outs.size() != 1 || mm.outs[0]->is_int() || store_mode(op) != Store::kSum)
    return false;
  const Box region = op.results[0].proj.image(mm.box);
  if (mm.outs[0]->region() != region) return false;
  // The adds that follow, each reading the last one's value; all over one box and projection.
  std::vector<std::pair<size_t, int>> adds;  // call, index of its addend
  ValueId cur = op.results[0].value;
  for (size_t k = i + 1; k < calls.size(); ++k) {
    const int in = add_step(calls[k], cur, region, *mm.outs[0]);
    if (in < 0 || !(calls[k].box == calls[i + 1].box) ||
        !(calls[k].op->results[0].proj == calls[i + 1].op->results[0].proj))
      break;
    adds.emplace_back(k, in);
    cur = calls[k].op->results[0].value;
  }
  // The longest run whose values, but the last, are temporaries nobody reads after it.
  while (!adds.empty()) {
    const size_t j = adds.back().first + 1;
    bool ok = true;
    for (size_t q = i; q + 1 < j && ok; ++q) {
      const ValueId v = calls[q].op->results[0].value;
      ok = contains(temporaries, v) && !read_from(calls, v, j);
    }
    if (ok) break;
    adds.pop_back();
  }
  if (adds.empty()) return false;
  Tensor& out = *calls[adds.back().first].outs[0];
  // The product reads its operands after the addends are summed into `out`: none may share its
  // bytes.
  for (const Tensor* t : mm.ins)
    if (overlap(*t, out)) return false;
  for (const auto& [k, in] : adds)
    if (overlap(*calls[k].ins[static_cast<size_t>(in)], out)) return false;
  sum_addends(calls, adds, out);
  KernelOptions acc = o;
  acc.accumulate = true;
  *status = kernels::run(op, mm.box, mm.ins, {&out}, acc);
  *end = adds.back().first + 1;
  return true;
}

}  // namespace heddle::kdetail
