// `heddle run` and `heddle show --mesh/--strategy` end to end: every zoo model (small configs)
// partitioned with dp, tp, dp x tp, sp and zero on 1 to 8 thread-devices equals the interpreter;
// bad meshes and strategies exit 1 saying what would work.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

struct Case {
  const char* model;
  const char* mesh;
  const char* strategy;
};

TEST(RunCli, ZooModelsMatchTheReferenceOnEveryStrategy) {
  const Case cases[] = {
      {"mlp", "1", ""},
      {"mlp", "2", "dp=2"},
      {"mlp", "2", "tp=2"},
      {"mlp", "8", "dp=2,tp=4"},
      {"gpt-tiny", "1", ""},
      {"gpt-tiny", "2", "dp=2"},
      {"gpt-tiny", "2", "tp=2"},
      {"gpt-tiny", "4", "dp=2,tp=2"},
      {"gpt-tiny", "2", "tp=2,sp=on"},
      {"gpt-tiny", "2", "dp=2,zero=3"},
      {"gpt-tiny", "8", "dp=2,tp=4"},
      {"llama-tiny", "4", "dp=2,tp=2"},
      {"llama-tiny", "2", "tp=2,sp=on"},
      {"llama-tiny", "8", "dp=2,tp=4"},
      {"moe-tiny", "4", "dp=2,tp=2"},
      {"moe-tiny", "2", "dp=2,zero=3"},
      {"moe-tiny", "8", ""},
      {"gpt-tiny", "4", "auto"},
      {"llama-tiny", "4", "auto"},
  };
  for (const auto& c : cases) {
    std::string args =
        std::string("run ") + c.model + " --mesh " + c.mesh + " --check --json" +
        (std::string(c.strategy).empty() ? "" : std::string(" --strategy ") + c.strategy);
    auto r = run_heddle(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["ok"].get<bool>()) << args;
    EXPECT_LT(j["max_abs_error"].get<double>(), 1e-4) << args;
    EXPECT_EQ(j["devices"].get<int64_t>(), std::stoll(c.mesh)) << args;
    // A data-parallel forward step needs no communication: each device's output rows land in
    // the caller's tensor (the threads assemble outputs from tiles). Other splits exchange.
    if (std::string(c.strategy) == "dp=2") {
      EXPECT_EQ(j["collectives"].get<int64_t>(), 0) << args;
    } else if (std::stoll(c.mesh) > 1) {
      EXPECT_GT(j["collectives"].get<int64_t>(), 0) << args;
    }
  }
}

