// Training checkpoints (heddle/runtime/Checkpoint.h): a round trip gives the tensors back bit for
// bit; shards written by two ranks reassemble whole (what a resume on another mesh starts from);
// a reader needing some tiles reads only the shards holding them; a corrupted, truncated,
// missing or mismatched file is refused naming the file and the rule.
#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <fstream>
#include <thread>

#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Checkpoint.h"

namespace heddle {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  Graph g;
  std::vector<ParamUpdate> updates;
  TensorMap state;  // every parameter and optimizer state, whole, with distinct values
  CheckpointRun run{.model = "mlp",
                    .optimizer = "adamw",
                    .lr = 0.01,
                    .seed = 3,
                    .mesh = "dp=2",
                    .strategy = "dp=2",
                    .plan = "0",
                    .backend = "threads"};
};

// The training step of the zoo's mlp with `optimizer`.
Result<TrainStep> mlp_step(TrainStepOptions::Optimizer optimizer) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  TrainStepOptions to;
  to.optimizer = optimizer;
  return build_train_step(*zoo::build_zoo_model("mlp", {}, mo), to);
}

Fixture fixture() {
  auto step = mlp_step(TrainStepOptions::Optimizer::kAdamW);
  EXPECT_TRUE(step.ok());
  Fixture f{std::move(step->graph), std::move(step->updates), {}};
  f.run.model = f.g.name();
  for (ValueId v : f.g.params()) f.state.emplace(v, init_param(f.g.value(v).name, f.g.type(v), 7));
  for (const auto& u : f.updates)  // moments are zero at init: make them tell apart
    for (const auto& st : u.state) f.state.at(st.first).fill(0.125 * (st.first % 5 + 1));
  return f;
}

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/ckpt_" + name;
  fs::remove_all(d);
  return d;
}

CheckpointOptions options(const Fixture& f, const std::string& dir) {
  return CheckpointOptions{
      .dir = dir, .every = 1, .rank = 0, .ranks = 1, .all_gather = {}, .run = f.run, .keep = 2};
}

void expect_same(const Fixture& f, const LoadedCheckpoint& c) {
  size_t n = 0;
  for (const auto& u : f.updates) {
    n += 1 + u.state.size();
    EXPECT_TRUE(c.tensors.at(u.param) == f.state.at(u.param)) << f.g.value(u.param).name;
    for (const auto& st : u.state)
      EXPECT_TRUE(c.tensors.at(st.first) == f.state.at(st.first)) << f.g.value(st.first).name;
  }
  EXPECT_EQ(c.tensors.size(), n);
}

// The diagnostic of reading `dir`, which must fail.
std::string refusal(const Fixture& f, const std::string& dir, const CheckpointRun& run) {
  auto r = read_checkpoint(dir, f.g, f.updates, run);
  EXPECT_FALSE(r.ok()) << dir;
  return r.ok() ? "" : r.error().to_string();
}

TEST(Checkpoint, RoundTripIsBitIdenticalAndKeepsTheLatestTwo) {
  Fixture f = fixture();
  std::string dir = fresh_dir("roundtrip");
  for (int step : {2, 4, 6})
    ASSERT_TRUE(write_checkpoint(f.g, f.updates, f.state, step, options(f, dir)).ok());
  auto c = read_checkpoint(dir, f.g, f.updates, f.run);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->step, 6);
  EXPECT_EQ(c->data_position, 6);
  EXPECT_EQ(c->run.mesh, "dp=2");
  EXPECT_EQ(c->manifest_fnv1a.size(), 16u);
  expect_same(f, *c);
  EXPECT_FALSE(fs::exists(dir + "/step-00000002"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000004/manifest.json"));
  // The hook writes on multiples of `every` only.
  std::string hooked = fresh_dir("hook");
  CheckpointOptions o = options(f, hooked);
  o.every = 3;
  auto hook = checkpoint_hook(f.g, f.updates, o);
  for (int s = 1; s <= 4; ++s) ASSERT_TRUE(hook(s, f.state).ok());
  auto h = read_checkpoint(hooked, f.g, f.updates, f.run);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->step, 3);
}

