#include "Blocks.h"

#include <cmath>

#include "heddle/ir/GraphBuilder.h"

namespace heddle::zoo::blocks {

ValueId dense(Ops& ops, ValueId x, int64_t in, int64_t out, const std::string& name, bool bias) {
  ValueId y = ops.linear(x, ops.param(name + ".w", f32({in, out})));
  if (bias) y = ops.add(y, ops.param(name + ".bias", f32({out})));
  return y;
}

ValueId attention(Ops& ops, ValueId x, const AttnSpec& a, const std::string& name) {
  if (!ops.ok()) return kNoValue;
  const IVec& s = ops.shape(x);
  int64_t B = s[0], S = s[1], H = s[2], hd = H / a.heads, g = a.heads / a.kv_heads;
  ValueId q = ops.reshape(dense(ops, x, H, H, name + ".q", a.bias), {B, S, a.heads, hd});
  ValueId k =
      ops.reshape(dense(ops, x, H, a.kv_heads * hd, name + ".k", a.bias), {B, S, a.kv_heads, hd});
  ValueId v =
      ops.reshape(dense(ops, x, H, a.kv_heads * hd, name + ".v", a.bias), {B, S, a.kv_heads, hd});
  if (a.rope_theta > 0) {
    q = ops.rotary(q, a.rope_theta);
    k = ops.rotary(k, a.rope_theta);
  }
  ValueId ctx;
  double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  if (g == 1) {
    ValueId sc = ops.scale(ops.einsum("bqhd,bkhd->bhqk", q, k), scale);
    if (a.causal) sc = ops.causal_mask(sc);
    ctx = ops.einsum("bhqk,bkhd->bqhd", ops.softmax(sc, -1), v);
  } else {
    // Grouped-query: query heads grouped per kv head, [B, S, kv, g, hd].
    ValueId q5 = ops.reshape(q, {B, S, a.kv_heads, g, hd});
    ValueId sc = ops.scale(ops.einsum("bqngd,bknd->bngqk", q5, k), scale);
    if (a.causal) sc = ops.causal_mask(sc);
    ctx = ops.einsum("bngqk,bknd->bqngd", ops.softmax(sc, -1), v);
  }
  ctx = ops.reshape(ctx, {B, S, H});
  return dense(ops, ctx, H, H, name + ".o", a.bias);
}

ValueId layer_norm(Ops& ops, ValueId x, int64_t h, const std::string& name) {
  return ops.layernorm(x, ops.param(name + ".gamma", f32({h})),
                       ops.param(name + ".beta", f32({h})));
}

ValueId mean_loss(Ops& ops, ValueId logits) {
  if (!ops.ok()) return kNoValue;
  const IVec& s = ops.shape(logits);
  std::vector<int64_t> lead(s.begin(), s.end() - 1), axes;
  for (size_t i = 0; i < lead.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  ValueId labels = ops.input("labels", i64(lead));
  return ops.reduce(OpKind::kReduceMean, ops.cross_entropy(logits, labels), axes);
}

bool check_min(Ops& ops, const char* model, const char* field, int64_t value, int64_t min) {
  if (value >= min) return true;
  ops.fail(std::string(model) + ": field '" + field + "' must be >= " + std::to_string(min) +
           ", got " + std::to_string(value));
  return false;
}

bool check_range(Ops& ops, const char* model, const char* field, int64_t value, int64_t min,
                 int64_t max, const std::string& why) {
  if (value >= min && value <= max) return true;
  ops.fail(std::string(model) + ": field '" + field + "' must be in [" + std::to_string(min) +
           ", " + std::to_string(max) + "] (" + why + "), got " + std::to_string(value));
  return false;
}

bool check_divisible(Ops& ops, const char* model, const char* fa, int64_t a, const char* fb,
                     int64_t b) {
  if (b > 0 && a % b == 0) return true;
  ops.fail(std::string(model) + ": " + fa + " " + std::to_string(a) + " is not divisible by " + fb +
           " " + std::to_string(b));
  return false;
}

}  // namespace heddle::zoo::blocks
