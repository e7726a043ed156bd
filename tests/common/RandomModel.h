// Random models built with the op library's builders, so every op has the form its kernel
// computes: contractions, broadcasting, reductions, normalizations, softmax, reshapes,
// transposes, slices, concatenation, and strided padded convolutions and pooling with halos.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "heddle/ops/Ops.h"

namespace heddle::testing {

/// A random model of about `steps` ops with seed `seed`; always passes verify().
inline Graph random_model(int64_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t dims[] = {2, 4, 6, 8, 12};
  auto dim = [&] { return dims[pick(0, 4)]; };
  Graph g("model_" + std::to_string(seed));
  Ops ops(g);
  auto f32 = [](std::vector<int64_t> s) { return TensorType(DType::kF32, IVec(std::move(s))); };
  std::vector<ValueId> pool;  // rank-2 values
  int64_t params = 0;
  auto param = [&](std::vector<int64_t> s) {
    return ops.param("p" + std::to_string(params++), f32(std::move(s)));
  };
  pool.push_back(ops.input("x", f32({dim(), dim()})));
  if (pick(0, 2) == 0) {  // a convolutional stem joining the pool after global pooling
    int64_t c = pick(1, 3), hw = 4 * pick(2, 4);
    ValueId img = ops.input("img", f32({2, c, hw, hw}));
    Conv2dOptions co;
    int64_t s = pick(1, 2), k = 2 * pick(0, 1) + 1;
    co.stride = {s, s};
    co.padding = {k / 2, k / 2};
    ValueId y = ops.relu(ops.conv2d(img, param({4, c, k, k}), co));
    if (pick(0, 1)) {
      Pool2dOptions po;
      po.kernel = {3, 3};
      po.stride = {2, 2};
      po.padding = {1, 1};
      y = ops.maxpool2d(y, po);
    }
    pool.push_back(ops.global_avgpool(y));
  }
  for (int64_t k = 0; k < steps; ++k) {
    ValueId a =
        pool[static_cast<size_t>(pick(std::max<int64_t>(0, static_cast<int64_t>(pool.size()) - 3),
                                      static_cast<int64_t>(pool.size()) - 1))];
    int64_t m = ops.shape(a)[0], n = ops.shape(a)[1];
    ValueId r = kNoValue;
    switch (pick(0, 11)) {
      case 0:
      case 1:
        r = ops.linear(a, param({n, dim()}));
        break;
      case 2:
        r = ops.add(a, param({n}));
        break;
      case 3: {
        const char* acts[] = {"relu", "gelu", "tanh", "silu"};
        r = ops.activation(acts[pick(0, 3)], a);
        break;
      }
      case 4: {
        ValueId b = pool[static_cast<size_t>(pick(0, static_cast<int64_t>(pool.size()) - 1))];
        r = ops.shape(b) == ops.shape(a) ? ops.mul(a, b) : ops.sub(a, param({m, 1}));
        break;
      }
      case 5:
        r = ops.transpose(a, {1, 0});
        break;
      case 6:
        r = ops.softmax(a, pick(0, 1));
        break;
      case 7:
        r = ops.sub(a, ops.reduce(OpKind::kReduceMean, a, {1}, true));
        break;
      case 8:
        r = ops.layernorm(a, param({n}), param({n}));
        break;
      case 9:
        r = ops.reshape(ops.reshape(a, {m * n}), {n, m});
        break;
      case 10:
        r = ops.concat({a, ops.slice(a, {0, 0}, {m, n / 2})}, 1);
        break;
      default:
        r = ops.rmsnorm(a, param({n}));
        break;
    }
    pool.push_back(r);
  }
  ops.output(pool.back());
  return g;
}

}  // namespace heddle::testing
