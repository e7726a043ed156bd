// Declarative tactics per value and op, as in Vytiniotis et al., "Declarative abstractions for
// tensor program partitioning": shard this value's dim on this mesh axis, replicate that one,
// split this op's index dim; propagation completes the rest. Written in the text IR (a value's
// `shard{1=tp}` or `replicate`, an op's `split{n=tp}`) or on the command line
// (`--tactic '%w:1=tp'`), parsed once into Tactic values and applied to Pins for one mesh.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/sharding/Propagate.h"

namespace heddle {

/// One tactic: a single pinned axis of a value or an op, or a value (op) kept whole.
struct Tactic {
  enum class Kind : uint8_t {
    kShardValue,      ///< `%w:1=tp`: tensor dim `tensor_dim` of the value sharded on `axis`
    kReplicateValue,  ///< `%x=replicate`: the value whole on every mesh axis
    kSplitOp,         ///< `%h:n=tp`: the op defining the value splits index dim `index_dim`
    kReplicateOp,     ///< (text IR `replicate` after an op) the op computed whole on every axis
  };
  Kind kind = Kind::kShardValue;
  std::string value;       ///< the value (an op tactic: a result of the op), without the `%`
  int64_t tensor_dim = 0;  ///< kShardValue
  std::string index_dim;   ///< kSplitOp: the index dim's name
  std::string axis;        ///< the mesh axis (kShardValue, kSplitOp)
  std::string source;      ///< where it was written: `file:line`, or `--tactic '%w:1=tp'`

  /// Parses the command-line form: `%w:1=tp` (a tensor dim: digits), `%h:n=tp` (an index dim of
  /// the op defining %h: a name), `%x=replicate`; names may be quoted (`%"a/b":0=dp`). Errors
  /// say what was expected. `source` becomes `--tactic '<text>'`.
  static Result<Tactic> parse(std::string_view text);
  /// The command-line form (for a replicated op, `%h:op=replicate`, which parse() does not
  /// read: the text IR writes it).
  std::string to_string() const;
  bool operator==(const Tactic&) const = default;
};

/// The tactics annotated in `g`'s text form (values' `shard{..}` / `replicate`, ops'
/// `split{..}` / `replicate`), one per pinned axis, in graph order, their source the graph's
/// file and line.
std::vector<Tactic> graph_tactics(const Graph& g);

/// Adds `tactics` to `pins` (which may hold a preset's pins, written by `preset`, e.g.
/// `--strategy dp=2`) for `g` on `mesh`. Diagnostics name the tactic's source and the real
/// cause: an unknown value, index dim or mesh axis (listing the valid ones); a tensor dim out of
/// range; two tactics (or a tactic and the preset) that disagree on one value or op on one axis,
/// naming both sources; an op split that the projections cannot take (derive_placements' reason:
/// projection form, halo, divisibility); a value pin that disagrees with its producer's op pin.
Result<Pins> apply_tactics(const Graph& g, const Mesh& mesh, Pins pins,
                           const std::vector<Tactic>& tactics, std::string_view preset = {});

}  // namespace heddle
