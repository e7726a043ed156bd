#include "heddle/ir/WindowGeometry.h"

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

// Reads int-list attribute `name` into `out` (n entries, each >= min); absent keeps `out`.
Status read_list(const Attrs& attrs, const char* name, size_t n, int64_t min, int64_t* out) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return {};
  const auto* v = std::get_if<std::vector<int64_t>>(&it->second);
  if (!v) return Diagnostic(std::string("attribute '") + name + "' must be an int list");
  if (v->size() != n)
    return Diagnostic(std::string("attribute '") + name + "' must have " + std::to_string(n) +
                      " entries, got " + std::to_string(v->size()));
  for (size_t i = 0; i < n; ++i) {
    if ((*v)[i] < min)
      return Diagnostic(std::string("attribute '") + name + "' must be " +
                        (min > 0 ? "positive" : ">= 0") + ", got " + std::to_string((*v)[i]));
    out[i] = (*v)[i];
  }
  return {};
}

std::vector<int64_t> vec(const int64_t* p, size_t n) { return std::vector<int64_t>(p, p + n); }

}  // namespace

bool is_conv_kind(OpKind k) {
  return k == OpKind::kConv2d || k == OpKind::kConv2dGradInput || k == OpKind::kConv2dGradWeight;
}

bool is_pool_kind(OpKind k) {
  return k == OpKind::kMaxPool2d || k == OpKind::kAvgPool2d || k == OpKind::kPool2dGrad;
}

Result<WindowGeometry> window_geometry(OpKind kind, const Attrs& attrs) {
  HEDDLE_ASSERT(is_conv_kind(kind) || is_pool_kind(kind)) << op_kind_name(kind);
  WindowGeometry g;
  if (is_pool_kind(kind)) {
    HEDDLE_TRY(read_list(attrs, "kernel", 2, 1, g.kernel.data()));
    g.stride = g.kernel;  // pooling strides default to the kernel
  }
  HEDDLE_TRY(read_list(attrs, "stride", 2, 1, g.stride.data()));
  if (is_conv_kind(kind)) HEDDLE_TRY(read_list(attrs, "dilation", 2, 1, g.dilation.data()));
  auto pad = attrs.find("padding");
  if (pad != attrs.end()) {
    const auto* v = std::get_if<std::vector<int64_t>>(&pad->second);
    if (v && v->size() == 2) {
      int64_t two[2];
      HEDDLE_TRY(read_list(attrs, "padding", 2, 0, two));
      g.padding = {two[0], two[1], two[0], two[1]};
    } else if (v && v->size() != 4) {
      return Diagnostic(
          "attribute 'padding' must have 2 entries (h, w) or 4 (top, left, bottom, "
          "right), got " +
          std::to_string(v->size()));
    } else {
      HEDDLE_TRY(read_list(attrs, "padding", 4, 0, g.padding.data()));
    }
  }
  auto groups = attrs.find("groups");
  if (is_conv_kind(kind) && groups != attrs.end()) {
    const auto* v = std::get_if<int64_t>(&groups->second);
    if (!v) return Diagnostic("attribute 'groups' must be an int");
    if (*v < 1) return Diagnostic("attribute 'groups' must be positive, got " + std::to_string(*v));
    g.groups = *v;
  }
  return g;
}

Attrs WindowGeometry::to_attrs(OpKind kind) const {
  Attrs a = {{"stride", vec(stride.data(), 2)}, {"padding", vec(padding.data(), 4)}};
  if (is_pool_kind(kind)) a["kernel"] = vec(kernel.data(), 2);
  if (is_conv_kind(kind)) {
    a["dilation"] = vec(dilation.data(), 2);
    a["groups"] = groups;
  }
  return a;
}

}  // namespace heddle
