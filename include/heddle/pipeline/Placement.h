// BlockPlacement: the blocks of one micro-batch (type, span, memory delta, devices) and the
// dependencies between them. Every micro-batch of a pipeline repeats the same placement. (Not
// sharding's per-mesh-axis tensor `Placement`, heddle/sharding/Placement.h.)
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "heddle/support/Result.h"

namespace heddle::pipeline {

/// One unit of work of a micro-batch. `span` > 0 time units; `memory` is a signed delta charged
/// on every device in `devices` when the block starts; `devices` is non-empty, without repeats.
struct Block {
  std::string name;
  std::string type;  ///< Free text: "forward", "backward", "weight-grad", ...
  double span = 1.0;
  double memory = 0.0;
  std::vector<int> devices;

  bool operator==(const Block&) const = default;
  /// `name:type[span=.., mem=.., dev=[..]]`.
  std::string to_string() const;
};

/// One micro-batch's blocks over `num_devices` devices and the dependencies between them
/// (`deps[k] = {a, b}`: block b starts after block a ends). `family` names the built-in shape
/// this was made from ("vshape", "interleaved", "vshape-zb", "xshape", "mshape", "kshape",
/// "nnshape"; empty for files); baselines use it to decide whether they apply.
struct BlockPlacement {
  std::string name;
  std::string family;
  int chunks = 1;  ///< Model chunks per device for the "interleaved" family, else 1.
  int num_devices = 0;
  std::vector<Block> blocks;
  std::vector<std::pair<int, int>> deps;

  bool operator==(const BlockPlacement&) const = default;
  /// A multi-line text form listing blocks and dependencies.
  std::string to_string() const;
  /// Hash of the whole descriptor (consistent with ==).
  size_t hash() const;
};

/// Checks the rules of a placement: at least one device and one block, names unique and
/// non-empty, spans > 0 and finite, every block on >= 1 existing device without repeats, deps
/// referring to existing blocks, no self-dependency and no cycle. `file` locates diagnostics.
Status check_placement(const BlockPlacement& p, const std::string& file = "");

/// Blocks in a topological order of `p.deps`, ties broken by block index.
/// Precondition: check_placement(p) succeeded.
std::vector<int> topological_order(const BlockPlacement& p);

/// Predecessor lists (`preds[b]` = blocks b depends on), sorted, deduplicated.
std::vector<std::vector<int>> predecessors(const BlockPlacement& p);

/// Successor lists, sorted, deduplicated.
std::vector<std::vector<int>> successors(const BlockPlacement& p);

/// Busy time of each device for one micro-batch (sum of spans of the blocks on it).
std::vector<double> device_loads(const BlockPlacement& p);

/// True when every span is a whole number.
bool has_integer_spans(const BlockPlacement& p);

}  // namespace heddle::pipeline

template <>
struct std::hash<heddle::pipeline::BlockPlacement> {
  size_t operator()(const heddle::pipeline::BlockPlacement& p) const { return p.hash(); }
};
