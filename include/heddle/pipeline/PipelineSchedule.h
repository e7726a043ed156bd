// The pipeline schedule a strategy names (`schedule=gpipe|1f1b|interleaved:V|zb-h1|zb-h2|
// searched`), parsed once into a typed value, and the one placement (blocks of a micro-batch)
// that every user of the schedule builds from it: the simulator, the inter-op search and the
// runtime's pipeline programs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "heddle/pipeline/Placement.h"
#include "heddle/support/Result.h"

namespace heddle::pipeline {

/// The schedule families a strategy can name.
enum class ScheduleKind : uint8_t {
  kGpipe,        ///< all forwards, then all backwards
  k1f1b,         ///< one-forward-one-backward (Megatron's default)
  kInterleaved,  ///< interleaved 1F1B: `chunks` model chunks per stage
  kZbH1,         ///< zero-bubble H1: backward split into input- and weight-gradient blocks
  kZbH2,         ///< zero-bubble H2 (the same split, more memory)
  kSearched,     ///< found by heddle's schedule search (`heddle schedule`); not simulated or run
};

/// A strategy's pipeline schedule: its family and, for interleaved 1F1B, the model chunks per
/// stage (V). An immutable value; `chunks` is 1 for every other kind.
struct PipelineSchedule {
  /// Largest V `interleaved:V` accepts.
  static constexpr int64_t kMaxChunks = 64;

  ScheduleKind kind = ScheduleKind::k1f1b;  ///< default: 1F1B
  int64_t chunks = 1;                       ///< V for kInterleaved (1..kMaxChunks), else 1

  /// Parses `gpipe`, `1f1b`, `interleaved:V` (1 <= V <= 64), `zb-h1`, `zb-h2` or `searched`.
  /// A bare `interleaved` means `interleaved:2` (Megatron's usual V), everywhere a schedule or
  /// placement name is read. Anything else is a diagnostic listing the known names.
  static Result<PipelineSchedule> parse(std::string_view text);
  /// The canonical text, which parse() reads back: `interleaved:V` always carries its V.
  std::string to_string() const;
  /// The baseline name of pipeline/Baselines.h that orders this schedule's blocks (`gpipe`,
  /// `1f1b`, `interleaved`, `zb-h1`, `zb-h2`). Precondition: kind != kSearched.
  std::string baseline() const;
  /// True for the zero-bubble kinds, whose backward splits into B and W blocks.
  bool split_backward() const { return kind == ScheduleKind::kZbH1 || kind == ScheduleKind::kZbH2; }
  bool operator==(const PipelineSchedule&) const = default;
  /// Hash consistent with ==.
  size_t hash() const;
};

/// One micro-batch's blocks for `schedule` over `stages` stages of `schedule.chunks` chunks each
/// (chunk c on stage c % stages). Training: the V-shape of 1F1B and GPipe (make_vshape), the
/// interleaved V passes (make_interleaved) or the zero-bubble split (make_vshape_zb). Forward
/// only: the chain of stages * chunks forward blocks `f0, f1, ...` (span 1, memory 0), whatever
/// the schedule. Spans and memory are unit values the caller may overwrite.
/// Precondition: stages >= 1, schedule.kind != kSearched.
BlockPlacement schedule_placement(const PipelineSchedule& schedule, int stages, bool train);

}  // namespace heddle::pipeline

template <>
struct std::hash<heddle::pipeline::PipelineSchedule> {
  size_t operator()(const heddle::pipeline::PipelineSchedule& s) const { return s.hash(); }
};
