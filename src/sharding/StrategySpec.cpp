#include "heddle/sharding/StrategySpec.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "heddle/support/Strings.h"

namespace heddle {

namespace {

const char* kKeys =
    "dp, tp, pp, ep, cp, cp_comm, cp_layout, zero, mb, microbatches, schedule, recompute, sp, "
    "layers, meshes, precision, attention, overlap, offload";

// `4x2`: a stage's dp x tp; nullopt when malformed.
std::optional<StrategySpec::StageMesh> parse_stage_mesh(std::string_view text) {
  size_t x = text.find('x');
  if (x == std::string_view::npos) return std::nullopt;
  auto dp = parse_int(text.substr(0, x)), tp = parse_int(text.substr(x + 1));
  if (!dp || !tp || *dp < 1 || *tp < 1) return std::nullopt;
  return StrategySpec::StageMesh{*dp, *tp};
}

}  // namespace

Result<StrategySpec> StrategySpec::parse(std::string_view text) {
  StrategySpec spec;
  std::string t(text);
  if (t.empty()) return Diagnostic("empty strategy; use 'auto' or e.g. 'dp=2,tp=2'");
  std::vector<std::string> seen;
  size_t b = 0;
  while (b <= t.size()) {
    size_t e = t.find(',', b);
    std::string item = t.substr(b, e == std::string::npos ? std::string::npos : e - b);
    b = e == std::string::npos ? t.size() + 1 : e + 1;
    if (item == "auto") {
      spec.auto_search = true;
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Diagnostic("strategy item '" + item + "' in '" + t +
                        "' needs the form key=value (or 'auto'); keys: " + kKeys);
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    for (const auto& s : seen)
      if (s == key) return Diagnostic("strategy key '" + key + "' is given twice in '" + t + "'");
    seen.push_back(key);
    auto positive = [&](std::optional<int64_t>& field, int64_t lo) -> Status {
      auto v = parse_int(val);
      if (!v || *v < lo)
        return Diagnostic("strategy key '" + key + "' needs an integer >= " + std::to_string(lo) +
                          ", got '" + val + "'");
      field = *v;
      return {};
    };
    auto enumerated = [&](auto& field, auto parse) -> Status {
      auto v = parse(val);
      HEDDLE_TRY(v);
      field = *v;
      return {};
    };
    if (key == "dp")
      HEDDLE_TRY(positive(spec.dp, 1));
    else if (key == "tp")
      HEDDLE_TRY(positive(spec.tp, 1));
    else if (key == "pp")
      HEDDLE_TRY(positive(spec.pp, 1));
    else if (key == "ep")
      HEDDLE_TRY(positive(spec.ep, 1));
    else if (key == "cp")
      HEDDLE_TRY(positive(spec.cp, 1));
    else if (key == "mb")
      HEDDLE_TRY(positive(spec.micro_batch, 1));
    else if (key == "microbatches")
      HEDDLE_TRY(positive(spec.microbatches, 1));
    else if (key == "zero") {
      HEDDLE_TRY(positive(spec.zero, 0));
      if (*spec.zero > 3) return Diagnostic("zero stage must be 0, 1, 2 or 3, got " + val);
    } else if (key == "schedule") {
      auto schedule = pipeline::PipelineSchedule::parse(val);
      HEDDLE_TRY(schedule);
      spec.schedule = *schedule;
    } else if (key == "recompute") {
      auto recompute = parse_recompute(val);
      HEDDLE_TRY(recompute);
      spec.recompute = *recompute;
    } else if (key == "precision") {
      HEDDLE_TRY(enumerated(spec.precision, parse_precision));
    } else if (key == "attention") {
      HEDDLE_TRY(enumerated(spec.attention, parse_attention));
    } else if (key == "overlap") {
      HEDDLE_TRY(enumerated(spec.overlap, parse_overlap));
    } else if (key == "offload") {
      HEDDLE_TRY(enumerated(spec.offload, parse_offload));
    } else if (key == "cp_comm") {
      HEDDLE_TRY(enumerated(spec.cp_comm, parse_cp_comm));
    } else if (key == "cp_layout") {
      HEDDLE_TRY(enumerated(spec.cp_layout, parse_cp_layout));
    } else if (key == "sp") {
      if (val != "on" && val != "off")
        return Diagnostic("sp must be 'on' or 'off', got '" + val + "'");
      spec.sp = val == "on";
    } else if (key == "layers") {
      for (size_t pb = 0; pb <= val.size();) {
        size_t pe = std::min(val.find('/', pb), val.size());
        auto n = parse_int(std::string_view(val).substr(pb, pe - pb));
        pb = pe + 1;
        if (!n || *n < 1)
          return Diagnostic(
              "strategy key 'layers' needs layer counts >= 1 separated by '/' "
              "(e.g. layers=10/12/12/14), got '" +
              val + "'");
        spec.layers.push_back(*n);
      }
    } else if (key == "meshes") {
      for (size_t pb = 0; pb <= val.size();) {
        size_t pe = std::min(val.find('/', pb), val.size());
        auto sm = parse_stage_mesh(std::string_view(val).substr(pb, pe - pb));
        pb = pe + 1;
        if (!sm)
          return Diagnostic(
              "strategy key 'meshes' needs one DPxTP sub-mesh per pipeline stage separated by "
              "'/', each degree >= 1 (e.g. meshes=4x2/2x2 for a 12-device two-stage pipeline), "
              "got '" +
              val + "'");
        spec.meshes.push_back(*sm);
      }
    } else {
      return Diagnostic("unknown strategy key '" + key + "'; valid keys: " + kKeys);
    }
  }
  if (!spec.meshes.empty()) {
    const int64_t n = static_cast<int64_t>(spec.meshes.size());
    if (spec.dp || spec.tp)
      return Diagnostic("meshes= gives every stage its own dp x tp; drop dp= and tp= from '" + t +
                        "'");
    if (spec.ep.value_or(1) != 1)
      return Diagnostic(
          "meshes= (per-stage sub-meshes) does not take expert parallelism; drop "
          "ep= from '" +
          t + "'");
    if (spec.cp.value_or(1) != 1)
      return Diagnostic(
          "meshes= (per-stage sub-meshes) does not take context parallelism; drop cp= from '" + t +
          "'");
    if (spec.pp && *spec.pp != n)
      return Diagnostic(
          "meshes= gives " + std::to_string(n) + " stage(s) but pp=" + std::to_string(*spec.pp) +
          "; give one DPxTP entry per pipeline stage (or drop pp=, which the entries imply)");
    spec.pp = n;
  }
  return spec;
}

int64_t StrategySpec::devices() const {
  if (!meshes.empty()) {
    int64_t n = 0;
    for (const auto& m : meshes) n += m.dp * m.tp;
    return n;
  }
  return dp.value_or(1) * cp.value_or(1) * tp.value_or(1) * pp.value_or(1) * ep.value_or(1);
}

bool StrategySpec::heterogeneous() const {
  for (const auto& m : meshes)
    if (!(m == meshes.front())) return true;
  return false;
}

StrategySpec StrategySpec::without_equal_meshes() const {
  StrategySpec s = *this;
  if (heterogeneous() || meshes.empty()) return s;
  s.dp = meshes.front().dp;
  s.tp = meshes.front().tp;
  s.meshes.clear();
  return s;
}

bool StrategySpec::ring_cp() const {
  return cp.value_or(1) > 1 && cp_comm.value_or(CpComm::kRing) == CpComm::kRing;
}

std::string StrategySpec::to_string() const {
  std::vector<std::string> parts;
  if (auto_search) parts.push_back("auto");
  auto num = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) parts.push_back(std::string(k) + "=" + std::to_string(*v));
  };
  num("dp", dp);
  num("tp", tp);
  num("pp", pp);
  if (!meshes.empty()) {
    std::vector<std::string> ms;
    for (const auto& m : meshes) ms.push_back(std::to_string(m.dp) + "x" + std::to_string(m.tp));
    parts.push_back("meshes=" + join(ms, "/"));
  }
  num("ep", ep);
  num("cp", cp);
  if (cp_comm) parts.push_back("cp_comm=" + std::string(heddle::to_string(*cp_comm)));
  if (cp_layout) parts.push_back("cp_layout=" + std::string(heddle::to_string(*cp_layout)));
  num("zero", zero);
  num("mb", micro_batch);
  num("microbatches", microbatches);
  if (schedule) parts.push_back("schedule=" + schedule->to_string());
  if (recompute) parts.push_back("recompute=" + std::string(heddle::to_string(*recompute)));
  if (sp) parts.push_back("sp=on");
  auto named = [&](const char* k, std::string_view v) {
    parts.push_back(k + ("=" + std::string(v)));
  };
  if (precision) named("precision", heddle::to_string(*precision));
  if (attention) named("attention", heddle::to_string(*attention));
  if (overlap) named("overlap", heddle::to_string(*overlap));
  if (offload) named("offload", heddle::to_string(*offload));
  if (!layers.empty()) {
    std::vector<std::string> counts;
    for (int64_t n : layers) counts.push_back(std::to_string(n));
    parts.push_back("layers=" + join(counts, "/"));
  }
  return parts.empty() ? "dp=1" : join(parts, ",");
}

