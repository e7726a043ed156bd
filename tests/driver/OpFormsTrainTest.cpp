// Issue #23: every op form the generator writes (tests/common/RandomForms.h) that autodiff takes
// trains on 1 and 4 thread-devices through the run request `heddle run --train --check` uses, and
// matches the single-device reference at every step.
#include <gtest/gtest.h>

#include <set>

#include "common/RandomForms.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/ir/TextParser.h"

namespace heddle::driver {
namespace {

// Six forms of every family (seeds cycle through the families), each trained for 2 steps.
TEST(OpFormsTrain, EveryGeneratedFormTrainsOnOneAndFourDevices) {
  const uint64_t forms = 6 * testing::form_families().size();
  int trained = 0;
  std::set<std::string> families;
  for (uint64_t seed = 0; seed < forms; ++seed) {
    testing::OpForm f = testing::random_form(seed);
    if (!f.trains) continue;
    for (const char* mesh : {"1", "4"}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + f.family + " --mesh " + mesh + "\n" +
                   f.text);
      auto g = parse_graph(f.text, "form.hd");
      ASSERT_TRUE(g.ok()) << g.error().to_string();
      RunRequest r;
      r.model.source = "form.hd";
      r.mesh = mesh;
      r.train = true;
      r.check = true;
      r.steps = 2;
      model::LoadedModel loaded;
      loaded.graph = std::move(*g);
      auto p = prepare_run(r, std::move(loaded));
      ASSERT_TRUE(p.ok()) << p.error().to_string();
      auto ran = run_threads(r, *p, {});
      ASSERT_TRUE(ran.ok()) << ran.error().to_string();
      const RunSummary& s = ran->summary;
      ASSERT_NE(s.check, nullptr);
      EXPECT_TRUE(s.check->ok) << "max abs " << s.check->max_abs << ", rel " << s.check->max_rel;
      EXPECT_EQ(s.result.losses.size(), 2u);
      EXPECT_EQ(s.mesh.num_devices(), mesh[0] - '0');
    }
    ++trained;
    families.insert(f.family);
  }
  EXPECT_GE(trained, static_cast<int>(forms) - 6);
  EXPECT_TRUE(families.count("conv2d(bias)") && families.count("conv2d"));
}

}  // namespace
}  // namespace heddle::driver
