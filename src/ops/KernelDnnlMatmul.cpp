// A row-major single-precision product through oneDNN's matmul primitive (its batch-reduce gemm
// kernels) on the operands in place, as opposed to dnnl_sgemm (its older packed gemm), optionally
// with a per-column bias added in the primitive's epilogue (a linear layer's, while C's block is in
// cache). One primitive per shape, strides, beta and bias, created on a thread's first product of
// that shape and kept (up to kMaxCached): a training step runs the same few shapes every step.
#include <array>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "KernelDnnlReorder.h"  // dnnl_engine, dnnl_stream
#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using dnnl::memory;
using MDims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

struct Matmul {
  dnnl::matmul prim;
  memory::desc a, b, c, bias;
};

// ta, tb, m, n, k, lda, ldb, ldc, accumulate, bias (0 or 1).
using Key = std::array<int64_t, 10>;

// The most primitives a thread keeps: a training step runs a few shapes, but a sweep over
// random boxes (the kernel tests) would otherwise keep one per box.
constexpr size_t kMaxCached = 64;

const Matmul& matmul_for(const Key& key) {
  thread_local std::map<Key, Matmul> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxCached) cache.clear();
  const auto [ta, tb, m, n, k, lda, ldb, ldc, acc, bias] = key;
  Matmul mm;
  mm.a = memory::desc({m, k}, kF32, ta ? MDims{1, lda} : MDims{lda, 1});
  mm.b = memory::desc({k, n}, kF32, tb ? MDims{1, ldb} : MDims{ldb, 1});
  mm.c = memory::desc({m, n}, kF32, MDims{ldc, 1});
  dnnl::primitive_attr attr;
  if (acc != 0) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  if (bias != 0) mm.bias = memory::desc({1, n}, kF32, MDims{n, 1});
  auto desc = bias != 0 ? dnnl::matmul::desc(mm.a, mm.b, mm.bias, mm.c)
                        : dnnl::matmul::desc(mm.a, mm.b, mm.c);
  mm.prim = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, dnnl_engine()));
  return cache.emplace(key, std::move(mm)).first->second;
}

}  // namespace

bool matmul_sgemm_bias(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, const float* bias,
                       float* c, int64_t ldc) {
  if (beta != 0.0f && beta != 1.0f) return false;
  if (m <= 0 || n <= 0 || k <= 0) return false;
  const Matmul* mm = nullptr;
  try {
    mm = &matmul_for({ta, tb, m, n, k, lda, ldb, ldc, beta == 1.0f, bias != nullptr});
  } catch (const dnnl::error&) {
    return false;  // a shape or strides the primitive refuses: the caller's other kernel runs
  }
  dnnl::stream& s = dnnl_stream();
  dnnl::engine& e = dnnl_engine();
  auto mem = [&](const memory::desc& d, const float* p) {
    return memory(d, e, const_cast<float*>(p));
  };
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, mem(mm->a, a)},
                                          {DNNL_ARG_WEIGHTS, mem(mm->b, b)},
                                          {DNNL_ARG_DST, mem(mm->c, c)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, mem(mm->bias, bias));
  mm->prim.execute(s, args);
  s.wait();
  return true;
}

bool matmul_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return matmul_sgemm_bias(ta, tb, m, n, k, a, lda, b, ldb, beta, nullptr, c, ldc);
}

}  // namespace heddle::kdetail
