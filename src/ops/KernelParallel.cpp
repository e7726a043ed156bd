#include "KernelParallel.h"

#include <algorithm>
#include <functional>

#include "heddle/support/ThreadPool.h"

namespace heddle::kdetail {

namespace {

// True when every result of every op reads index dim d alone in one row (unit window there) and
// no op reduces over d.
bool slices_apart(const std::vector<const Op*>& ops, int64_t d) {
  for (const Op* op : ops) {
    if (op->space.dim(d).reduce) return false;
    for (const auto& r : op->results) {
      const AffineMap& m = r.proj.map();
      int rows = 0;
      for (int64_t row = 0; row < m.out_rank(); ++row) {
        if (m.at(row, d) == 0) continue;
        ++rows;
        if (r.proj.window()[row] != 1) return false;
        for (int64_t c = 0; c < m.in_rank(); ++c)
          if (c != d && m.at(row, c) != 0) return false;
      }
      if (rows != 1) return false;
    }
  }
  return true;
}

int64_t largest_window(const std::vector<const Op*>& ops) {
  int64_t w = 1;
  for (const Op* op : ops)
    for (const auto* v : {&op->inputs, &op->results})
      for (const auto& x : *v) w = std::max(w, x.proj.window().product());
  return w;
}

}  // namespace

bool splittable_kind(OpKind k) {
  switch (op_kind_info(k).category) {
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kSelect:
    case OpCategory::kNormalization:
    case OpCategory::kLoss:
    case OpCategory::kOptimizer:
      return true;
    case OpCategory::kReduction:
      return k != OpKind::kGlobalAvgPool;
    case OpCategory::kLayout:
      return k != OpKind::kConcat;
    default:
      break;
  }
  switch (k) {
    case OpKind::kCausalMask:
    case OpKind::kRotary:
    case OpKind::kRotaryGrad:
    case OpKind::kElementwiseGrad:
    case OpKind::kNormGrad:
      return true;
    default:
      return false;
  }
}

std::vector<Box> split_box(const std::vector<const Op*>& ops, const Box& box,
                           const KernelOptions& o) {
  if (o.threads <= 1 || o.reference || ops.empty() || box.empty()) return {};
  const int64_t work = box.volume() * largest_window(ops);
  const int64_t most = std::min<int64_t>(4 * o.threads, work / std::max<int64_t>(o.grain, 1));
  if (most < 2) return {};
  int64_t best = -1;
  for (int64_t d = 0; d < box.rank(); ++d) {
    int64_t ext = box.end()[d] - box.start()[d];
    if (ext < 2 || !slices_apart(ops, d)) continue;
    if (ext >= std::min<int64_t>(most, 2 * o.threads)) {
      best = d;
      break;
    }
    if (best < 0 || ext > box.end()[best] - box.start()[best]) best = d;
  }
  if (best < 0) return {};
  const int64_t s = box.start()[best], ext = box.end()[best] - s;
  const int64_t n = std::min(most, ext);
  std::vector<Box> pieces;
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int64_t> a(box.start().values()), b(box.end().values());
    a[best] = s + ext * k / n;
    b[best] = s + ext * (k + 1) / n;
    pieces.emplace_back(IVec(a), IVec(b));
  }
  return pieces;
}

Status run_pieces(const std::vector<Box>& pieces, const KernelOptions& o,
                  const std::function<Status(const Box&)>& f) {
  std::vector<Status> st(pieces.size());
  parallel_for(o.threads, static_cast<int64_t>(pieces.size()),
               [&](int64_t i) { st[i] = f(pieces[i]); });
  for (Status& s : st)
    if (!s.ok()) return s;
  return {};
}

void point_at(const Box& box, int64_t i, int64_t* p) {
  for (int64_t d = box.rank() - 1; d >= 0; --d) {
    int64_t ext = box.end()[d] - box.start()[d];
    p[d] = box.start()[d] + i % ext;
    i /= ext;
  }
}

}  // namespace heddle::kdetail
