// Private building blocks shared by the zoo's models: dense layers, attention, MLPs, loss.
#pragma once

#include <string>

#include "heddle/ops/Ops.h"

namespace heddle::zoo::blocks {

/// x [..., in] @ w [in, out] (+ bias [out]); params `<name>.w`, `<name>.bias`.
ValueId dense(Ops& ops, ValueId x, int64_t in, int64_t out, const std::string& name, bool bias);

/// Attention settings.
struct AttnSpec {
  int64_t heads = 1;
  int64_t kv_heads = 1;  ///< == heads: multi-head; fewer: grouped-query
  bool causal = true;
  bool bias = true;
  double rope_theta = 0;  ///< > 0: rotary positions on q and k
};

/// Self-attention over x [B, S, H]: projections, scaled scores as einsums over the head layout
/// [B, S, heads, head_dim], mask, softmax, context, output projection. Returns [B, S, H].
ValueId attention(Ops& ops, ValueId x, const AttnSpec& a, const std::string& name);

/// LayerNorm with params `<name>.gamma`, `<name>.beta`.
ValueId layer_norm(Ops& ops, ValueId x, int64_t h, const std::string& name);

/// Mean cross-entropy of logits [..., V] against an integer `labels` input of the leading shape;
/// returns the scalar loss.
ValueId mean_loss(Ops& ops, ValueId logits);

/// Checks `value >= min`, recording "field '<field>' must be >= <min>, got <value>" on `ops`.
bool check_min(Ops& ops, const char* model, const char* field, int64_t value, int64_t min);

/// Checks `min <= value <= max`, recording "field '<field>' must be in [<min>, <max>] (<why>)".
bool check_range(Ops& ops, const char* model, const char* field, int64_t value, int64_t min,
                 int64_t max, const std::string& why);

/// Checks that `a` divides by `b`, recording a message naming both fields.
bool check_divisible(Ops& ops, const char* model, const char* fa, int64_t a, const char* fb,
                     int64_t b);

}  // namespace heddle::zoo::blocks
