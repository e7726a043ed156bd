// Ops benchmarks: (1) building the gpt3-175b training-step graph (forward + backward + AdamW);
// (2) the reference interpreter on a GEMM-heavy MLP as a ratio to raw cblas_sgemm GFLOP/s on the
// same GEMMs, measured in the same run with the same BLAS thread count; (3) convolution kernels
// (forward, input and weight gradients) on a ResNet-50 layer shape: im2col + sgemm against the
// direct per-point loops, as ratios measured in the same run; (4) reductions over leading axes
// against a plain row loop.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Zoo.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, since(t0));
  }
  return best;
}

void bench_training_graph() {
  heddle::zoo::ModelOptions mo;
  mo.with_loss = true;
  int64_t ops = 0, params = 0;
  double t = best_of(3, [&] {
    auto fwd = heddle::zoo::build_zoo_model("gpt3-175b", {}, mo);
    auto step = heddle::build_train_step(*fwd);
    if (!step.ok()) std::abort();
    ops = step->graph.num_ops();
    params = static_cast<int64_t>(step->updates.size());
  });
  fmt::print(
      "gpt3-175b training step graph (forward + backward + AdamW, verified): {:.3f} s "
      "({} ops, {} parameter tensors updated; best of 3)\n",
      t, ops, params);
}

void bench_interpreter(int threads, int64_t batch, int64_t width, int64_t layers) {
  heddle::Graph g("gemm_mlp");
  heddle::Ops o(g);
  heddle::ValueId x = o.input("x", heddle::f32({batch, width}));
  for (int64_t l = 0; l < layers; ++l) {
    x = o.einsum("mk,kn->mn", x, o.param("w" + std::to_string(l), heddle::f32({width, width})));
    if (!std::getenv("BENCH_NO_RELU")) x = o.relu(x);
  }
  o.output(x);
  if (!o.ok()) std::abort();
  double gemm_flops = 2.0 * static_cast<double>(batch * width * width * layers);
  heddle::InterpreterOptions io;
  io.blas_threads = threads;
  heddle::Interpreter it(g, io);
  auto inputs = heddle::random_inputs(g, 1, 2);
  if (!it.run(inputs).ok()) std::abort();  // warm-up
  const int reps = 8;
  // Raw sgemm on the same shapes and buffers.
  std::vector<std::vector<float>> acts(static_cast<size_t>(layers + 1),
                                       std::vector<float>(static_cast<size_t>(batch * width)));
  std::copy(inputs[0].f32(), inputs[0].f32() + batch * width, acts[0].begin());
  std::vector<const float*> ws;
  for (heddle::ValueId p : g.params()) ws.push_back(it.param(p).f32());
  auto raw = [&] {
    for (int64_t l = 0; l < layers; ++l)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(batch),
                  static_cast<int>(width), static_cast<int>(width), 1.0f, acts[l].data(),
                  static_cast<int>(width), ws[l], static_cast<int>(width), 0.0f, acts[l + 1].data(),
                  static_cast<int>(width));
  };
  raw();
  // Alternate the two so background load on the machine hits both alike; keep the best of each.
  double t_interp = 1e30, t_raw = 1e30;
  for (int i = 0; i < reps; ++i) {
    t_interp = std::min(t_interp, best_of(1, [&] { (void)it.run(inputs); }));
    t_raw = std::min(t_raw, best_of(1, raw));
  }
  double gi = gemm_flops / t_interp / 1e9, gr = gemm_flops / t_raw / 1e9;
  fmt::print(
      "interpreter, mlp {}x{} x {} layers (einsum + relu), {} BLAS thread(s): "
      "{:.1f} GFLOP/s vs raw cblas_sgemm {:.1f} GFLOP/s: ratio {:.3f} (best of {})\n",
      batch, width, layers, threads, gi, gr, gi / gr, reps);
}

