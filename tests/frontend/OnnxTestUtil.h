// Shared by the ONNX tests: fixture paths and tolerant tensor comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "heddle/ops/Tensor.h"

namespace heddle::testing {

/// `tests/data/<file>` in the source tree.
inline std::string fixture(const std::string& file) {
  return std::string(HEDDLE_SOURCE_DIR) + "/tests/data/" + file;
}

/// Every element within atol + rtol * |want| (the torch fixtures: rtol 1e-4).
inline void expect_close(const Tensor& got, const Tensor& want, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  int bad = 0;
  for (int64_t i = 0; i < want.numel() && bad < 5; ++i) {
    double a = got.f32()[i], b = want.f32()[i];
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      ADD_FAILURE() << "element " << i << ": got " << a << ", torch " << b;
      ++bad;
    }
  }
}

}  // namespace heddle::testing
