// Sharding annotations: a value's or an op's declarative tactic as the text form writes it
// (`param %w: f32[784, 512] shard{1=tp}`, `input %x: f32[8, 4] replicate`, an op's
// `-> (m, n) split{n=tp}`). The IR only keeps them, by mesh-axis name; sharding/Tactics.h turns
// them into pins for one mesh and reports conflicts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace heddle {

/// One pinned mesh axis: the dim it splits (a value's tensor dim, or an op's index dim) and the
/// axis, by name.
struct AxisPin {
  int64_t dim = 0;
  std::string axis;
  bool operator==(const AxisPin&) const = default;
};

/// A value's or an op's tactic. Empty (the default): nothing pinned.
struct ShardAnnotation {
  /// `replicate`: the value is whole on every mesh axis (an op: computed unsplit on every axis).
  bool replicate = false;
  /// `shard{1=tp}` (values) / `split{n=tp}` (ops), in the order written; at most one per axis.
  std::vector<AxisPin> pins;
  /// The source line of the annotation (0 when built in code), for conflict diagnostics.
  int32_t line = 0;

  bool empty() const { return !replicate && pins.empty(); }
  bool operator==(const ShardAnnotation&) const = default;
};

}  // namespace heddle