// One ResNet-50 3x3 convolution (stride 1, pad 1) of `c` channels on `hw` x `hw` images, batch
// `n`: its forward kernel and both gradient kernels over the whole index box, im2col + sgemm
// (best of 3) against the direct loops (one run each), single-threaded BLAS.
void bench_conv(const char* layer, int64_t n, int64_t c, int64_t hw) {
  openblas_set_num_threads(1);
  heddle::Graph g("conv");
  heddle::Ops o(g);
  heddle::Conv2dOptions co;
  co.padding = {1, 1};
  heddle::ValueId y = o.conv2d(o.param("x", heddle::f32({n, c, hw, hw})),
                               o.param("w", heddle::f32({c, c, 3, 3})), co);
  o.output(o.reduce(heddle::OpKind::kReduceSum, y, {0, 1, 2, 3}));
  auto grads = heddle::build_gradients(g, g.outputs()[0]);
  if (!o.ok() || !grads.ok()) std::abort();
  const heddle::Graph& tg = grads->graph;
  double macs = static_cast<double>(n * c * c * hw * hw * 9);
  for (heddle::OpId id = 0; id < tg.num_ops(); ++id) {
    const heddle::Op& op = tg.op(id);
    if (op.kind != heddle::OpKind::kConv2d && op.kind != heddle::OpKind::kConv2dGradInput &&
        op.kind != heddle::OpKind::kConv2dGradWeight)
      continue;
    std::vector<heddle::Tensor> ins;
    for (const auto& x : op.inputs) {
      heddle::Tensor t(tg.type(x.value));
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(i % 7) * 0.1f;
      ins.push_back(std::move(t));
    }
    std::vector<const heddle::Tensor*> in;
    for (const auto& t : ins) in.push_back(&t);
    heddle::Tensor out(tg.type(op.results[0].value));
    auto run = [&](bool direct) {
      heddle::kernels::KernelOptions ko;
      ko.direct_conv = direct;
      if (!heddle::kernels::run(op, op.space.box(), in, {&out}, ko).ok()) std::abort();
    };
    double fast = best_of(3, [&] { run(false); });
    double direct = best_of(1, [&] { run(true); });
    fmt::print(
        "{} {} [{}, {}, {}, {}] 3x3: im2col+sgemm {:.4f} s ({:.1f} GFLOP/s), direct loops "
        "{:.3f} s ({:.2f} GFLOP/s): {:.0f}x faster\n",
        layer, heddle::op_kind_name(op.kind), n, c, hw, hw, fast, 2 * macs / fast / 1e9, direct,
        2 * macs / direct / 1e9, direct / fast);
  }
}

// reduce_sum and reduce_max over the leading axes of a [8, 128, n] tensor (a bias gradient, or a
// user's ReduceSum over batch and sequence), as Ops::reduce builds it (index space [n, 8:sum,
// 128:sum]), against a plain loop adding each contiguous row into the result: best of 20.
void bench_reduce(int64_t n) {
  heddle::Graph g("reduce");
  heddle::Ops o(g);
  heddle::ValueId x = o.param("x", heddle::f32({8, 128, n}));
  o.output(o.reduce(heddle::OpKind::kReduceSum, x, {0, 1}));
  o.output(o.reduce(heddle::OpKind::kReduceMax, x, {0, 1}));
  if (!o.ok()) std::abort();
  heddle::Tensor t(g.type(x)), y(heddle::DType::kF32, heddle::IVec({n}));
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(i % 13) * 0.1f;
  std::vector<float> acc(static_cast<size_t>(n));
  const float* src = t.f32();
  float* __restrict__ dst = acc.data();
  const double plain = best_of(20, [&] {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t r = 0; r < 8 * 128; ++r)
      for (int64_t j = 0; j < n; ++j) dst[j] += src[r * n + j];
  });
  const double bytes = static_cast<double>(t.numel()) * 4;
  for (heddle::OpId id = 0; id < g.num_ops(); ++id) {
    const heddle::Op& op = g.op(id);
    const double s = best_of(20, [&] {
      if (!heddle::kernels::run(op, op.space.box(), {&t}, {&y}).ok()) std::abort();
    });
    fmt::print(
        "{} [8, 128, {}] over axes 0, 1: {:.1f} us ({:.1f} GB/s), a plain row loop {:.1f} us: "
        "{:.2f}x its time\n",
        heddle::op_kind_name(op.kind), n, s * 1e6, bytes / s / 1e9, plain * 1e6, s / plain);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--reduce") {  // the reduction figures alone
    for (int64_t n : {256, 1024}) bench_reduce(n);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--conv") {  // the convolution figures alone
    bench_conv("resnet50 layer3 (conv2 of a bottleneck)", 1, 256, 14);
    return 0;
  }
  bench_conv("resnet50 layer3 (conv2 of a bottleneck)", 1, 256, 14);
  for (int64_t n : {256, 1024}) bench_reduce(n);
  bench_training_graph();
  bench_interpreter(1, 512, 2048, 4);
  bench_interpreter(2, 512, 2048, 4);
  return 0;
}
