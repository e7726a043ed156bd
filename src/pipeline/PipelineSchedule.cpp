#include "heddle/pipeline/PipelineSchedule.h"

#include <fmt/format.h>

#include <optional>

#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Strings.h"

namespace heddle::pipeline {

Result<PipelineSchedule> PipelineSchedule::parse(std::string_view text) {
  if (text == "gpipe") return PipelineSchedule{ScheduleKind::kGpipe, 1};
  if (text == "1f1b") return PipelineSchedule{ScheduleKind::k1f1b, 1};
  if (text == "zb-h1") return PipelineSchedule{ScheduleKind::kZbH1, 1};
  if (text == "zb-h2") return PipelineSchedule{ScheduleKind::kZbH2, 1};
  if (text == "searched") return PipelineSchedule{ScheduleKind::kSearched, 1};
  if (text == "interleaved") return PipelineSchedule{ScheduleKind::kInterleaved, 2};
  if (text.rfind("interleaved:", 0) == 0) {
    std::optional<int64_t> v = parse_int(text.substr(12));
    if (!v || *v < 1 || *v > kMaxChunks)
      return Diagnostic(fmt::format(
          "schedule '{}': write interleaved:V with V the number of model chunks per stage, 1 to "
          "{} (e.g. interleaved:2)",
          text, kMaxChunks));
    return PipelineSchedule{ScheduleKind::kInterleaved, *v};
  }
  return Diagnostic(fmt::format(
      "unknown schedule '{}'; known: gpipe, 1f1b, interleaved:V, zb-h1, zb-h2, searched", text));
}

std::string PipelineSchedule::to_string() const {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return "gpipe";
    case ScheduleKind::k1f1b:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return fmt::format("interleaved:{}", chunks);
    case ScheduleKind::kZbH1:
      return "zb-h1";
    case ScheduleKind::kZbH2:
      return "zb-h2";
    case ScheduleKind::kSearched:
      return "searched";
  }
  HEDDLE_UNREACHABLE();
}

std::string PipelineSchedule::baseline() const {
  HEDDLE_ASSERT(kind != ScheduleKind::kSearched) << "a searched schedule has no baseline";
  return kind == ScheduleKind::kInterleaved ? "interleaved" : to_string();
}

size_t PipelineSchedule::hash() const {
  size_t h = 0;
  hash_combine(h, static_cast<int>(kind));
  hash_combine(h, chunks);
  return h;
}

BlockPlacement schedule_placement(const PipelineSchedule& schedule, int stages, bool train) {
  HEDDLE_ASSERT(stages >= 1 && schedule.kind != ScheduleKind::kSearched)
      << "schedule_placement(" << schedule.to_string() << ", " << stages << ")";
  if (!train) {
    BlockPlacement pl;
    pl.name = pl.family = "forward";
    pl.num_devices = stages;
    const int64_t C = stages * schedule.chunks;
    for (int64_t c = 0; c < C; ++c) {
      pl.blocks.push_back(
          {"f" + std::to_string(c), "forward", 1, 0, {static_cast<int>(c % stages)}});
      if (c > 0) pl.deps.push_back({static_cast<int>(c - 1), static_cast<int>(c)});
    }
    return pl;
  }
  if (schedule.split_backward()) return make_vshape_zb(stages);
  if (schedule.kind == ScheduleKind::kInterleaved)
    return make_interleaved(stages, static_cast<int>(schedule.chunks));
  return make_vshape(stages);
}

}  // namespace heddle::pipeline
