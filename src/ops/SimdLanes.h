// The lane arithmetic of the activation loops (Simd.cpp, SimdWide.cpp): loads and stores of a
// zero-padded tail, lane selects and clamps, fast_exp, fast_erf and the activations and their
// derivatives, and the loops over a row. Written for the vector types `vf` (kLanes floats) and
// `vi` (as many int32) that the including file defines in an anonymous namespace before including
// this one there, so each file compiles them at its own width and for its own targets. The helpers
// take and give vectors by reference (a vector by value has a different ABI per target) and are
// always inlined into the loops that use them.
#pragma once

#define HEDDLE_LANES [[gnu::always_inline]] inline
// A lambda body inlined into the (cloned) loop that calls it.
#define HEDDLE_LAMBDA __attribute__((always_inline))

// 1 where the including files compile loops for several targets (target_clones, target): GCC on
// x86-64, but not under ThreadSanitizer, where a clone's ifunc resolver runs while the dynamic
// loader relocates, before TSan's runtime is up, and its instrumented entry crashes the process
// at start-up.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define HEDDLE_MULTIVERSION 1
#else
#define HEDDLE_MULTIVERSION 0
#endif

HEDDLE_LANES void splat(vf& v, float s) { v = vf{} + s; }

// A vector at any float's alignment: full loads and stores go straight through it, not through a
// copy on the stack.
typedef vf __attribute__((aligned(4))) vf_unaligned;

// m (<= kLanes) elements from p; the other lanes 0.
HEDDLE_LANES void load(vf& v, const float* p, int64_t m) {
  if (m == kLanes) {
    v = *reinterpret_cast<const vf_unaligned*>(p);
    return;
  }
  v = vf{};
  std::memcpy(&v, p, static_cast<size_t>(m) * sizeof(float));
}

HEDDLE_LANES void store(float* p, const vf& v, int64_t m) {
  if (m == kLanes) {
    *reinterpret_cast<vf_unaligned*>(p) = v;
    return;
  }
  std::memcpy(p, &v, static_cast<size_t>(m) * sizeof(float));
}

// The same bytes seen as the other lane type (memcpy: no by-value vector crosses a call).
HEDDLE_LANES void as_bits(vi& out, const vf& v) { std::memcpy(&out, &v, sizeof out); }
HEDDLE_LANES void as_floats(vf& out, const vi& v) { std::memcpy(&out, &v, sizeof out); }

// Lanes of `a` where the mask is set, else of `b`.
HEDDLE_LANES void select(vf& out, const vi& mask, const vf& a, const vf& b) {
  vi ai, bi;
  as_bits(ai, a);
  as_bits(bi, b);
  as_floats(out, (ai & mask) | (bi & ~mask));
}

// x clamped to [lo, hi] as std::min(std::max(x, lo), hi) does (a NaN stays NaN): a max and a min
// instruction where the target has them.
HEDDLE_LANES void clamp(vf& x, float lo, float hi) {
  vf l, h;
  splat(l, lo);
  splat(h, hi);
  x = x < l ? l : x;
  x = h < x ? h : x;
}

// x = fast_exp(x) (Scalar.h), lane by lane.
HEDDLE_LANES void vexp(vf& x) {
  clamp(x, -87.3f, 88.3f);
  constexpr float kShift = 12582912.0f;
  vf t = x * 1.44269504088896341f + kShift;
  vi n;
  as_bits(n, t);
  n = n - std::bit_cast<int32_t>(kShift);
  vf fn = t - kShift;
  vf r = x - fn * 0.693359375f + fn * 2.12194440e-4f;
  vf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  vf e = p * r * r + r + 1.0f;
  vf scale;
  as_floats(scale, (n + 127) << 23);
  x = e * scale;
}

// x = fast_erf(x) (Scalar.h), lane by lane.
HEDDLE_LANES void verf(vf& x) {
  clamp(x, -4.0f, 4.0f);
  erf_rational(x);
}

// 1 / (1 + e^-x).
HEDDLE_LANES void vsigmoid(vf& s, const vf& x) {
  vf e = -x;
  vexp(e);
  s = 1.0f / (1.0f + e);
}

constexpr float kSqrt2OverPiF = 0.7978845608028654f, kGeluCF = 0.044715f;

// tanh(y) for the tanh-GELU: 1 - 2 / (e^2y + 1).
HEDDLE_LANES void vtanh_gelu(vf& t, const vf& x) {
  vf y = kSqrt2OverPiF * (x + kGeluCF * x * x * x);
  vf e = 2.0f * y;
  vexp(e);
  t = 1.0f - 2.0f / (e + 1.0f);
}

