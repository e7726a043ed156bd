// The training stacks a plan can be handed to (Megatron-LM, torchtitan, DeepSpeed, heddle's own
// runtime) and which of heddle's strategies each one can execute: the one table behind
// `plan --target`, `runnable_by` and the exports, so that they never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/sharding/StrategySpec.h"
#include "heddle/support/Result.h"

namespace heddle::exporting {

/// A stack that executes plans; `kAny` (the default of `--target`) admits every strategy.
enum class Target : uint8_t { kMegatron, kTorchtitan, kDeepSpeed, kHeddle, kAny };

/// The stacks in the order `runnable_by` lists them (kAny excluded).
inline constexpr Target kStacks[] = {Target::kMegatron, Target::kTorchtitan, Target::kDeepSpeed,
                                     Target::kHeddle};

/// Parses `megatron`, `torchtitan`, `deepspeed`, `heddle` or `any`; a diagnostic listing them.
Result<Target> parse_target(std::string_view text);
/// The name parse_target() reads back.
std::string to_string(Target t);

/// What a target needs to know of a plan besides its strategy.
struct PlanKind {
  bool train = true;             ///< a training step (exports are training configurations)
  bool intra_op_stages = false;  ///< stages sharded by heddle's intra-op ILP, not the tactics
};

/// Whether `target` can execute `spec` as heddle prices it; a diagnostic naming the strategy key
/// and the reason otherwise (e.g. per-stage sub-meshes, a schedule the stack lacks). `kAny`
/// admits everything.
Status expressible(Target target, const StrategySpec& spec, const PlanKind& kind);

/// The stacks (of kStacks) that can execute `spec`.
std::vector<Target> runnable_by(const StrategySpec& spec, const PlanKind& kind);

/// The search pins for `target`: `pins` with what the stack always does added (torchtitan
/// applies sequence parallelism with every tensor-parallel degree, so its plans have `sp=on`).
StrategySpec target_pins(Target target, StrategySpec pins);

}  // namespace heddle::exporting