// The vision models (ResNet-50's bottleneck structure, ViT) on 1 to 8 devices with every strategy
// that applies: tp splits a ResNet's channels (and, where propagation finds it cheaper, its image
// rows, exchanging halos) and a ViT's heads and MLP, sp a ViT's tokens; zero shards parameters
// or optimizer updates; forward and one training step, each checked against the interpreter.
TEST(RunCli, VisionZooModelsMatchTheReferenceForwardAndTraining) {
  struct VisionCase {
    const char* model;
    const char* mesh;
    const char* strategy;
    bool train;
  };
  const VisionCase cases[] = {
      {"resnet-tiny", "1", "", false},
      {"resnet-tiny", "2", "dp=2", false},
      {"resnet-tiny", "2", "tp=2", false},
      {"resnet-tiny", "4", "dp=2,tp=2", false},
      {"resnet-tiny", "8", "dp=2,tp=4", false},
      {"resnet-tiny", "2", "dp=2,zero=3", false},
      {"resnet-tiny", "1", "", true},
      {"resnet-tiny", "2", "dp=2", true},
      {"resnet-tiny", "2", "tp=2", true},
      {"resnet-tiny", "4", "dp=2,tp=2", true},
      {"resnet-tiny", "2", "dp=2,zero=3", true},
      {"resnet-tiny", "8", "dp=2,tp=4", true},
      {"vit-tiny", "1", "", false},
      {"vit-tiny", "2", "dp=2", false},
      {"vit-tiny", "2", "tp=2,sp=on", false},
      {"vit-tiny", "4", "dp=2,tp=2", false},
      {"vit-tiny", "8", "dp=2,tp=4", false},
      {"vit-tiny", "1", "", true},
      {"vit-tiny", "2", "tp=2", true},
      {"vit-tiny", "2", "tp=2,sp=on", true},
      {"vit-tiny", "4", "dp=2,tp=2", true},
      {"vit-tiny", "2", "dp=2,zero=1", true},
      {"vit-tiny", "2", "dp=2,zero=3", true},
      {"vit-tiny", "8", "dp=2,tp=4", true},
  };
  for (const auto& c : cases) {
    std::string args =
        std::string("run ") + c.model + " --mesh " + c.mesh + " --check --json" +
        (std::string(c.strategy).empty() ? "" : std::string(" --strategy ") + c.strategy) +
        (c.train ? " --train --steps 1 --optimizer sgd" : "");
    auto r = run_heddle(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["ok"].get<bool>()) << args;
    EXPECT_EQ(j["devices"].get<int64_t>(), std::stoll(c.mesh)) << args;
    // A data-parallel forward step may need no communication (the threads assemble the output
    // from the devices' rows); every other split exchanges.
    if (std::stoll(c.mesh) > 1 && (std::string(c.strategy) != "dp=2" || c.train)) {
      EXPECT_GT(j["collectives"].get<int64_t>(), 0) << args;
    }
    if (c.train) {
      EXPECT_EQ(j["loss"].get<std::vector<double>>().size(), 1u) << args;
      EXPECT_EQ(j["adamw_elements_compared_by_gradient"].get<int64_t>(), 0) << args;
    } else {
      EXPECT_LT(j["max_abs_error"].get<double>(), 1e-4) << args;
    }
  }
}

TEST(RunCli, PartitionedTrainingStepsMatchTheReferenceAndLearn) {
  const Case cases[] = {
      {"gpt-tiny", "4", "dp=2,tp=2"}, {"llama-tiny", "2", "tp=2,sp=on"},
      {"mlp", "2", "dp=2,zero=1"},    {"gpt-tiny", "2", "dp=2,zero=3"},
      {"moe-tiny", "2", "dp=2"},
  };
  for (const auto& c : cases)
    for (const char* opt : {"adamw", "sgd"}) {
      std::string args = std::string("run ") + c.model + " --mesh " + c.mesh + " --strategy " +
                         c.strategy + " --train --steps 3 --check --json --optimizer " + opt;
      auto r = run_heddle(args);
      ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_TRUE(j["ok"].get<bool>()) << args;
      auto loss = j["loss"].get<std::vector<double>>();
      ASSERT_EQ(loss.size(), 3u);
      EXPECT_LT(loss[2], loss[0]) << args;
      if (std::string(opt) == "sgd") {  // plain SGD steps compare every weight directly
        EXPECT_EQ(j["adamw_elements_compared_by_gradient"].get<int64_t>(), 0) << args;
      }
    }
}

// Two training steps of each case on 4 threads pass --check.
void expect_four_device_training_checks(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    std::string args = std::string("run ") + c.model + " --mesh " + c.mesh + " --strategy " +
                       c.strategy + " --train --steps 2 --check --json";
    auto r = run_heddle(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["ok"].get<bool>()) << args;
    EXPECT_EQ(j["devices"].get<int64_t>(), 4) << args;
  }
}

// Ring attention: K/V passed around the cp ring block by block (sharding.md, "Ring attention");
// the default with cp > 1, so ContextParallel... below runs it too; cp_comm=allgather the other
// way.
TEST(RunCli, RingAttentionTrainingMatchesTheReference) {
  expect_four_device_training_checks({{"gpt-tiny", "4", "cp=2,dp=2,cp_comm=allgather"},
                                      {"llama-tiny", "4", "cp=2,tp=2,sp=on,cp_comm=ring"}});
  auto comm = run_heddle("run gpt-tiny --mesh 4 --strategy cp=2,dp=2,cp_comm=p2p --train");
  EXPECT_EQ(comm.exit_code, 1);
  EXPECT_NE(comm.err.find("unknown cp_comm 'p2p'; known: allgather, ring"), std::string::npos)
      << comm.err;
}

