// Shared by the ONNX tests: fixture paths and tolerant tensor comparison.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "heddle/ops/Tensor.h"

namespace heddle::testing {

/// `tests/data/<file>` in the source tree.
inline std::string fixture(const std::string& file) {
  return std::string(HEDDLE_SOURCE_DIR) + "/tests/data/" + file;
}

/// A model of opset 17 whose graph `graph_name` has one float input "x" of `shape` (the tests
/// that build their graphs node by node).
inline onnx::ModelProto model_with_input(const std::string& graph_name,
                                         const std::vector<int64_t>& shape) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(graph_name);
  auto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return m;
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
