// A row-major single-precision product through oneDNN's matmul primitive (its batch-reduce gemm
// kernels) on the operands in place, as opposed to dnnl_sgemm (its older packed gemm). One
// primitive per shape, strides and beta, created on a thread's first product of that shape and
// kept (up to kMaxCached): a training step runs the same few shapes every step.
#include <array>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "KernelDnnlReorder.h"  // dnnl_engine, dnnl_stream
#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using dnnl::memory;
using MDims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

struct Matmul {
  dnnl::matmul prim;
  memory::desc a, b, c;
};

// ta, tb, m, n, k, lda, ldb, ldc, accumulate.
using Key = std::array<int64_t, 9>;

// The most primitives a thread keeps: a training step runs a few shapes, but a sweep over
// random boxes (the kernel tests) would otherwise keep one per box.
constexpr size_t kMaxCached = 64;

const Matmul& matmul_for(const Key& key) {
  thread_local std::map<Key, Matmul> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxCached) cache.clear();
  const auto [ta, tb, m, n, k, lda, ldb, ldc, acc] = key;
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
  mm.prim = dnnl::matmul(
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(mm.a, mm.b, mm.c), attr, dnnl_engine()));
  return cache.emplace(key, std::move(mm)).first->second;
}

}  // namespace

bool matmul_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (beta != 0.0f && beta != 1.0f) return false;
  if (m <= 0 || n <= 0 || k <= 0) return false;
  const Matmul* mm = nullptr;
  try {
    mm = &matmul_for({ta, tb, m, n, k, lda, ldb, ldc, beta == 1.0f});
  } catch (const dnnl::error&) {
    return false;  // a shape or strides the primitive refuses: the caller's other kernel runs
  }
  dnnl::stream& s = dnnl_stream();
  dnnl::engine& e = dnnl_engine();
  memory am(mm->a, e, const_cast<float*>(a)), bm(mm->b, e, const_cast<float*>(b)), cm(mm->c, e, c);
  mm->prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
  return true;
}

}  // namespace heddle::kdetail
