#include "heddle/pipeline/BuiltinPlacements.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "heddle/pipeline/PipelineSchedule.h"
#include "heddle/support/Strings.h"

namespace heddle::pipeline {

namespace {

constexpr const char* kForward = "forward";
constexpr const char* kBackward = "backward";

/// Builds a placement by appending blocks and chaining dependencies.
class Builder {
 public:
  Builder(std::string name, std::string family, int p) {
    pl_.name = std::move(name);
    pl_.family = std::move(family);
    pl_.num_devices = p;
  }
  int add(std::string name, const char* type, double span, double memory, std::vector<int> devs) {
    pl_.blocks.push_back({std::move(name), type, span, memory, std::move(devs)});
    return static_cast<int>(pl_.blocks.size()) - 1;
  }
  void dep(int a, int b) { pl_.deps.push_back({a, b}); }
  /// Chains the blocks in `ids` one after another.
  void chain(const std::vector<int>& ids) {
    for (size_t i = 1; i < ids.size(); ++i) dep(ids[i - 1], ids[i]);
  }
  std::vector<int> all() const {
    std::vector<int> d(pl_.num_devices);
    std::iota(d.begin(), d.end(), 0);
    return d;
  }
  BlockPlacement done() { return std::move(pl_); }
  BlockPlacement& get() { return pl_; }

 private:
  BlockPlacement pl_;
};

/// Forward blocks on `devs` in order, then backward blocks on `devs` reversed; returns ids.
std::vector<int> v_chain(Builder& bld, const std::string& tag, const std::vector<int>& devs,
                         double f, double b) {
  std::vector<int> ids;
  for (int d : devs) ids.push_back(bld.add(fmt::format("f{}{}", tag, d), kForward, f, 1, {d}));
  for (auto it = devs.rbegin(); it != devs.rend(); ++it) {
    ids.push_back(bld.add(fmt::format("b{}{}", tag, *it), kBackward, b, -1, {*it}));
  }
  return ids;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> r;
  for (int i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

}  // namespace

BlockPlacement make_vshape(int p, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 1);
  Builder bld("vshape", "vshape", p);
  bld.chain(v_chain(bld, "", range(0, p), f_span, b_span));
  return bld.done();
}

BlockPlacement make_interleaved(int p, int v, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 1 && v >= 1);
  Builder bld(fmt::format("interleaved:{}", v), "interleaved", p);
  bld.get().chunks = v;
  std::vector<int> ids;
  for (int c = 0; c < v; ++c)
    for (int d = 0; d < p; ++d)
      ids.push_back(bld.add(fmt::format("f{}.{}", c, d), kForward, f_span, 1, {d}));
  for (int c = v - 1; c >= 0; --c)
    for (int d = p - 1; d >= 0; --d)
      ids.push_back(bld.add(fmt::format("b{}.{}", c, d), kBackward, b_span, -1, {d}));
  bld.chain(ids);
  return bld.done();
}

BlockPlacement make_vshape_zb(int p, double f_span, double b_span, double w_span) {
  HEDDLE_ASSERT(p >= 1);
  Builder bld("vshape-zb", "vshape-zb", p);
  std::vector<int> ids;
  for (int d = 0; d < p; ++d)
    ids.push_back(bld.add(fmt::format("f{}", d), kForward, f_span, 1, {d}));
  for (int d = p - 1; d >= 0; --d) {
    ids.push_back(bld.add(fmt::format("b{}", d), kBackward, b_span, 0, {d}));
  }
  bld.chain(ids);
  for (int d = p - 1; d >= 0; --d) {
    int w = bld.add(fmt::format("w{}", d), "weight-grad", w_span, -1, {d});
    bld.dep(ids[p + (p - 1 - d)], w);
  }
  return bld.done();
}

BlockPlacement make_xshape(int p, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 1);
  Builder bld("xshape", "xshape", p);
  bld.chain(v_chain(bld, "a", range(0, p), f_span, b_span));
  std::vector<int> up = range(0, p);
  std::reverse(up.begin(), up.end());
  bld.chain(v_chain(bld, "b", up, f_span, b_span));
  return bld.done();
}

BlockPlacement make_mshape(int p, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 1);
  Builder bld("mshape", "mshape", p);
  std::vector<int> ids = {bld.add("f_all", kForward, 1, 0, bld.all())};
  for (int id : v_chain(bld, "", range(0, p), f_span, b_span)) ids.push_back(id);
  ids.push_back(bld.add("b_all", kBackward, 1, 0, bld.all()));
  bld.chain(ids);
  return bld.done();
}

