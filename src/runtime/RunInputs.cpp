// A run's inputs and results as bytes: input files checked against the graph, the range of
// integer inputs, the feeds of a run, the digest of its outputs.
#include "heddle/runtime/RunInputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "heddle/frontend/Npy.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/support/Hash.h"

namespace heddle {

// Integer inputs must index something: the smallest table or class count they feed.
int64_t integer_range(const Graph& g) {
  int64_t hi = 0;
  for (const Op& op : g.ops()) {
    int64_t n = 0;
    if (op.kind == OpKind::kEmbedding) n = g.type(op.inputs[1].value).shape()[0];
    if (op.kind == OpKind::kCrossEntropy) {
      const IVec& s = g.type(op.inputs[0].value).shape();
      n = s[s.size() - 1];
    }
    if (n > 0) hi = hi == 0 ? n : std::min(hi, n);
  }
  return hi == 0 ? 2 : hi;
}

namespace {

// The digest_64 of `t`'s stored bytes (fp32 for float dtypes, int64 for integers), from `h`.
uint64_t tensor_digest(const Tensor& t, uint64_t h) {
  if (t.is_int()) return digest_64(t.i64(), static_cast<size_t>(t.numel()) * sizeof(int64_t), h);
  return digest_64(t.f32(), static_cast<size_t>(t.numel()) * sizeof(float), h);
}

}  // namespace

std::string output_digest(const Graph& g, const TensorMap& outputs) {
  uint64_t h = fnv1a_64(nullptr, 0);
  for (ValueId v : g.outputs()) h = tensor_digest(outputs.at(v), h);
  return fmt::format("{:016x}", h);
}

std::string params_digest(const std::vector<ParamUpdate>& updates, const TensorMap& outputs) {
  uint64_t h = fnv1a_64(nullptr, 0);
  for (const ParamUpdate& u : updates) h = tensor_digest(outputs.at(u.updated), h);
  return fmt::format("{:016x}", h);
}

namespace {

// "NaN at [0, 5] (3 non-finite values)" for a float tensor with NaN or Inf; empty if all finite.
std::string non_finite_report(const Tensor& t) {
  if (t.is_int()) return "";
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.f32()[i]) && count++ == 0) first = i;
  if (count == 0) return "";
  std::vector<int64_t> at(t.rank());
  for (int64_t d = t.rank() - 1, rest = first; d >= 0; --d) {
    at[d] = rest % t.shape()[d];
    rest /= t.shape()[d];
  }
  float v = t.f32()[first];
  return fmt::format("{} at element [{}] ({} non-finite value{})",
                     std::isnan(v) ? "NaN"
                     : v > 0       ? "+Inf"
                                   : "-Inf",
                     fmt::join(at, ", "), count, count == 1 ? "" : "s");
}

}  // namespace

Result<InputFiles> read_input_files(const Graph& g, const std::vector<std::string>& files,
                                    bool finite_only) {
  InputFiles out;
  if (files.empty()) return out;
  if (files.size() != g.inputs().size()) {
    std::vector<std::string> names;
    for (ValueId v : g.inputs()) names.push_back("'" + g.value(v).name + "'");
    // A training step's labels are its last input (OnnxImportOptions::loss): say how to give them.
    const bool labels_missing =
        files.size() + 1 == g.inputs().size() && g.value(g.inputs().back()).name == "labels";
    return Diagnostic(fmt::format(
        "--input given {} time(s), but the model has {} input(s) ({}); give one .npy file per "
        "input, in order{}",
        files.size(), g.inputs().size(), fmt::join(names, ", "),
        labels_missing ? "; 'labels' is the loss's input: give it with --labels FILE.npy" : ""));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    // An .npy of this input holds at most 8 bytes per element (int64, float64) and its header.
    const int64_t elements = g.type(g.inputs()[i]).shape().product();
    auto t = read_npy(files[i], elements * 8 + (int64_t{1} << 16));
    HEDDLE_TRY(t);
    const TensorType& want = g.type(g.inputs()[i]);
    if (t->shape() != want.shape() || t->is_int() != !dtype_is_float(want.dtype()))
      return Diagnostic(SourceLoc{files[i], 0, 0}, "holds " + std::string(dtype_name(t->dtype())) +
                                                       t->shape().to_string() + ", but input '" +
                                                       g.value(g.inputs()[i]).name + "' is " +
                                                       want.to_string());
    if (auto bad = non_finite_report(*t); !bad.empty()) {
      Diagnostic d(SourceLoc{files[i], 0, 0},
                   "input '" + g.value(g.inputs()[i]).name + "' holds " + bad +
                       (finite_only ? "; --check compares finite values only: fix the input"
                                    : "; the outputs will not be finite"));
      if (finite_only) return d;
      out.warnings.push_back(std::move(d));
    }
    Tensor fixed(want);  // i32/bool files feed i64 inputs; storage is shared
    if (fixed.is_int())
      std::copy(t->i64(), t->i64() + t->numel(), fixed.i64());
    else
      std::copy(t->f32(), t->f32() + t->numel(), fixed.f32());
    out.tensors.push_back(std::move(fixed));
  }
  return out;
}

TensorMap run_feeds(const Graph& g, const std::vector<Tensor>& inputs,
                    const std::map<ValueId, Tensor>& weights, uint64_t seed) {
  TensorMap feeds;
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
  for (ValueId p : g.params()) {
    auto w = weights.find(p);
    feeds.emplace(p, w != weights.end() ? w->second : init_param(g.value(p).name, g.type(p), seed));
  }
  return feeds;
}

}  // namespace heddle
