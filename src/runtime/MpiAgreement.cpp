// The launch agreement and rank 0's plan shared with every rank, behind MpiRun.h.
#include <algorithm>

#include "heddle/runtime/MpiRun.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace {

constexpr size_t kMaxLaunchParts = 32;

std::string rank_list(const std::vector<int64_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += " and " + std::to_string(ranks.size() - 8) + " more";
  return s;
}

}  // namespace

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

Status agree_on_launch(MpiCommunicator& mpi, const std::vector<LaunchPart>& parts) {
  HEDDLE_ASSERT(parts.size() <= kMaxLaunchParts) << parts.size() << " launch parts";
  // Fixed length on every rank (a rank with fewer parts pads), led by the part count.
  std::vector<int64_t> mine(kMaxLaunchParts + 1, 0);
  mine[0] = static_cast<int64_t>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) mine[i + 1] = static_cast<int64_t>(parts[i].digest);
  auto all = mpi.exchange(mine, "the launch agreement");
  if (!all.ok()) return all.error();
  const size_t len = mine.size();
  auto at = [&](int64_t rank, size_t i) { return (*all)[static_cast<size_t>(rank) * len + i]; };
  std::string text;
  for (size_t i = 0; i <= parts.size(); ++i) {
    std::vector<int64_t> differ;
    for (int64_t q = 1; q < mpi.size(); ++q)
      if (at(q, i) != at(0, i)) differ.push_back(q);
    if (differ.empty()) continue;
    std::string what =
        i == 0 ? "the kind of run (a different heddle command line)" : parts[i - 1].name;
    text += (text.empty() ? "" : "; ") + what + ": rank(s) " + rank_list(differ) +
            " differ from rank 0";
    if (i > 0 && !parts[i - 1].detail.empty() && mpi.rank() == 0)
      text += " (rank 0 has " + parts[i - 1].detail + ")";
    else if (i > 0 && !parts[i - 1].detail.empty() &&
             std::find(differ.begin(), differ.end(), mpi.rank()) != differ.end())
      text += " (this rank has " + parts[i - 1].detail + ")";
  }
  if (text.empty()) return {};
  return Diagnostic(
      "the ranks were started differently, so their results would not be one run's: " + text +
      ". Start every rank with the same arguments, files and heddle binary");
}

Result<std::vector<int64_t>> share_from_root(MpiCommunicator& mpi,
                                             const std::vector<int64_t>& values) {
  auto sizes = mpi.exchange({static_cast<int64_t>(values.size())}, "sharing rank 0's plan");
  if (!sizes.ok()) return sizes.error();
  const auto n = static_cast<size_t>((*sizes)[0]);
  std::vector<int64_t> mine(n, 0);
  if (mpi.rank() == 0) mine = values;
  auto all = mpi.exchange(mine, "sharing rank 0's plan");
  if (!all.ok()) return all.error();
  return std::vector<int64_t>(all->begin(), all->begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<int64_t> encode_plan(const ShardingPlan& plan) {
  HEDDLE_ASSERT(plan.pinned.empty()) << "a plan with pins cannot be shared as integers";
  std::vector<int64_t> code{static_cast<int64_t>(plan.ops.size())};
  for (const OpStrategy& s : plan.ops) {
    code.push_back(s.rank());
    code.insert(code.end(), s.dims().begin(), s.dims().end());
  }
  return code;
}

Result<ShardingPlan> decode_plan(const std::vector<int64_t>& code, const Mesh& mesh) {
  ShardingPlan plan;
  plan.mesh = mesh;
  size_t at = 0;
  auto next = [&]() -> std::optional<int64_t> {
    if (at >= code.size()) return std::nullopt;
    return code[at++];
  };
  auto n = next();
  if (!n || *n < 0) return Diagnostic("rank 0's plan arrived malformed");
  for (int64_t i = 0; i < *n; ++i) {
    auto rank = next();
    if (!rank || *rank < 0 || *rank > 64) return Diagnostic("rank 0's plan arrived malformed");
    std::vector<int64_t> dims;
    for (int64_t a = 0; a < *rank; ++a) {
      auto d = next();
      if (!d) return Diagnostic("rank 0's plan arrived malformed");
      dims.push_back(*d);
    }
    plan.ops.emplace_back(std::move(dims));
  }
  return plan;
}

}  // namespace heddle
