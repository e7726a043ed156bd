// One thread's sgemm entries on the linear products of the GPT training step (gpt-tiny l=2 h=256
// s=128 b=8: 1024 tokens, the q/k/v/o projections, the MLP and their input and weight gradients;
// docs/benchmarks.md, 2026-11-27 branch gemm): oneDNN's dnnl_sgemm (what the contraction kernel
// calls), a dnnl::matmul primitive on the same strided operands, one whose B was reordered once
// into the layout the primitive prefers (its time leaves that reorder out: a trained weight is
// new every step), OpenBLAS, and heddle's own packed AVX2 sgemm (src/ops/KernelGemm.cpp, what the
// contraction kernel calls for these products on AVX2-only hosts). Prints process CPU microseconds
// per call (median of rounds, so that a loaded machine's descheduled time does not count) and
// GFLOP/s. Not part of the build; compile by hand from the repository root:
//   g++ -O2 -std=c++20 -fopenmp -Iinclude -Isrc/ops bench/sgemm_entries.cpp src/ops/KernelGemm.cpp
//       src/support/HugePages.cpp -o /tmp/sgemm_entries $(pkg-config --cflags --libs openblas)
//       -ldnnl
//   taskset -c 0 /tmp/sgemm_entries [rounds] [vit|causal|bias]
// `causal` times one head of GPT's causal attention products whose depth the mask narrows (128
// queries and keys, 64 wide; the strided q/k/v/o of 4 heads) two ways: 32-row blocks through
// oneDNN's sgemm, each over its visible depths (the kernel's way before packed_sgemm_causal, and
// still on hosts without AVX2 and FMA), and packed_sgemm_causal, which narrows by register tile.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <string>
#include <vector>

#include "KernelUtil.h"  // heddle::kdetail::packed_sgemm (src/ops)

