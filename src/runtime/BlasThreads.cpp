#include "heddle/runtime/BlasThreads.h"

#include <cblas.h>

namespace heddle {

SingleThreadedBlas::SingleThreadedBlas(int64_t devices) {
  if (devices <= 1) return;
  saved_ = openblas_get_num_threads();
  if (saved_ > 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (saved_ > 1) openblas_set_num_threads(saved_);
}

}  // namespace heddle