TEST(RunCli, ContextParallelTrainingMatchesTheReferenceAndSaysWhatIsWrong) {
  expect_four_device_training_checks({
      {"gpt-tiny", "4", "cp=2,dp=2"},
      {"gpt-tiny", "4", "cp=2,tp=2"},
      {"llama-tiny", "4", "cp=2,tp=2,sp=on"},
      {"gpt-tiny --batch 4", "4", "pp=2,cp=2"},  // each stage's chunks split the sequence
  });
  auto odd = run_heddle("run gpt-tiny --mesh 3 --strategy cp=3 --train");
  EXPECT_EQ(odd.exit_code, 1);
  EXPECT_NE(odd.err.find("cp=3 does not divide the sequence 32 of input %ids i64[2, 32]; divisors "
                         "of 32: 1, 2, 4, 8, 16, 32"),
            std::string::npos)
      << odd.err;
  auto flat = run_heddle("run mlp --mesh 2 --strategy cp=2");
  EXPECT_EQ(flat.exit_code, 1);
  EXPECT_NE(flat.err.find("cp=2 splits the sequence over devices, but mlp has no sequence dim"),
            std::string::npos)
      << flat.err;
}

// Causal load balancing (sharding.md, "Causal load balancing"): by default every device of the
// cp group runs the same ring block kernels (`--emit`'s programs); cp_layout=contiguous gives
// device i i+1 blocks per ring. Both pass the check; where zigzag cannot run, asking for it
// says why.
TEST(RunCli, ZigzagIsTheDefaultAndBalancesTheRingBlocks) {
  expect_four_device_training_checks({{"gpt-tiny", "4", "cp=4,cp_layout=contiguous"},
                                      {"llama-tiny", "4", "cp=4,cp_layout=zigzag"}});
  auto blocks = [](const std::string& strategy) {
    const std::string dir = ::testing::TempDir() + "/zigzag_emit";
    const std::string shown = ::testing::TempDir() + "/zigzag_show";
    auto r = run_heddle("run gpt-tiny --mesh 4 --strategy " + strategy + " --emit " + dir);
    EXPECT_EQ(r.exit_code, 0) << strategy << "\n" << r.err;
    auto s = run_heddle("show gpt-tiny --mesh 4 --strategy " + strategy + " --emit " + shown);
    EXPECT_EQ(s.exit_code, 0) << strategy << "\n" << s.err;
    auto slurp = [](const std::string& path) {
      std::ifstream in(path);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    std::vector<size_t> n;
    for (int d = 0; d < 4; ++d) {
      const std::string name = "/device" + std::to_string(d) + ".txt";
      const std::string text = slurp(dir + name);
      EXPECT_GT(text.size(), 100u) << strategy << " device " << d;
      EXPECT_EQ(slurp(shown + name), text) << strategy << ": show prints what run runs";
      size_t k = 0;
      for (size_t at = text.find("(ring block "); at != std::string::npos;
           at = text.find("(ring block ", at + 1))
        ++k;
      n.push_back(k);
    }
    return n;
  };
  // Forward: 2 layers x 2 rings (scores, probabilities times values) of 4 blocks.
  EXPECT_EQ(blocks("cp=4"), (std::vector<size_t>{16, 16, 16, 16}));
  EXPECT_EQ(blocks("cp=4,cp_layout=contiguous"), (std::vector<size_t>{4, 8, 12, 16}));
  auto piped = run_heddle("run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,cp=2,cp_layout=zigzag");
  EXPECT_EQ(piped.exit_code, 1);
  EXPECT_NE(piped.err.find("cp_layout=zigzag: pipeline stages (pp > 1) run the contiguous split"),
            std::string::npos)
      << piped.err;
  auto bad = run_heddle("run gpt-tiny --mesh 2 --strategy cp=2,cp_layout=striped");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown cp_layout 'striped'; known: zigzag, contiguous"),
            std::string::npos)
      << bad.err;
}

