// sgemm on 2 threads, four ways, on the GPT training step's shapes (docs/benchmarks.md,
// 2026-11-26 branch perf3): OpenBLAS's own pool, oneDNN on OpenMP (set OMP_WAIT_POLICY to compare
// waits), blocks on heddle's pool (support/ThreadPool.h) each a one-thread oneDNN sgemm, and one
// thread. Prints wall and process CPU milliseconds per round (median of rounds). Not part of the
// build; compile by hand from the repository root:
//   g++ -O2 -std=c++20 -fopenmp -Iinclude bench/sgemm_threads.cpp src/support/ThreadPool.cpp \
//       src/support/Assert.cpp -o /tmp/sgemm_threads $(pkg-config --cflags --libs openblas) \
//       -ldnnl -lfmt
//   taskset -c 0,1 /tmp/sgemm_threads
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "heddle/support/ThreadPool.h"

namespace {

struct Shape {
  int64_t batch, m, n, k;
  bool ta, tb;
};

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void dnnl1(const Shape& s, const float* a, const float* b, float* c, int64_t m0, int64_t m1) {
  omp_set_num_threads(1);
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', m1 - m0, s.n, s.k, 1.0f,
             a + (s.ta ? m0 : m0 * lda), lda, b, ldb, 0.0f, c + m0 * s.n, s.n);
}

// One round: every batch point of `s`, by `how`.
void run(const char* how, const Shape& s, const std::vector<float>& A, const std::vector<float>& B,
         std::vector<float>& C) {
  const int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  if (!std::strcmp(how, "pool2")) {
    if (s.batch >= 2) {
      heddle::parallel_for(2, 2, [&](int64_t h) {
        for (int64_t p = s.batch * h / 2; p < s.batch * (h + 1) / 2; ++p)
          dnnl1(s, A.data() + p * sa, B.data() + p * sb, C.data() + p * sc, 0, s.m);
      });
    } else {
      heddle::parallel_for(2, 2, [&](int64_t h) {
        dnnl1(s, A.data(), B.data(), C.data(), s.m * h / 2 / 8 * 8, h ? s.m : s.m / 2 / 8 * 8);
      });
    }
    return;
  }
  for (int64_t p = 0; p < s.batch; ++p) {
    const float *a = A.data() + p * sa, *b = B.data() + p * sb;
    float* c = C.data() + p * sc;
    if (!std::strcmp(how, "openblas2")) {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a,
                  static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(s.n));
    } else if (!std::strcmp(how, "dnnl_omp2")) {
      omp_set_num_threads(2);
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, lda, b, ldb, 0.0f, c,
                 s.n);
    } else {
      dnnl1(s, a, b, c, 0, s.m);
    }
  }
}

}  // namespace

int main() {
  openblas_set_num_threads(2);
  const Shape shapes[] = {{1, 1024, 256, 256, false, false},  {1, 1024, 1024, 256, false, false},
                          {1, 1024, 256, 1024, false, false}, {1, 256, 256, 1024, true, false},
                          {1, 1024, 256, 256, false, true},   {32, 128, 128, 64, false, true}};
  const char* hows[] = {"openblas2", "dnnl_omp2", "pool2", "dnnl1"};
  std::printf("%-24s %-10s %10s %10s %8s\n", "shape (batch m n k)", "how", "wall ms", "cpu ms",
              "GFLOP/s");
  for (const Shape& s : shapes) {
    std::vector<float> A(s.batch * s.m * s.k, 0.5f), B(s.batch * s.k * s.n, 0.25f),
        C(s.batch * s.m * s.n);
    const double flop = 2.0 * s.batch * s.m * s.n * s.k;
    const int reps = std::max<int>(1, static_cast<int>(2e9 / flop));  // about 2 GFLOP per round
    for (const char* how : hows) {
      std::vector<double> wall, cpu;
      for (int round = 0; round < 5; ++round) {
        double c0 = cpu_s();
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) run(how, s, A, B, C);
        wall.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        cpu.push_back(cpu_s() - c0);
      }
      std::sort(wall.begin(), wall.end());
      std::sort(cpu.begin(), cpu.end());
      char name[64];
      std::snprintf(name, sizeof(name), "%ldx %ldx%ldx%ld%s", static_cast<long>(s.batch),
                    static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k),
                    s.ta   ? " TN"
                    : s.tb ? " NT"
                           : "");
      std::printf("%-24s %-10s %10.1f %10.1f %8.1f\n", name, how, 1e3 * wall[2], 1e3 * cpu[2],
                  flop * reps / wall[2] / 1e9);
    }
  }
}
