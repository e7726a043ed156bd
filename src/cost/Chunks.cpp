#include "Chunks.h"

#include <fmt/format.h>

#include <algorithm>

#include "heddle/pipeline/BuiltinPlacements.h"

namespace heddle::cost {

Result<std::vector<int64_t>> layer_split(const std::vector<int64_t>& layers,
                                         const model::ScalableModel& model, int64_t chunks) {
  if (model.layers < 2 * model.unit)
    return Diagnostic("layers= splits a model's repeating layers over pipeline chunks; " +
                      model.name + " has none");
  if (static_cast<int64_t>(layers.size()) != chunks)
    return Diagnostic(fmt::format(
        "layers= gives {} entries but the pipeline has {} chunks (pp x the schedule's chunks per "
        "stage); give one layer count per chunk",
        layers.size(), chunks));
  std::vector<int64_t> units;
  int64_t sum = 0;
  for (int64_t n : layers) {
    if (n < model.unit || n % model.unit != 0)
      return Diagnostic(fmt::format(
          "layers= entry {} is not a positive multiple of the model's {}-layer repeating unit", n,
          model.unit));
    units.push_back(n / model.unit);
    sum += n;
  }
  if (sum != model.layers)
    return Diagnostic(
        fmt::format("layers= entries sum to {} but {} has {} layers; they must sum "
                    "to the model's layers",
                    sum, model.name, model.layers));
  return units;
}

ChunkPlacement chunk_placement(const std::vector<Timing>& chunk, int64_t pp,
                               const pipeline::PipelineSchedule& schedule, bool train) {
  ChunkPlacement out;
  pipeline::BlockPlacement& pl = out.pl;
  pl = pipeline::schedule_placement(schedule, static_cast<int>(pp), train);
  const int64_t v = schedule.chunks;
  if (!train) {
    for (size_t c = 0; c < pl.blocks.size(); ++c) {
      pl.blocks[c].span = std::max(chunk[c].fwd, 1e-12);
      out.parts.push_back(chunk[c].fwd_parts);
    }
    return out;
  }
  std::vector<int> fwd_seen(static_cast<size_t>(pp)), bwd_seen(static_cast<size_t>(pp)),
      w_seen(static_cast<size_t>(pp));
  const bool split_w = schedule.split_backward();
  for (auto& b : pl.blocks) {
    int d = b.devices.front();
    if (b.type == "forward") {
      const Timing& t = chunk[static_cast<size_t>(fwd_seen[d]++ * pp + d)];
      b.span = t.fwd;
      b.memory = t.saved;
      out.parts.push_back(t.fwd_parts);
    } else if (b.type == "backward") {
      int64_t c = (v - 1 - bwd_seen[d]++) * pp + d;
      const Timing& t = chunk[static_cast<size_t>(c)];
      b.span = split_w ? t.bwd - t.wgrad : t.bwd;
      b.memory = split_w ? 0 : -t.saved;
      StepBreakdown parts = t.bwd_parts;
      if (split_w) parts.compute_s -= t.wgrad;
      out.parts.push_back(parts);
    } else {
      int64_t c = (v - 1 - w_seen[d]++) * pp + d;
      const Timing& t = chunk[static_cast<size_t>(c)];
      b.span = t.wgrad;
      b.memory = -t.saved;
      StepBreakdown parts;
      parts.compute_s = t.wgrad;
      out.parts.push_back(parts);
    }
    b.span = std::max(b.span, 1e-12);
  }
  return out;
}

}  // namespace heddle::cost