// A checkpoint that cannot be written is a diagnostic naming the path and the system's reason,
// and the previous checkpoint stays the latest.
TEST(Checkpoint, AFailedWriteSaysWhyAndKeepsThePreviousCheckpoint) {
  Fixture f = fixture();
  std::string dir = fresh_dir("unwritable");
  ASSERT_TRUE(write_checkpoint(f.g, f.updates, f.state, 1, options(f, dir)).ok());
  std::ofstream(dir + "/step-00000002") << "a file where the step directory goes";
  Status st = write_checkpoint(f.g, f.updates, f.state, 2, options(f, dir));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().to_string().find(dir + "/step-00000002"), std::string::npos)
      << st.error().to_string();
  auto c = read_checkpoint(dir, f.g, f.updates, f.run);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->step, 1);
}

// Two ranks (threads here), each holding half of every tensor along dim 0 (rank 1 without the
// first parameter when `drop`), write their shards of step 5 into `dir`.
void write_two_ranks(const Fixture& f, const std::string& dir, bool drop) {
  std::barrier sync(2);
  std::vector<std::vector<int64_t>> slots(2);
  Status st[2];
  auto rank = [&](int64_t r) {
    TensorMap tiles;
    for (const auto& [v, t] : f.state) {
      if (drop && r == 1 && v == f.updates[0].param) continue;
      tiles.emplace(v, t.crop(t.region().split_part(0, 2, r)));
    }
    CheckpointOptions o = options(f, dir);
    o.rank = r;
    o.ranks = 2;
    o.all_gather = [&, r](const std::vector<int64_t>& mine) -> Result<std::vector<int64_t>> {
      slots[static_cast<size_t>(r)] = mine;
      sync.arrive_and_wait();
      std::vector<int64_t> all = slots[0];
      all.insert(all.end(), slots[1].begin(), slots[1].end());
      sync.arrive_and_wait();
      return all;
    };
    st[r] = write_checkpoint(f.g, f.updates, tiles, 5, o);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  ASSERT_TRUE(st[0].ok() && st[1].ok());
  EXPECT_TRUE(fs::exists(dir + "/step-00000005/rank-1.bin"));
}

// Reading gives the whole tensors back. A rank that leaves a tile out makes the read fail.
TEST(Checkpoint, ShardsOfTwoRanksReassembleWhole) {
  Fixture f = fixture();
  for (bool drop : {false, true}) {
    std::string dir = fresh_dir(drop ? "shards_missing" : "shards");
    write_two_ranks(f, dir, drop);
    if (!drop) {
      auto c = read_checkpoint(dir, f.g, f.updates, f.run);
      ASSERT_TRUE(c.ok()) << c.error().to_string();
      expect_same(f, *c);
      EXPECT_EQ(c->shards_read, (std::vector<int64_t>{0, 1}));
    } else {
      std::string e = refusal(f, dir, f.run);
      EXPECT_NE(e.find("unwritten by any shard"), std::string::npos) << e;
      EXPECT_NE(e.find(f.g.value(f.updates[0].param).name), std::string::npos) << e;
    }
  }
}

// A reader that needs only rank 1's halves reads rank 1's shard alone: rank 0's, corrupted
// here, is never opened (a whole read refuses it). Needing a box across both halves reads both.
TEST(Checkpoint, AReaderReadsOnlyTheShardsHoldingItsTiles) {
  Fixture f = fixture();
  std::string dir = fresh_dir("partial");
  write_two_ranks(f, dir, false);
  std::map<ValueId, Box> second_half, across;
  for (const auto& [v, t] : f.state) {
    second_half.emplace(v, t.region().split_part(0, 2, 1));
    across.emplace(v, t.region());
  }
  auto whole = read_checkpoint(dir, f.g, f.updates, f.run, across, 1);
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  EXPECT_EQ(whole->shards_read, (std::vector<int64_t>{0, 1}));
  expect_same(f, *whole);
  const std::string bin = dir + "/step-00000005/rank-0.bin";
  fs::resize_file(bin, fs::file_size(bin) - 8);
  auto c = read_checkpoint(dir, f.g, f.updates, f.run, second_half, 1);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->shards_read, std::vector<int64_t>{1});
  EXPECT_EQ(c->tensors.size(), f.state.size());
  for (const auto& [v, box] : second_half) {
    ASSERT_EQ(c->tensors.at(v).region(), box) << f.g.value(v).name;
    EXPECT_TRUE(c->tensors.at(v) == f.state.at(v).crop(box)) << f.g.value(v).name;
  }
  std::string e = refusal(f, dir, f.run);
  EXPECT_NE(e.find(bin), std::string::npos) << e;
  // Rank 0's first half is needed too: its shard is read and refused.
  auto both = read_checkpoint(dir, f.g, f.updates, f.run, across, 1);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().to_string().find("truncated"), std::string::npos);
}