TEST(RunCli, PipelinesTrainAndInferLikeTheReference) {
  const Case cases[] = {
      {"gpt-tiny --batch 4", "4", "pp=2,dp=2,schedule=1f1b"},
      {"llama-tiny --batch 4", "4", "pp=2,tp=2,schedule=gpipe"},
      {"gpt-tiny --layers 4 --batch 4", "4", "pp=4,schedule=1f1b"},
      {"mlp", "2", "pp=2,microbatches=1"},
      {"moe-tiny", "4", "pp=2,ep=2"},
  };
  for (const auto& c : cases)
    for (const char* train : {" --train --steps 2", ""}) {
      std::string args = std::string("run ") + c.model + " --mesh " + c.mesh + " --strategy " +
                         c.strategy + train + " --check --json";
      auto r = run_heddle(args);
      ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_TRUE(j["ok"].get<bool>()) << args;
      EXPECT_EQ(j["devices"].get<int64_t>(), std::stoll(c.mesh)) << args;
      EXPECT_EQ(j["pipeline"]["stages"].get<int64_t>(), std::string(c.strategy)[3] - '0') << args;
    }
  auto text = run_heddle("run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,dp=2 --train --steps 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 stages of 2 device(s), 2 chunks, 2 micro-batches of 2, schedule 1f1b"),
            std::string::npos)
      << text.out;
  auto moe = run_heddle("run moe-tiny --mesh 2 --strategy pp=2,microbatches=2");
  EXPECT_EQ(moe.exit_code, 1);
  EXPECT_NE(moe.err.find("top-2 gating"), std::string::npos) << moe.err;
  auto zb = run_heddle("run gpt-tiny --mesh 2 --strategy pp=2,schedule=zb-h2 --train --check");
  ASSERT_EQ(zb.exit_code, 0) << zb.err;
  EXPECT_NE(zb.out.find("schedule zb-h2"), std::string::npos) << zb.out;
  EXPECT_NE(zb.out.find("check      ok"), std::string::npos) << zb.out;
  auto bad = run_heddle("run gpt-tiny --mesh 2 --strategy pp=2,schedule=searched");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("schedule gpipe, 1f1b, interleaved:V, zb-h1 or zb-h2; 'searched'"),
            std::string::npos)
      << bad.err;
}

TEST(RunCli, PipelinesRunTheRecomputeTheyPrint) {
  std::map<std::string, nlohmann::json> by;
  for (std::string r : {"none", "selective", "full"}) {
    auto run = run_heddle("run gpt-tiny --mesh 2 --strategy pp=2,schedule=zb-h1,recompute=" + r +
                          " --train --steps 2 --check --json");
    ASSERT_EQ(run.exit_code, 0) << r << "\n" << run.err;
    by[r] = nlohmann::json::parse(run.out);
    EXPECT_TRUE(by[r]["ok"].get<bool>()) << r;
    EXPECT_EQ(by[r]["pipeline"]["recompute"], r);
  }
  EXPECT_EQ(by["none"]["pipeline"]["recompute_kernel_calls"].get<int64_t>(), 0);
  EXPECT_GT(by["selective"]["pipeline"]["recompute_kernel_calls"].get<int64_t>(), 0);
  EXPECT_GT(by["full"]["pipeline"]["recompute_kernel_calls"].get<int64_t>(),
            by["selective"]["pipeline"]["recompute_kernel_calls"].get<int64_t>());
  auto text = run_heddle("run gpt-tiny --mesh 2 --strategy pp=2 --train --steps 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("recompute=none executed: 0 of "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("recompute=full"), std::string::npos) << text.out;
}

TEST(RunCli, ShowPrintsPlacementsAndEmitsOneProgramPerDevice) {
  std::string dir = ::testing::TempDir() + "/emit";
  auto r = run_heddle("show gpt-tiny --mesh 4 --strategy dp=2,tp=2 --emit " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("plan: strategy dp=2,tp=2 on mesh dp=2,tp=2"), std::string::npos);
  EXPECT_NE(r.out.find("[Shard(0), Shard(1)]"), std::string::npos) << r.out;
  for (int d = 0; d < 4; ++d) {
    std::ifstream in(dir + "/device" + std::to_string(d) + ".txt");
    ASSERT_TRUE(in) << d;
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first.rfind("# device " + std::to_string(d) + " of mesh dp=2,tp=2", 0), 0u);
  }
  // show instantiates the programs one at a time from the shared template; run writes those it
  // lowered all at once: the same text.
  std::string run_dir = ::testing::TempDir() + "/emit_run";
  auto ran = run_heddle("run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --emit " + run_dir);
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (int d = 0; d < 4; ++d) {
    std::string name = "/device" + std::to_string(d) + ".txt";
    std::string shown = slurp(dir + name);
    EXPECT_GT(shown.size(), 100u) << d;
    EXPECT_EQ(shown, slurp(run_dir + name)) << d;
  }
}