namespace {

struct Shape {
  const char* what;
  bool ta, tb;
  int64_t m, n, k;
};

// Forward x W (NN), input gradient dy W^T (NT), weight gradient x^T dy (TN).
const Shape kShapes[] = {
    {"q/k/v/o forward", false, false, 1024, 256, 256},
    {"q/k/v/o dx", false, true, 1024, 256, 256},
    {"q/k/v/o dW", true, false, 256, 256, 1024},
    {"mlp.fc forward", false, false, 1024, 1024, 256},
    {"mlp.fc dx", false, true, 1024, 256, 1024},
    {"mlp.fc dW", true, false, 256, 1024, 1024},
    {"mlp.proj forward", false, false, 1024, 256, 1024},
    {"mlp.proj dx", false, true, 1024, 1024, 256},
    {"mlp.proj dW", true, false, 1024, 256, 1024},
};

// vit_b_32 forward (2x3x224x224: 100 tokens, hidden 768, MLP 3072; the ONNX export's fused q/k/v
// projection and its transposed out projection), its MLP's input and weight gradients (dy W^T,
// x^T dy: on AVX-512 hosts the contraction kernel takes these to oneDNN's matmul primitive and
// to heddle's packed sgemm, sgemm1 in src/ops/KernelContraction.cpp), and GPT's causal attention
// blocks (32-row blocks of the 128x128x64 heads: scores q k^T, context p v).
const Shape kVitShapes[] = {
    {"vit qkv", false, false, 100, 2304, 768},
    {"vit out proj", false, true, 100, 768, 768},
    {"vit mlp.fc", false, false, 100, 3072, 768},
    {"vit mlp.proj", false, false, 100, 768, 3072},
    {"vit mlp.fc dx", false, true, 100, 768, 3072},
    {"vit mlp.fc dW", true, false, 768, 3072, 100},
    {"vit mlp.proj dx", false, true, 100, 3072, 768},
    {"vit mlp.proj dW", true, false, 3072, 768, 100},
    {"gpt scores blk", false, true, 32, 128, 64},
    {"gpt scores blk", false, true, 128, 32, 64},
    {"gpt ctx blk", false, false, 32, 64, 128},
    {"gpt ctx dP blk", false, true, 32, 128, 64},
    {"gpt ctx dV blk", true, false, 32, 64, 128},
    {"gpt head 128", false, true, 128, 128, 64},
};

// The process's CPU seconds (the scheduler's clock: exact where getrusage counts ticks).
double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU seconds per call of f: the median over `rounds` rounds of `reps` calls, after two warm-ups.
double per_call(const std::function<void()>& f, int rounds, int reps) {
  f();
  f();
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = cpu_s();
    for (int i = 0; i < reps; ++i) f();
    t.push_back((cpu_s() - t0) / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

namespace {

// One of attention's products on one head and the depths a causal mask leaves visible (as the
// contraction kernel's plan gives them).
struct CausalShape {
  const char* what;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  heddle::kdetail::CausalTiles vis;
};

// The visible depths of `vis` for the 32-row block [u0, u1) (the union of its rows' ranges).
std::pair<int64_t, int64_t> block_range(const heddle::kdetail::CausalTiles& vis, int64_t u0,
                                        int64_t u1, int64_t k) {
  if (vis.prefix) return {0, std::clamp<int64_t>(u1 - 1 + vis.d, 0, k)};
  return {std::clamp<int64_t>(u0 + vis.d, 0, k), k};
}

int causal_main(int rounds) {
  using heddle::kdetail::CausalTiles;
  constexpr int64_t S = 128, D = 64, H = 256;  // sequence, head width, 4 heads' row
  // P V and dQ = dS K (depth = keys, a prefix per query row), dV = P^T dO and dK = dS^T Q
  // (depth = queries, a suffix per key row).
  const CausalShape shapes[] = {
      {"ctx p v", false, false, S, D, S, S, H, H, CausalTiles{true, true, 1}},
      {"dV p^T dO", true, false, S, D, S, S, H, H, CausalTiles{true, false, 0}},
      {"dQ dS k", false, false, S, D, S, S, H, H, CausalTiles{true, true, 1}},
      {"dK dS^T q", true, false, S, D, S, S, H, H, CausalTiles{true, false, 0}},
  };

  std::printf("%-13s %-2s %4s %4s %4s | us per call: %-18s %-18s ratio\n", "product", "", "m", "n",
              "k", "32-blocks, oneDNN", "packed, by tile");
  for (const CausalShape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(S * H)), b(static_cast<size_t>(S * H)),
        c(static_cast<size_t>(S * H));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 89) / 89.0f - 0.5f;
    auto at = [](const float* p, bool t, int64_t ld, int64_t i, int64_t j) {
      return p + (t ? j * ld + i : i * ld + j);
    };
    auto blocks = [&] {
      for (int64_t i0 = 0; i0 < s.m; i0 += 32) {
        const int64_t i1 = std::min(s.m, i0 + 32);
        const auto [k0, k1] = block_range(s.vis, i0, i1, s.k);
        if (k1 <= k0) continue;
        dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', i1 - i0, s.n, k1 - k0, 1.0f,
                   at(a.data(), s.ta, s.lda, i0, k0), s.lda, at(b.data(), s.tb, s.ldb, k0, 0),
                   s.ldb, 0.0f, c.data() + i0 * s.ldc, s.ldc);
      }
    };

    const auto packed = [&] {
      heddle::kdetail::packed_sgemm_causal(s.ta, s.tb, s.m, s.n, s.k, a.data(), s.lda, b.data(),
                                           s.ldb, 0.0f, c.data(), s.ldc, s.vis);
    };
    // The two kernels alternate round by round (the fastest round of each counts), so that a
    // slower spell of a shared host weighs on both.
    double t_old = 1e30, t_new = 1e30;
    for (int r = 0; r < rounds; ++r) {
      t_old = std::min(t_old, per_call(blocks, 1, 200));
      t_new = std::min(t_new, per_call(packed, 1, 200));
    }
    std::printf("%-13s %c%c %4ld %4ld %4ld |   %8.1f           %8.1f           %.2f\n", s.what,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', static_cast<long>(s.m), static_cast<long>(s.n),
                static_cast<long>(s.k), t_old * 1e6, t_new * 1e6, t_new / t_old);
  }
  return 0;
}

// `bias`: GPT's forward products with their bias (x W + b), two ways: oneDNN's sgemm and then a
// pass adding b to every row of C (the fused chain's way before run_product_bias), and oneDNN's
// matmul primitive with b as its bias argument, added in its epilogue (run_product_bias,
// src/ops/KernelProductBias.cpp, for depths up to 256).
int bias_main(int rounds) {
  using dnnl::memory;
  using Dims = memory::dims;
  constexpr auto kF32 = memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("%-17s %5s %5s %5s | us per call: %-15s %-15s ratio\n", "product", "m", "n", "k",
              "sgemm + pass", "matmul + bias");
  for (const Shape& s : kShapes) {
    if (s.ta || s.tb) continue;  // the forward products
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n)), bias(static_cast<size_t>(s.n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 89) / 89.0f - 0.5f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) / 7.0f;
    const memory::desc ad({s.m, s.k}, kF32, Dims{s.k, 1}), bd({s.k, s.n}, kF32, Dims{s.n, 1}),
        cd({s.m, s.n}, kF32, Dims{s.n, 1}), biasd({1, s.n}, kF32, Dims{s.n, 1});
    dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, biasd, cd), eng));
    memory am(ad, eng, a.data()), bm(bd, eng, b.data()), cm(cd, eng, c.data()),
        biasm(biasd, eng, bias.data());
    const auto pass = [&] {
      dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n);
      for (int64_t i = 0; i < s.m; ++i) {
        float* ci = c.data() + i * s.n;
        for (int64_t j = 0; j < s.n; ++j) ci[j] += bias[static_cast<size_t>(j)];
      }
    };
    const auto fused = [&] {
      mm.execute(
          st,
          {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}});
      st.wait();
    };
    // Alternating round by round, the fastest round of each counting.
    double t_pass = 1e30, t_fused = 1e30;
    for (int r = 0; r < rounds; ++r) {
      t_pass = std::min(t_pass, per_call(pass, 1, 20));
      t_fused = std::min(t_fused, per_call(fused, 1, 20));
    }
    std::printf("%-17s %5ld %5ld %5ld |   %8.0f        %8.0f        %.2f\n", s.what,
                static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k),
                t_pass * 1e6, t_fused * 1e6, t_fused / t_pass);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
  omp_set_num_threads(1);
  if (argc > 2 && std::string(argv[2]) == "causal") return causal_main(rounds);
  if (argc > 2 && std::string(argv[2]) == "bias") return bias_main(rounds);
  // A second argument "vit" measures kVitShapes instead of the GPT step's linear products.
  const bool vit = argc > 2 && std::string(argv[2]) == "vit";
  openblas_set_num_threads(1);
  using dnnl::memory;
  using Dims = memory::dims;
  constexpr auto kF32 = memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("%-17s %-2s %5s %5s %5s | us per call (GFLOP/s): %-13s %-13s %-13s %-13s %-13s\n",
              "product", "", "m", "n", "k", "dnnl_sgemm", "matmul", "matmul+packB", "OpenBLAS",
              "heddle packed");
  for (const Shape& s :
       vit ? std::span<const Shape>(kVitShapes) : std::span<const Shape>(kShapes)) {
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n, ldc = s.n;
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 89) / 89.0f - 0.5f;
    const memory::desc ad({s.m, s.k}, kF32, s.ta ? Dims{1, lda} : Dims{lda, 1}),
        bd({s.k, s.n}, kF32, s.tb ? Dims{1, ldb} : Dims{ldb, 1}),
        cd({s.m, s.n}, kF32, Dims{ldc, 1}), bany({s.k, s.n}, kF32, memory::format_tag::any);
    memory am(ad, eng, a.data()), bm(bd, eng, b.data()), cm(cd, eng, c.data());
    dnnl::matmul::primitive_desc plain(dnnl::matmul::desc(ad, bd, cd), eng),
        packed(dnnl::matmul::desc(ad, bany, cd), eng);
    dnnl::matmul mm_plain(plain), mm_packed(packed);
    memory bp(packed.weights_desc(), eng);
    dnnl::reorder(bm, bp).execute(st, bm, bp);
    st.wait();
    const int reps = std::max<int64_t>(1, 400'000'000 / (s.m * s.n * s.k));
    const double t[5] = {
        per_call(
            [&] {
              dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda,
                         b.data(), ldb, 0.0f, c.data(), ldc);
            },
            rounds, reps),
        per_call(
            [&] {
              mm_plain.execute(st,
                               {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
              st.wait();
            },
            rounds, reps),
        per_call(
            [&] {
              mm_packed.execute(st,
                                {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bp}, {DNNL_ARG_DST, cm}});
              st.wait();
            },
            rounds, reps),
        per_call(
            [&] {
              cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
                          s.tb ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
                          static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a.data(),
                          static_cast<int>(lda), b.data(), static_cast<int>(ldb), 0.0f, c.data(),
                          static_cast<int>(ldc));
            },
            rounds, reps),
        per_call(
            [&] {
              heddle::kdetail::packed_sgemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb,
                                            0.0f, c.data(), ldc);
            },
            rounds, reps),
    };
    std::printf("%-17s %c%c %5ld %5ld %5ld |", s.what, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k));
    for (double x : t)
      std::printf("  %6.0f (%5.1f)", x * 1e6, 2.0 * static_cast<double>(s.m * s.n * s.k) / x / 1e9);
    std::printf("\n");
  }
  return 0;
}
