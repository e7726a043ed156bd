#include "heddle/ops/TileInit.h"

#include <cmath>
#include <random>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

// FNV-1a: a hash that is the same on every platform and build.
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
bool starts_with(const std::string& s, const std::string& t) { return s.rfind(t, 0) == 0; }

// Fills tile `t` (a box of a tensor of `shape`) from a sequential stream: the whole tensor would
// take draw() once per element in row-major order, so elements outside the tile are drawn and
// dropped. Walks the tile's rows in order, so global indices only increase.
template <class Store, class Draw>
void fill_from_stream(Tensor& t, const IVec& shape, Store store, Draw draw) {
  if (t.numel() == 0) return;
  const Box b = t.region();
  const int64_t r = b.rank();
  if (r == 0) {
    store(0, draw());
    return;
  }
  std::vector<int64_t> gstride(static_cast<size_t>(r), 1);
  for (int64_t d = r - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * shape[d + 1];
  const int64_t row = b.shape()[r - 1];
  std::vector<int64_t> p(b.start().begin(), b.start().end());
  int64_t next = 0;  // global index of the next element the stream yields
  int64_t local = 0;
  for (;;) {
    int64_t g = 0;
    for (int64_t d = 0; d < r; ++d) g += gstride[d] * p[d];
    for (; next < g; ++next) (void)draw();
    for (int64_t k = 0; k < row; ++k, ++next) store(local++, draw());
    int64_t d = r - 2;
    for (; d >= 0; --d) {
      if (++p[d] < b.end()[d]) break;
      p[d] = b.start()[d];
    }
    if (d < 0) return;
  }
}

}  // namespace

Tensor init_param_tile(const std::string& name, const TensorType& type, uint64_t seed,
                       const Box& box) {
  HEDDLE_ASSERT(Box::of_shape(type.shape()).contains(box))
      << name << ": tile " << box.to_string() << " outside " << type.to_string();
  Tensor t = Tensor::tile(type.dtype(), box);
  if (t.is_int()) return t;
  if (name.find("gamma") != std::string::npos || ends_with(name, ".g")) {
    t.fill(1.0);
    return t;
  }
  bool zero = name.find("beta") != std::string::npos || name.find("bias") != std::string::npos ||
              ends_with(name, ".b") || starts_with(name, "m.") || starts_with(name, "v.") ||
              starts_with(name, "vel.") || type.rank() <= 1;
  if (zero) return t;
  const IVec& s = type.shape();
  double fan_in = s.size() == 4 ? static_cast<double>(s[1] * s[2] * s[3])
                                : static_cast<double>(s.product() / s[s.size() - 1]);
  double bound = 1.0 / std::sqrt(std::max(fan_in, 1.0));
  std::mt19937_64 rng(seed ^ stable_hash(name));
  std::uniform_real_distribution<double> d(-bound, bound);
  float* f = t.f32();
  fill_from_stream(
      t, s, [f](int64_t i, double v) { f[i] = static_cast<float>(v); }, [&] { return d(rng); });
  return t;
}

Tensor random_input_tile(const std::string& name, const TensorType& type, uint64_t seed,
                         int64_t int_hi, const Box& box) {
  HEDDLE_ASSERT(Box::of_shape(type.shape()).contains(box))
      << name << ": tile " << box.to_string() << " outside " << type.to_string();
  std::mt19937_64 rng(seed ^ stable_hash(name));
  Tensor t = Tensor::tile(type.dtype(), box);
  if (t.is_int()) {
    int64_t hi = t.dtype() == DType::kBool ? 2 : int_hi;
    HEDDLE_ASSERT(hi >= 1) << name << ": integer range " << hi;
    std::uniform_int_distribution<int64_t> d(0, hi - 1);
    int64_t* p = t.i64();
    fill_from_stream(
        t, type.shape(), [p](int64_t i, int64_t v) { p[i] = v; }, [&] { return d(rng); });
  } else {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    float* f = t.f32();
    fill_from_stream(
        t, type.shape(), [f](int64_t i, double v) { f[i] = static_cast<float>(v); },
        [&] { return d(rng); });
  }
  return t;
}

}  // namespace heddle
