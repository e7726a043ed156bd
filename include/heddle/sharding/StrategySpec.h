// The strategy language of the CLI: `auto`, or `dp=2,tp=4,pp=2,zero=1,sp=on,schedule=1f1b,...`,
// the vocabulary users know from Megatron-LM and DeepSpeed. Parsed into a value; the tactics map
// it onto pins for propagation and search.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/pipeline/PipelineSchedule.h"
#include "heddle/sharding/Mesh.h"
#include "heddle/sharding/Recompute.h"
#include "heddle/sharding/StepTechniques.h"
#include "heddle/support/Result.h"

namespace heddle {

/// How a step's batch splits into pipeline micro-batches: `count` micro-batches, each of
/// `size` sequences per data-parallel replica (of the first stage, with per-stage `meshes`).
struct MicroBatching {
  int64_t size = 1;   ///< sequences per replica per micro-batch
  int64_t count = 1;  ///< micro-batches per step
  bool operator==(const MicroBatching&) const = default;
};

/// A parsed strategy string. Unset fields are left to the search (or default to 1 / off).
struct StrategySpec {
  bool auto_search = false;  ///< `auto` was given (possibly with pins)
  std::optional<int64_t> dp, tp, pp, ep;
  /// `cp=`: context parallelism, the sequence split over this many devices (unset: 1). Queries
  /// stay with their sequence block; keys and values are gathered over the `cp` axis.
  std::optional<int64_t> cp;
  /// `cp_comm=allgather|ring`: how the executor moves a cp layer's keys and values (unset: the
  /// ring, as the cost model prices it and the exports write it; see ring_cp()).
  std::optional<CpComm> cp_comm;
  /// `cp_layout=zigzag|contiguous`: how `run` splits the sequence over the cp group (unset:
  /// zigzag where the graph allows it, the causal load balancing the cost model prices; see
  /// runtime/SequenceLayout.h). Execution only: the plan and its cost are the same.
  std::optional<CpLayout> cp_layout;
  std::optional<int64_t> zero;          ///< ZeRO stage 0-3
  std::optional<int64_t> micro_batch;   ///< `mb`: micro-batch size
  std::optional<int64_t> microbatches;  ///< number of micro-batches
  /// `schedule=`: gpipe|1f1b|interleaved:V|zb-h1|zb-h2|searched (unset: 1F1B where it matters).
  std::optional<pipeline::PipelineSchedule> schedule;
  std::optional<Recompute> recompute;  ///< `recompute=`: none|selective|full (unset: none)
  bool sp = false;                     ///< sequence parallelism
  /// `precision=`, `attention=`, `overlap=`, `offload=`: how the step runs (unset: the device's
  /// defaults, see cost::resolve_techniques).
  std::optional<Precision> precision;
  std::optional<Attention> attention;
  std::optional<Overlap> overlap;
  std::optional<Offload> offload;
  /// `layers=10/12/12/14`: repeating layers per pipeline chunk, first to last (the simulator
  /// checks one entry per chunk, each >= 1, summing to the model's layers); empty: even split.
  std::vector<int64_t> layers;
  /// One pipeline stage's sub-mesh: `dp` replicas of a `tp`-way tensor-parallel group.
  struct StageMesh {
    int64_t dp = 1, tp = 1;
    bool operator==(const StageMesh&) const = default;
  };
  /// `meshes=2x4/4x2/..`: per pipeline stage, first to last, its own dp x tp sub-mesh (stages
  /// may differ in size; devices() is their sum). Set: dp and tp are unset, ep is 1 and pp is the
  /// entry count (parse() enforces it). Empty: every stage is dp x tp.
  std::vector<StageMesh> meshes;

  /// Parses the text. Unknown keys, bad values and repeated keys are diagnostics that list what is
  /// valid.
  static Result<StrategySpec> parse(std::string_view text);
  /// Product of the given parallel degrees (dp * cp * tp * pp * ep, unset counting as 1); with
  /// `meshes`, the sum of the stages' dp x tp.
  int64_t devices() const;
  /// True when the executor moves the cp axis's keys and values as ring steps (the plan's
  /// ring_axis is the cp axis): cp > 1 and cp_comm not `allgather` (unset means the ring).
  bool ring_cp() const;
  /// True when `meshes` gives stages of different shapes (equal ones are the plain dp/tp form).
  bool heterogeneous() const;
  /// This strategy with equal per-stage `meshes` written in the plain dp/tp form (one canonical
  /// form for one plan); heterogeneous or absent `meshes` are returned unchanged.
  StrategySpec without_equal_meshes() const;
  /// The canonical text: keys in a fixed order, `auto` first.
  std::string to_string() const;
  /// The one micro-batch policy (simulate, plan and run): `mb` (per replica) or `microbatches`
  /// when given (both: they must agree); otherwise, with pp > 1 and a model that can be rebuilt
  /// at the micro-batch size (`rebuildable`), one sequence per replica per micro-batch, else one
  /// micro-batch of the whole batch. With per-stage `meshes` of different dp, every micro-batch
  /// splits over each stage's replicas (default: one sequence per replica of the widest stage;
  /// `mb` is refused). Diagnostics: a batch that dp, mb or microbatches do not divide.
  Result<MicroBatching> micro_batching(int64_t batch, bool rebuildable) const;
  /// The mesh the degrees describe: named axes in the order pp, dp, ep, cp, tp (tensor parallel
  /// innermost, where links are fastest, context parallel next: Megatron-LM's tp-cp-ep-dp-pp), axes
  /// of degree 1 omitted. `count`: the device count the user asked for; a product that differs is a
  /// diagnostic saying so. Heterogeneous `meshes` have no single mesh: a diagnostic saying so.
  Result<Mesh> mesh(int64_t count) const;
};

}  // namespace heddle
