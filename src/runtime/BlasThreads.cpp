#include "heddle/runtime/BlasThreads.h"

#include <cblas.h>

#include "heddle/ops/Kernel.h"

namespace heddle {

BlasThreads::BlasThreads(int threads) {
  if (threads < 1) return;
  int now = openblas_get_num_threads();
  if (now == threads) return;
  saved_ = now;
  openblas_set_num_threads(threads);
}

BlasThreads::~BlasThreads() {
  if (saved_ > 0) openblas_set_num_threads(saved_);
}

int device_blas_threads(int threads) { return kernels::onednn_sgemm_first() ? threads : 1; }

int blas_threads() { return openblas_get_num_threads(); }

}  // namespace heddle