// Forward value of activation K on one vector.
template <OpKind K>
HEDDLE_LANES void forward(vf& v) {
  vf x = v;
  if constexpr (K == OpKind::kGelu) {
    vf e = x * 0.70710678f;
    verf(e);
    v = 0.5f * x * (1.0f + e);
  } else if constexpr (K == OpKind::kSilu) {
    vf e = -x;
    vexp(e);
    v = x / (1.0f + e);
  } else if constexpr (K == OpKind::kSigmoid) {
    vsigmoid(v, x);
  } else {
    static_assert(K == OpKind::kGeluTanh);
    vf y = kSqrt2OverPiF * (x + kGeluCF * x * x * x);
    vf e = 2.0f * y;
    vexp(e);
    v = 0.5f * x * (2.0f - 2.0f / (e + 1.0f));
  }
}

// Derivative of activation K at x, times dy, into d.
template <OpKind K>
HEDDLE_LANES void backward(vf& d, const vf& dy, const vf& x) {
  if constexpr (K == OpKind::kGelu) {
    // The normal cdf from the pdf's exponential (gelu_cdf_tail, Scalar.h): one exp, no erf.
    vf g = -0.5f * x * x;
    vexp(g);
    vi bits;
    as_bits(bits, x);
    vf ax;
    as_floats(ax, bits & int32_t{0x7fffffff});
    vf t = 1.0f / (1.0f + kCdfP * ax);
    vf h = 0.5f * (t * (kCdfA1 + t * (kCdfA2 + t * (kCdfA3 + t * (kCdfA4 + t * kCdfA5))))) * g;
    vf cdf;
    select(cdf, (bits & int32_t(0x80000000)) != 0, h, 1.0f - h);
    d = dy * (cdf + x * g * 0.39894228f);
  } else if constexpr (K == OpKind::kSilu) {
    vf s;
    vsigmoid(s, x);
    d = dy * (s * (1.0f + x * (1.0f - s)));
  } else if constexpr (K == OpKind::kSigmoid) {
    vf s;
    vsigmoid(s, x);
    d = dy * (s * (1.0f - s));
  } else {
    static_assert(K == OpKind::kGeluTanh);
    vf t;
    vtanh_gelu(t, x);
    d = dy * (0.5f * (1.0f + t) +
              0.5f * x * (1.0f - t * t) * kSqrt2OverPiF * (1.0f + 3.0f * kGeluCF * x * x));
  }
}

// Calls f(j, m) for the vectors of a row of n floats: m = kLanes for each whole one, so the
// loads and stores of the body inline to single instructions, then m < kLanes for the tail.
template <class F>
HEDDLE_LANES void for_lanes(int64_t n, F&& f) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) f(j, kLanes);
  if (j < n) f(j, n - j);
}

template <OpKind K>
HEDDLE_LANES void forward_loop(const float* x, float* out, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    vf v;
    load(v, x + j, m);
    forward<K>(v);
    store(out + j, v, m);
  });
}

template <OpKind K>
HEDDLE_LANES void backward_loop(const float* dy, const float* x, float* out, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    vf d, xv, r;
    load(d, dy + j, m);
    load(xv, x + j, m);
    backward<K>(r, d, xv);
    store(out + j, r, m);
  });
}

// The loops of activation kind k (Simd.h simd_activation).
HEDDLE_LANES void activation_rows(OpKind k, const float* x, float* out, int64_t n) {
  switch (k) {
    case OpKind::kGelu:
      return forward_loop<OpKind::kGelu>(x, out, n);
    case OpKind::kSilu:
      return forward_loop<OpKind::kSilu>(x, out, n);
    case OpKind::kSigmoid:
      return forward_loop<OpKind::kSigmoid>(x, out, n);
    case OpKind::kGeluTanh:
      return forward_loop<OpKind::kGeluTanh>(x, out, n);
    default:
      HEDDLE_UNREACHABLE();
  }
}

HEDDLE_LANES void activation_grad_rows(OpKind k, const float* dy, const float* x, float* out,
                                       int64_t n) {
  switch (k) {
    case OpKind::kGelu:
      return backward_loop<OpKind::kGelu>(dy, x, out, n);
    case OpKind::kSilu:
      return backward_loop<OpKind::kSilu>(dy, x, out, n);
    case OpKind::kSigmoid:
      return backward_loop<OpKind::kSigmoid>(dy, x, out, n);
    case OpKind::kGeluTanh:
      return backward_loop<OpKind::kGeluTanh>(dy, x, out, n);
    default:
      HEDDLE_UNREACHABLE();
  }
}
