// The builder's bookkeeping: declarations, error recording, emitting ops with fresh names.
#include "OpsUtil.h"
#include "heddle/ops/Ops.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace ops_detail {

IndexSpace make_space(const std::vector<std::string>& names, const std::vector<int64_t>& extents,
                      const std::vector<std::optional<Monoid>>& reduce) {
  HEDDLE_ASSERT(names.size() == extents.size()) << "space names/extents";
  std::vector<IndexDim> dims;
  for (size_t i = 0; i < names.size(); ++i)
    dims.push_back({names[i], extents[i], i < reduce.size() ? reduce[i] : std::nullopt});
  return IndexSpace(std::move(dims));
}

IndexProjection make_proj(int64_t in, const std::vector<std::vector<int64_t>>& rows,
                          std::vector<int64_t> offset, std::vector<int64_t> window) {
  if (offset.empty()) offset.assign(rows.size(), 0);
  if (window.empty()) window.assign(rows.size(), 1);
  return IndexProjection(AffineMap::from_rows(in, rows, IVec(std::move(offset))),
                         IVec(std::move(window)));
}

IndexProjection select_proj(int64_t in, const std::vector<int64_t>& dims,
                            std::vector<int64_t> window) {
  std::vector<std::vector<int64_t>> rows;
  for (int64_t d : dims) {
    std::vector<int64_t> r(static_cast<size_t>(in), 0);
    if (d >= 0) r[d] = 1;
    rows.push_back(std::move(r));
  }
  return make_proj(in, rows, {}, std::move(window));
}

IndexProjection shifted_identity(int64_t n, std::vector<int64_t> offset) {
  return IndexProjection(AffineMap(
      n,
      [&] {
        std::vector<int64_t> a(static_cast<size_t>(n * n), 0);
        for (int64_t i = 0; i < n; ++i) a[i * n + i] = 1;
        return a;
      }(),
      IVec(std::move(offset))));
}

IndexProjection identity_proj(int64_t n) { return IndexProjection(AffineMap::identity(n)); }

std::vector<std::string> dim_names(int64_t n, const std::string& stem) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(stem + std::to_string(i));
  return v;
}

std::string shape_str(const IVec& s) { return s.to_string(); }

int64_t norm_axis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

}  // namespace ops_detail

ValueId Ops::input(std::string name, TensorType type) {
  return g_.add_input(std::move(name), std::move(type));
}
ValueId Ops::param(std::string name, TensorType type) {
  return g_.add_param(std::move(name), std::move(type));
}
void Ops::output(ValueId v) {
  if (v != kNoValue) g_.add_output(v);
}

Status Ops::status() const {
  if (failed_) return error_;
  return {};
}

void Ops::fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = Diagnostic(std::move(message));
}

ValueId Ops::error(std::string_view op, std::string message) {
  fail("op '" + std::string(op) + "': " + message);
  return kNoValue;
}

bool Ops::bad(std::initializer_list<ValueId> vs) const {
  if (failed_) return true;
  for (ValueId v : vs)
    if (v == kNoValue) return true;
  return false;
}

std::string Ops::fresh_name(std::string_view stem) {
  while (true) {
    std::string n = std::string(stem) + std::to_string(next_++);
    if (!g_.find_value(n)) return n;
  }
}

std::vector<ValueId> Ops::emit(Op op, const std::vector<TensorType>& result_types) {
  if (failed_) return {};
  std::vector<std::string> names;
  for (size_t i = 0; i < result_types.size(); ++i) names.push_back(fresh_name());
  return g_.add_op(std::move(op), names, result_types);
}

ValueId Ops::emit1(Op op, TensorType t) {
  auto r = emit(std::move(op), {std::move(t)});
  return r.empty() ? kNoValue : r.front();
}

}  // namespace heddle