Result<MicroBatching> StrategySpec::micro_batching(int64_t B, bool rebuildable) const {
  if (heterogeneous()) {
    if (micro_batch)
      return Diagnostic(
          "meshes= with stages of different dp splits every micro-batch over each stage's own "
          "replicas, so a per-replica mb= would differ per stage; give microbatches=M instead");
    int64_t l = 1;
    std::vector<std::string> dps;
    for (const auto& s : meshes) {
      l = std::lcm(l, s.dp);
      dps.push_back(std::to_string(s.dp));
    }
    if (B % l != 0)
      return Diagnostic(fmt::format(
          "the batch {} is not divisible by {}, the least common multiple of the stages' dp "
          "({}); every stage splits each micro-batch over its own replicas",
          B, l, join(dps, ", ")));
    int64_t m = microbatches.value_or(B / l);
    if (B % m != 0 || (B / m) % l != 0)
      return Diagnostic(fmt::format(
          "microbatches={} does not give micro-batches that every stage's dp ({}) divides; use a "
          "count dividing {} (the batch {} / {})",
          m, join(dps, ", "), B / l, B, l));
    return MicroBatching{B / m / meshes.front().dp, m};
  }
  const int64_t dp = meshes.empty() ? this->dp.value_or(1) : meshes.front().dp;
  if (B % dp != 0) return Diagnostic(fmt::format("the batch {} is not divisible by dp={}", B, dp));
  MicroBatching out;
  if (micro_batch) {
    out.size = *micro_batch;
    if ((B / dp) % out.size != 0)
      return Diagnostic(fmt::format(
          "the per-replica batch {} (batch {} / dp {}) is not divisible by the micro-batch mb={}",
          B / dp, B, dp, out.size));
    out.count = B / dp / out.size;
    if (microbatches && *microbatches != out.count)
      return Diagnostic(fmt::format("mb={} gives {} micro-batches, not microbatches={}", out.size,
                                    out.count, *microbatches));
  } else if (microbatches) {
    out.count = *microbatches;
    if ((B / dp) % out.count != 0)
      return Diagnostic(fmt::format("the per-replica batch {} is not divisible by microbatches={}",
                                    B / dp, out.count));
    out.size = B / dp / out.count;
  } else {
    out.size = pp.value_or(1) > 1 && rebuildable ? 1 : B / dp;
    out.count = B / dp / out.size;
  }
  return out;
}