TEST(RunCli, ExpertParallelSplitsTheExpertsOnTheEpAxis) {
  auto r = run_heddle("show moe-tiny --mesh 2 --strategy ep=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("%h1.experts.w1 [Shard(0)]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("%h1.experts.w2 [Shard(0)]"), std::string::npos) << r.out;
  auto bad = run_heddle("run gpt-tiny --mesh 2 --strategy ep=2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("ep=2 needs stacked expert weights"), std::string::npos) << bad.err;
}

TEST(RunCli, BadMeshesAndStrategiesSayWhatWouldWork) {
  struct Bad {
    const char* args;
    const char* message;
  };
  const Bad cases[] = {
      {"run gpt-tiny --mesh 3 --strategy dp=3",
       "error: dp=3 does not divide the batch 2 of input %ids i64[2, 32]; divisors of 2: 1, 2"},
      {"run gpt-tiny --mesh 4 --strategy dp=2,tp=4",
       "uses 8 devices (dp*tp*pp*ep) but the mesh has 4; make the degrees multiply to 4"},
      {"run gpt-tiny --mesh 4 --strategy dp=2,xp=2",
       "unknown strategy key 'xp'; valid keys: dp, tp, pp"},
      {"run gpt-tiny --mesh 2x0", "--mesh: mesh axis size '0' in '2x0' must be a positive integer"},
      {"run nonexistent-model --mesh 2", "unknown model 'nonexistent-model'"},
      {"run gpt-tiny --mesh 2 --backend carrier-pigeon", "--backend carrier-pigeon"},
  };
  for (const auto& c : cases) {
    auto r = run_heddle(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

// A tensor-parallel degree dividing none of the model's dims splits them in uneven blocks
// (docs/sharding.md, "Strategies from projections") and still matches the reference.
TEST(RunCli, NonDividingTensorParallelDegreeSplitsUnevenly) {
  auto r = run_heddle("run gpt-tiny --mesh 3 --strategy tp=3 --check");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("check      ok"), std::string::npos) << r.out;
}

// `run --profile`: the step by kernel in the text and as JSON rows that count the program's
// instructions; runs it cannot time say so with exit 1.
TEST(RunCli, ProfileShowsTheStepByKernel) {
  auto r = run_heddle("run gpt-tiny --mesh 2 --strategy dp=2 --train --steps 3 --profile --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("profile"));
  double share = 0, seconds = 0;
  std::set<std::string> kernels;
  for (const auto& row : j["profile"]) {
    EXPECT_GT(row["calls"].get<int64_t>(), 0);
    EXPECT_GE(row["seconds"].get<double>(), 0.0);
    share += row["share"].get<double>();
    seconds += row["seconds"].get<double>();
    kernels.insert(row["kernel"].get<std::string>());
  }
  EXPECT_NEAR(share, 1.0, 1e-6);
  EXPECT_LE(seconds, j["median_step_s"].get<double>() * 1.5);  // per timed step
  EXPECT_TRUE(kernels.count("adamw"));
  EXPECT_TRUE(kernels.count("all-reduce"));  // dp=2's gradients
  auto text = run_heddle("run mlp --steps 2 --profile");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("profile    device 0, per timed step:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("einsum \""), std::string::npos) << text.out;
  auto plain = run_heddle("run mlp --steps 2 --json");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("profile"));
  auto pipe = run_heddle("run gpt-tiny --mesh 2 --strategy pp=2 --train --steps 2 --profile");
  EXPECT_EQ(pipe.exit_code, 1);
  EXPECT_NE(pipe.err.find("--profile"), std::string::npos) << pipe.err;
}

}  // namespace
}  // namespace heddle
