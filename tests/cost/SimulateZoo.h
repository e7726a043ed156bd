// Test helper: simulate a zoo model at a batch on a cluster preset, expecting success.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "heddle/cost/Simulator.h"

namespace heddle::cost {

/// simulate() of zoo `model` with global batch `batch` on `cluster` under `strategy`; a failure
/// is a test failure (and an empty result).
inline SimulationResult simulate_zoo(const std::string& model, const std::string& cluster,
                                     const std::string& strategy, int64_t batch, bool train,
                                     bool overlap) {
  zoo::ZooOverrides o;
  o.batch = batch;
  auto src = model::zoo_scalable_model(model, o);
  auto c = resolve_cluster(cluster);
  auto s = StrategySpec::parse(strategy);
  EXPECT_TRUE(src.ok() && c.ok() && s.ok());
  if (!src.ok() || !c.ok() || !s.ok()) return {};
  SimulateOptions opts;
  opts.train = train;
  opts.overlap = overlap;
  auto r = simulate(*src, *c, *s, opts);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : SimulationResult{};
}

}  // namespace heddle::cost