Result<Mesh> StrategySpec::mesh(int64_t count) const {
  if (heterogeneous())
    return Diagnostic("strategy " + to_string() +
                      " gives its pipeline stages sub-meshes of different shapes, which form no "
                      "single device mesh");
  if (!meshes.empty()) {  // equal stages: the plain pp x dp x tp mesh
    StrategySpec plain = *this;
    plain.meshes.clear();
    plain.dp = meshes.front().dp;
    plain.tp = meshes.front().tp;
    return plain.mesh(count);
  }
  if (devices() != count)
    return Diagnostic("strategy " + to_string() + " uses " + std::to_string(devices()) +
                      " devices (" + (cp ? "dp*cp*tp*pp*ep" : "dp*tp*pp*ep") +
                      ") but the mesh has " + std::to_string(count) +
                      "; make the degrees multiply to " + std::to_string(count));
  std::vector<MeshAxis> axes;
  if (pp.value_or(1) > 1) axes.push_back({"pp", *pp});
  if (dp.value_or(1) > 1) axes.push_back({"dp", *dp});
  if (ep.value_or(1) > 1) axes.push_back({"ep", *ep});
  if (cp.value_or(1) > 1) axes.push_back({"cp", *cp});
  if (tp.value_or(1) > 1) axes.push_back({"tp", *tp});
  if (axes.empty()) axes.push_back({"dp", 1});
  return Mesh(std::move(axes));
}

}  // namespace heddle