BlockPlacement make_kshape(int p, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 2 && p % 2 == 0);
  Builder bld("kshape", "kshape", p);
  const int h = p / 2;
  std::vector<int> fa, fb, ba, bb;
  for (int d = 0; d < h; ++d)
    fa.push_back(bld.add(fmt::format("fa{}", d), kForward, f_span, 1, {d}));
  for (int d = h; d < p; ++d)
    fb.push_back(bld.add(fmt::format("fb{}", d), kForward, f_span, 1, {d}));
  int fj = bld.add("f_join", kForward, 1, 1, bld.all());
  int bj = bld.add("b_join", kBackward, 1, -1, bld.all());
  for (int d = h - 1; d >= 0; --d) {
    ba.push_back(bld.add(fmt::format("ba{}", d), kBackward, b_span, -1, {d}));
  }
  for (int d = p - 1; d >= h; --d) {
    bb.push_back(bld.add(fmt::format("bb{}", d), kBackward, b_span, -1, {d}));
  }
  bld.chain(fa);
  bld.chain(fb);
  bld.dep(fa.back(), fj);
  bld.dep(fb.back(), fj);
  bld.dep(fj, bj);
  bld.dep(bj, ba.front());
  bld.dep(bj, bb.front());
  bld.chain(ba);
  bld.chain(bb);
  return bld.done();
}

BlockPlacement make_nnshape(int p, double f_span, double b_span) {
  HEDDLE_ASSERT(p >= 2);
  Builder bld("nnshape", "nnshape", p);
  const int h = p / 2;
  std::vector<int> ids = {bld.add("f_all0", kForward, 1, 0, bld.all())};
  for (int d = 0; d < p; ++d) {
    if (d == h) ids.push_back(bld.add("f_all1", kForward, 1, 0, bld.all()));
    ids.push_back(bld.add(fmt::format("f{}", d), kForward, f_span, 1, {d}));
  }
  for (int d = p - 1; d >= 0; --d) {
    ids.push_back(bld.add(fmt::format("b{}", d), kBackward, b_span, -1, {d}));
    if (d == h) ids.push_back(bld.add("b_all1", kBackward, 1, 0, bld.all()));
  }
  ids.push_back(bld.add("b_all0", kBackward, 1, 0, bld.all()));
  bld.chain(ids);
  return bld.done();
}

std::vector<std::string> builtin_placement_names() {
  return {"vshape", "interleaved:V", "vshape-zb", "xshape", "mshape", "kshape", "nnshape"};
}

bool is_builtin_placement(std::string_view spec) {
  if (spec.rfind("interleaved", 0) == 0) return true;
  for (const auto& n : builtin_placement_names())
    if (n == spec) return true;
  return false;
}

Result<BlockPlacement> builtin_placement(std::string_view spec, int devices) {
  if (devices < 1) {
    return Diagnostic(fmt::format("--devices must be at least 1, got {}", devices));
  }
  if (spec == "vshape") return make_vshape(devices);
  if (spec == "vshape-zb") return make_vshape_zb(devices);
  if (spec == "mshape") return make_mshape(devices);
  if (spec.rfind("interleaved", 0) == 0) {  // the strategy's rule: bare `interleaved` is V=2
    auto s = PipelineSchedule::parse(spec);
    if (!s.ok() || s->kind != ScheduleKind::kInterleaved) {
      return Diagnostic(fmt::format(
          "placement '{}': write interleaved:V with V the number of model chunks per device, 1 "
          "to {} (e.g. interleaved:2)",
          spec, PipelineSchedule::kMaxChunks));
    }
    return make_interleaved(devices, static_cast<int>(s->chunks));
  }
  if (spec == "xshape" || spec == "nnshape" || spec == "kshape") {
    if (devices < 2) {
      return Diagnostic(
          fmt::format("placement '{}' needs at least 2 devices, got {}", spec, devices));
    }
    if (spec == "xshape") return make_xshape(devices);
    if (spec == "nnshape") return make_nnshape(devices);
    if (devices % 2) {
      return Diagnostic(
          fmt::format("placement 'kshape' splits the devices into two equal "
                      "branches; use an even device count, not {}",
                      devices));
    }
    return make_kshape(devices);
  }
  return Diagnostic(fmt::format("unknown placement '{}': use one of {} or a JSON placement file",
                                spec, join(builtin_placement_names(), ", ")));
}

}  // namespace heddle::pipeline
