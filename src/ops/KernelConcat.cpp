// Concatenation as row copies: each input tile, shifted into the result's coordinates, is copied
// into the box's part of the output with memcpy (rows merged over trailing dims both tensors hold
// whole), instead of reading every input at every point as the pointwise loop does.
#include <cstring>

#include "KernelConvForm.h"

namespace heddle::kdetail {

bool shifted_identity(const Operand& o, int64_t rank) {
  const AffineMap& m = o.proj.map();
  if (m.in_rank() != rank || m.out_rank() != rank) return false;
  for (int64_t d = 0; d < rank; ++d) {
    if (o.proj.window()[d] != 1) return false;
    for (int64_t k = 0; k < rank; ++k)
      if (m.at(d, k) != (d == k ? 1 : 0)) return false;
  }
  return true;
}

namespace {

// Copies region `b` (the destination's coordinates) from `src`, which holds it at b + shift.
void copy_shifted(Tensor& dst, const Tensor& src, const Box& b, const std::vector<int64_t>& shift) {
  const int64_t r = b.rank();
  const std::vector<int64_t>&start = b.start().values(), &end = b.end().values();
  const std::vector<int64_t>&dorg = dst.origin().values(), &sorg = src.origin().values();
  const std::vector<int64_t>&dsh = dst.shape().values(), &ssh = src.shape().values();
  const auto &dst_st = dst.strides(), &src_st = src.strides();
  int64_t inner = r - 1, n = end[r - 1] - start[r - 1];
  while (inner > 0) {
    int64_t e = end[inner] - start[inner];
    if (e != dsh[inner] || e != ssh[inner]) break;
    --inner;
    n *= end[inner] - start[inner];
  }
  float* dp = dst.f32();
  const float* sp = src.f32();
  std::vector<int64_t> p(start);
  while (true) {
    int64_t od = 0, os = 0;
    for (int64_t d = 0; d < r; ++d) {
      od += dst_st[d] * (p[d] - dorg[d]);
      os += src_st[d] * (p[d] + shift[d] - sorg[d]);
    }
    std::memcpy(dp + od, sp + os, sizeof(float) * static_cast<size_t>(n));
    int64_t d = inner - 1;
    for (; d >= 0; --d) {
      if (++p[d] < end[d]) break;
      p[d] = start[d];
    }
    if (d < 0) return;
  }
}

}  // namespace

bool run_concat_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs) {
  const int64_t r = box.rank();
  if (r == 0 || outs.size() != 1 || outs[0]->is_int() || outs[0]->rank() != r) return false;
  if (!shifted_identity(op.results[0], r) || op.results[0].proj.map().offset() != IVec::zeros(r))
    return false;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i]->is_int() || ins[i]->rank() != r || !shifted_identity(op.inputs[i], r)) return false;
  // Each input covers its slab of the box, clipped to its tile (outside reads as zero).
  std::vector<Box> parts(ins.size());
  int64_t covered = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const IVec& off = op.inputs[i].proj.map().offset();
    parts[i] = ins[i]->region().translate(IVec::zeros(r) - off).intersect(box);
    if (!parts[i].empty()) covered += parts[i].volume();
  }
  if (covered != box.volume()) {  // gaps read as zero
    Tensor z = Tensor::tile(outs[0]->dtype(), box);
    outs[0]->copy_from(z);
  }
  for (size_t i = 0; i < ins.size(); ++i)
    if (!parts[i].empty())
      copy_shifted(*outs[0], *ins[i], parts[i], op.inputs[i].proj.map().offset().values());
  return true;
}

}  // namespace heddle::kdetail
