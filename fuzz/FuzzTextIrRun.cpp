// libFuzzer target: verified text-IR programs run (issue #23: "a verified program can't read out
// of bounds"). Whatever parses and verifies, if small, runs in the reference interpreter on random
// inputs without crashing (the fuzz build runs under ASan + UBSan, so a kernel read outside its
// tensor is a finding), and every op's kernels agree with the reference walker
// (KernelOptions::reference) on the values the interpreter computed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "FuzzCheck.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Kernel.h"

namespace {

// Small enough to run in milliseconds: few ops, small tensors, small index spaces and windows.
bool small(const heddle::Graph& g) {
  if (g.num_ops() > 32) return false;
  for (heddle::ValueId v = 0; v < g.num_values(); ++v)
    if (g.type(v).numel() > (1 << 14)) return false;
  for (const auto& op : g.ops()) {
    if (op.space.volume() > (1 << 16)) return false;
    for (const auto& o : op.inputs)
      if (o.proj.window().product() > (1 << 10)) return false;
  }
  return true;
}

// Whether `a` (the interpreter's kernels) and `b` (the reference walker) agree: NaN where the
// other is NaN, equal infinities, finite values within 1e-3 of the larger of 1 and the result's
// largest magnitude (sums of large terms that cancel differ by their rounding).
bool agree(const heddle::Tensor& a, const heddle::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  double scale = 1;
  for (int64_t i = 0; i < b.numel(); ++i)
    if (std::isfinite(b.f32()[i])) scale = std::max(scale, std::fabs(double{b.f32()[i]}));
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.f32()[i], y = b.f32()[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    if (!std::isfinite(x) || !std::isfinite(y) || std::fabs(x - y) > 1e-3 * scale) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = heddle::parse_graph(text, "fuzz.hd");
  if (!g.ok() || !heddle::verify(*g).empty() || !small(*g)) return 0;
  heddle::Interpreter interp(*g);
  auto out = interp.run(heddle::random_inputs(*g, 1, 4));
  if (!out.ok()) return 0;  // data errors (a label out of range) are diagnostics
  for (const auto& op : g->ops()) {
    if (op.kind == heddle::OpKind::kTopkGating || op.kind == heddle::OpKind::kFill) continue;
    std::vector<const heddle::Tensor*> in;
    for (const auto& o : op.inputs) in.push_back(&interp.value(o.value));
    std::vector<heddle::Tensor> res;
    for (const auto& r : op.results) res.emplace_back(g->type(r.value));
    std::vector<heddle::Tensor*> outs;
    for (auto& t : res) outs.push_back(&t);
    heddle::kernels::KernelOptions walker;
    walker.reference = true;
    HEDDLE_FUZZ_CHECK(heddle::kernels::run(op, op.space.box(), in, outs, walker).ok());
    for (size_t i = 0; i < res.size(); ++i)
      HEDDLE_FUZZ_CHECK(agree(interp.value(op.results[i].value), res[i]));
  }
  return 0;
}