TEST(Checkpoint, CorruptTruncatedMissingOrMismatchedIsRefused) {
  Fixture f = fixture();
  auto written = [&](const std::string& name) {
    std::string dir = fresh_dir(name);
    EXPECT_TRUE(write_checkpoint(f.g, f.updates, f.state, 4, options(f, dir)).ok());
    return dir;
  };
  auto expect_refused = [&](const std::string& dir, const CheckpointRun& run,
                            const std::string& file, const std::string& rule) {
    std::string e = refusal(f, dir, run);
    EXPECT_NE(e.find(file), std::string::npos) << e;
    EXPECT_NE(e.find(rule), std::string::npos) << e;
    EXPECT_NE(e.find("not loaded"), std::string::npos) << e;
  };
  {  // one flipped bit in the middle of the shard
    std::string dir = written("corrupt"), bin = dir + "/step-00000004/rank-0.bin";
    std::fstream io(bin, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(fs::file_size(bin) / 2));
    char c = 0;
    io.read(&c, 1);
    io.seekp(static_cast<std::streamoff>(fs::file_size(bin) / 2));
    c ^= 1;
    io.write(&c, 1);
    io.close();
    expect_refused(dir, f.run, bin, "the file is corrupted");
  }
  {  // cut short, as by a full disk
    std::string dir = written("truncated"), bin = dir + "/step-00000004/rank-0.bin";
    fs::resize_file(bin, fs::file_size(bin) - 100);
    expect_refused(dir, f.run, bin, "truncated");
  }
  {
    std::string dir = written("missing"), idx = dir + "/step-00000004/rank-0.json";
    fs::remove(idx);
    expect_refused(dir, f.run, idx, "is missing");
  }
  {
    std::string dir = written("manifest"), m = dir + "/step-00000004/manifest.json";
    fs::resize_file(m, fs::file_size(m) / 2);
    expect_refused(dir, f.run, m, "not a JSON object");
  }
  {  // another learning rate, another optimizer's state, no checkpoint at all
    std::string dir = written("mismatch");
    CheckpointRun other = f.run;
    other.lr = 0.02;
    expect_refused(dir, other, "manifest.json", "--lr 0.01; this run has 0.02");
    auto sgd = mlp_step(TrainStepOptions::Optimizer::kSgdMomentum);
    ASSERT_TRUE(sgd.ok());
    auto r = read_checkpoint(dir, sgd->graph, sgd->updates, f.run);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().to_string().find("manifest mismatch"), std::string::npos);
    expect_refused(fresh_dir("empty"), f.run, "latest", "holds no complete checkpoint");
  }
}

}  // namespace
}  // namespace heddle
