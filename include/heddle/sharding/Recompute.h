// Activation recomputation, as a strategy names it (`recompute=none|selective|full`): parsed
// once into this enum, which the memory model, the simulator and the search take.
#pragma once

#include <cstdint>
#include <string_view>

#include "heddle/support/Result.h"

namespace heddle {

/// What the backward pass recomputes instead of keeping from the forward.
enum class Recompute : uint8_t {
  kNone,       ///< keep every activation
  kSelective,  ///< recompute attention's inner activations (Korthikanti et al.)
  kFull,       ///< keep only each layer's input; recompute the whole layer
};

/// Parses `none`, `selective` or `full`; anything else is a diagnostic listing them.
Result<Recompute> parse_recompute(std::string_view text);

/// The name parse_recompute() reads back.
std::string_view to_string(Recompute r);

}  // namespace heddle
