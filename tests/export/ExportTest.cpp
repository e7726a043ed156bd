// The exports, flag by flag: what each stack can run (Target), the rank groups, the Megatron-LM
// arguments, the torchtitan TOML and the DeepSpeed JSON, and the search kept to one stack.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "heddle/export/Export.h"
#include "heddle/export/RankGroups.h"
#include "heddle/model/ScalableModel.h"

namespace heddle::exporting {
namespace {

StrategySpec spec(const std::string& text) {
  auto s = StrategySpec::parse(text);
  EXPECT_TRUE(s.ok()) << text;
  return *s;
}

// A training plan of `layers` layers split evenly over the strategy's chunks (unless `split`).
ExportPlan plan(const std::string& text, int64_t batch = 64, int64_t layers = 8,
                std::vector<int64_t> split = {}) {
  ExportPlan p;
  p.spec = spec(text);
  p.batch = batch;
  p.seq = 1024;
  p.layers = layers;
  p.micro_batch = p.spec.micro_batch.value_or(1);
  p.devices = p.spec.devices();
  int64_t chunks = p.spec.pp.value_or(1) * (p.spec.schedule ? p.spec.schedule->chunks : 1);
  if (split.empty()) split.assign(static_cast<size_t>(chunks), layers / chunks);
  if (p.spec.pp.value_or(1) > 1) p.chunk_layers = split;
  return p;
}

// Megatron's arguments as flag -> value ("" for a switch); comment lines skipped.
std::map<std::string, std::string> megatron_flags(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.size() >= 2 && line.substr(line.size() - 2) == " \\") line.resize(line.size() - 2);
    auto sp = line.find(' ');
    out[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return out;
}

// A TOML file's `key = value` lines as "section.key" -> value text.
std::map<std::string, std::string> toml_keys(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[' && line.back() == ']' && line[1] != '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    auto eq = line.find(" = ");
    EXPECT_NE(eq, std::string::npos) << line;
    out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

Export exported(Target t, const ExportPlan& p) {
  auto e = export_plan(t, p);
  EXPECT_TRUE(e.ok()) << e.error().to_string();
  return e.ok() ? *e : Export{};
}

TEST(Target, ParsesEveryStackAndNamesThemOnError) {
  for (Target t :
       {Target::kMegatron, Target::kTorchtitan, Target::kDeepSpeed, Target::kHeddle, Target::kAny})
    EXPECT_EQ(*parse_target(to_string(t)), t);
  auto bad = parse_target("nemo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("megatron, torchtitan, deepspeed, heddle or any"),
            std::string::npos);
}

TEST(Target, EachStackRefusesWhatItCannotRunAndSaysWhy) {
  const PlanKind train{true, false};
  struct Case {
    Target target;
    std::string strategy;
    std::string reason;  // empty: runnable
  };
  const Case cases[] = {
      {Target::kMegatron, "dp=2,tp=2,pp=2,zero=1,schedule=interleaved:2,sp=on", ""},
      {Target::kMegatron, "dp=2,pp=2,schedule=gpipe", "schedule=gpipe"},
      {Target::kMegatron, "dp=2,pp=2,schedule=zb-h1", "schedule=zb-h1"},
      {Target::kMegatron, "dp=4,pp=2,zero=3", "zero=3 with pp=2"},
      {Target::kMegatron, "dp=8,zero=3", ""},
      {Target::kMegatron, "pp=2,meshes=2x1/1x2", "per-stage sub-meshes"},
      {Target::kMegatron, "dp=2,ep=2", "ep=2"},
      {Target::kTorchtitan, "dp=2,tp=2,pp=2,zero=3,sp=on,schedule=gpipe", ""},
      {Target::kTorchtitan, "dp=2,tp=4,zero=3", "without sp"},
      {Target::kTorchtitan, "dp=8,zero=1", "zero=1"},
      {Target::kTorchtitan, "dp=8,zero=0", ""},
      {Target::kTorchtitan, "dp=2,tp=2,zero=0,sp=on", "DDP"},
      {Target::kTorchtitan, "dp=2,pp=2,zero=2,schedule=zb-h2", "schedule=zb-h2"},
      {Target::kDeepSpeed, "dp=4,tp=2,zero=3", ""},
      {Target::kDeepSpeed, "dp=4,pp=2", "pp=2"},
      {Target::kDeepSpeed, "dp=4,tp=2,sp=on", "sp=on"},
      {Target::kDeepSpeed, "dp=8,recompute=selective", "recompute=selective"},
      {Target::kHeddle, "dp=2,pp=2,schedule=zb-h1", ""},
      {Target::kHeddle, "pp=2,meshes=2x1/1x2", "per-stage sub-meshes"},
      {Target::kAny, "pp=2,meshes=2x1/1x2", ""},
  };
  for (const auto& c : cases) {
    auto s = expressible(c.target, spec(c.strategy), train);
    if (c.reason.empty()) {
      EXPECT_TRUE(s.ok()) << to_string(c.target) << " " << c.strategy << ": " << s.error().message;
    } else {
      ASSERT_FALSE(s.ok()) << to_string(c.target) << " " << c.strategy;
      EXPECT_NE(s.error().message.find(c.reason), std::string::npos) << s.error().message;
    }
  }
  // Forward-only plans and the intra-op ILP's stage plans run on heddle only.
  EXPECT_FALSE(expressible(Target::kMegatron, spec("dp=8"), {false, false}).ok());
  EXPECT_FALSE(expressible(Target::kTorchtitan, spec("dp=8"), {true, true}).ok());
  EXPECT_TRUE(expressible(Target::kHeddle, spec("dp=8"), {false, false}).ok());
}

TEST(Target, RunnableByListsTheStacksInOrder) {
  auto names = [](std::vector<Target> v) {
    std::string s;
    for (Target t : v) s += to_string(t) + " ";
    return s;
  };
  EXPECT_EQ(names(runnable_by(spec("dp=8,zero=1"), {true, false})), "megatron deepspeed heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=2,tp=2,pp=2,zero=2,sp=on"), {true, false})),
            "torchtitan heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=8"), {false, false})), "heddle ");
}

TEST(Target, TorchtitanPinsSequenceParallelism) {
  EXPECT_TRUE(target_pins(Target::kTorchtitan, spec("auto")).sp);
  EXPECT_FALSE(target_pins(Target::kMegatron, spec("auto")).sp);
}

TEST(RankGroups, TensorParallelInnermostPipelineOutermost) {
  auto g = rank_groups(spec("dp=2,tp=2,pp=2"));
  using G = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(g["tp"], (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g["dp"], (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g["pp"], (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.count("ep"), 0u);
  auto dp_only = rank_groups(spec("dp=4"));
  EXPECT_EQ(dp_only.size(), 1u);
  EXPECT_EQ(dp_only["dp"], (G{{0, 1, 2, 3}}));
}

TEST(RankGroups, SubMeshesListTheirStages) {
  auto g = rank_groups(spec("pp=2,meshes=2x1/1x2"));
  using G = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(g["stages"], (G{{0, 1}, {2, 3}}));
  EXPECT_EQ(g["dp"], (G{{0, 1}}));
  EXPECT_EQ(g["tp"], (G{{2, 3}}));
  EXPECT_EQ(g.count("pp"), 0u);
}

TEST(MegatronArgs, EveryFlag) {
  auto e = exported(Target::kMegatron,
                    plan("dp=2,tp=4,pp=2,zero=1,mb=2,schedule=interleaved:2,recompute=full,sp=on"));
  EXPECT_EQ(e.file_name, "megatron_args.txt");
  auto f = megatron_flags(e.text);
  EXPECT_EQ(f["--tensor-model-parallel-size"], "4");
  EXPECT_EQ(f["--pipeline-model-parallel-size"], "2");
  EXPECT_EQ(f["--num-virtual-stages-per-pipeline-rank"], "2");
  EXPECT_EQ(f.count("--pipeline-model-parallel-layout"), 0u);
  EXPECT_EQ(f.count("--sequence-parallel"), 1u);
  EXPECT_EQ(f.count("--use-distributed-optimizer"), 1u);
  EXPECT_EQ(f["--recompute-granularity"], "full");
  EXPECT_EQ(f["--recompute-method"], "uniform");
  EXPECT_EQ(f["--recompute-num-layers"], "1");
  EXPECT_EQ(f["--micro-batch-size"], "2");
  EXPECT_EQ(f["--global-batch-size"], "64");
  EXPECT_EQ(f["--num-layers"], "8");
  EXPECT_EQ(f["--seq-length"], "1024");
  EXPECT_EQ(f.count("--bf16"), 1u);
  EXPECT_EQ(f.size(), 13u) << e.text;
}

TEST(MegatronArgs, UnevenSplitIsALayoutAndZeroStagesMapToTheirOptimizers) {
  auto f = megatron_flags(
      exported(Target::kMegatron, plan("dp=2,pp=4,zero=0", 64, 12, {2, 3, 3, 4})).text);
  EXPECT_EQ(f["--pipeline-model-parallel-layout"], "\"Et*2|t*3|t*3|t*4L\"");
  EXPECT_EQ(f.count("--num-virtual-stages-per-pipeline-rank"), 0u);
  EXPECT_EQ(f.count("--use-distributed-optimizer"), 0u);
  EXPECT_EQ(f.count("--sequence-parallel"), 0u);
  EXPECT_EQ(f.count("--recompute-granularity"), 0u);
  auto z2 = megatron_flags(exported(Target::kMegatron, plan("dp=8,zero=2")).text);
  EXPECT_EQ(z2.count("--use-megatron-fsdp"), 1u);
  EXPECT_EQ(z2["--data-parallel-sharding-strategy"], "optim_grads");
  auto z3 = megatron_flags(exported(Target::kMegatron, plan("dp=8,zero=3")).text);
  EXPECT_EQ(z3["--data-parallel-sharding-strategy"], "optim_grads_params");
  auto sel = megatron_flags(exported(Target::kMegatron, plan("dp=8,recompute=selective")).text);
  EXPECT_EQ(sel["--recompute-granularity"], "selective");
  EXPECT_EQ(sel.count("--recompute-method"), 0u);
}

TEST(TorchtitanToml, EveryKey) {
  auto e = exported(Target::kTorchtitan,
                    plan("dp=2,tp=2,pp=2,zero=3,mb=4,schedule=interleaved:2,recompute=selective,"
                         "sp=on"));
  EXPECT_EQ(e.file_name, "torchtitan.toml");
  auto k = toml_keys(e.text);
  EXPECT_EQ(k["training.local_batch_size"], "32");  // 64 / dp 2, split into micro-batches of 4
  EXPECT_EQ(k["training.global_batch_size"], "64");
  EXPECT_EQ(k["training.seq_len"], "1024");
  EXPECT_EQ(k["training.mixed_precision_param"], "\"bfloat16\"");
  EXPECT_EQ(k["parallelism.data_parallel_replicate_degree"], "1");
  EXPECT_EQ(k["parallelism.data_parallel_shard_degree"], "2");
  EXPECT_EQ(k["parallelism.fsdp_reshard_after_forward"], "\"always\"");
  EXPECT_EQ(k["parallelism.tensor_parallel_degree"], "2");
  EXPECT_EQ(k["parallelism.pipeline_parallel_degree"], "2");
  EXPECT_EQ(k["parallelism.pipeline_parallel_schedule"], "\"Interleaved1F1B\"");
  EXPECT_EQ(k["parallelism.pipeline_parallel_microbatch_size"], "4");
  EXPECT_EQ(k["parallelism.module_fqns_per_model_part"],
            "[[\"tok_embeddings\", \"layers.0\", \"layers.1\"], [\"layers.2\", \"layers.3\"], "
            "[\"layers.4\", \"layers.5\"], [\"layers.6\", \"layers.7\", \"norm\", \"output\"]]");
  EXPECT_EQ(k["activation_checkpoint.mode"], "\"selective\"");
  EXPECT_EQ(k["activation_checkpoint.selective_ac_option"], "\"op\"");
  EXPECT_EQ(k.size(), 14u) << e.text;
  EXPECT_FALSE(e.notes.empty());  // the module names are torchtitan's decoder's
}

TEST(TorchtitanToml, DataParallelOnlyIsDdpAndZeroTwoNeverReshards) {
  auto ddp = toml_keys(exported(Target::kTorchtitan, plan("dp=8,zero=0,mb=2")).text);
  EXPECT_EQ(ddp["parallelism.data_parallel_replicate_degree"], "8");
  EXPECT_EQ(ddp["parallelism.data_parallel_shard_degree"], "1");
  EXPECT_EQ(ddp.count("parallelism.fsdp_reshard_after_forward"), 0u);
  EXPECT_EQ(ddp.count("parallelism.pipeline_parallel_schedule"), 0u);
  EXPECT_EQ(ddp["training.local_batch_size"], "2");  // gradient accumulation up to 64
  EXPECT_EQ(ddp["activation_checkpoint.mode"], "\"none\"");
  auto z2 = toml_keys(exported(Target::kTorchtitan, plan("dp=8,zero=2")).text);
  EXPECT_EQ(z2["parallelism.fsdp_reshard_after_forward"], "\"never\"");
  EXPECT_EQ(z2["parallelism.data_parallel_shard_degree"], "8");
}

TEST(DeepSpeedJson, EveryKey) {
  auto e = exported(Target::kDeepSpeed, plan("dp=4,tp=2,zero=2,mb=2,recompute=full"));
  EXPECT_EQ(e.file_name, "deepspeed.json");
  auto j = nlohmann::json::parse(e.text);
  EXPECT_EQ(j["train_batch_size"], 64);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(j["gradient_accumulation_steps"], 8);  // 64 = 2 x 8 x dp 4
  EXPECT_EQ(j["zero_optimization"]["stage"], 2);
  EXPECT_EQ(j["tensor_parallel"]["autotp_size"], 2);
  EXPECT_EQ(j["bf16"]["enabled"], true);
  EXPECT_EQ(j.size(), 6u);
  ASSERT_EQ(e.notes.size(), 1u);  // activation checkpointing is the model code's to turn on
  auto plain = nlohmann::json::parse(exported(Target::kDeepSpeed, plan("dp=8,zero=0")).text);
  EXPECT_EQ(plain.count("tensor_parallel"), 0u);
  EXPECT_EQ(plain["zero_optimization"]["stage"], 0);
}

// The technique keys (precision, attention, overlap, offload) as each stack spells them, and
// the plans no stack runs.
TEST(Export, TechniqueKeys) {
  auto names = [](std::vector<Target> v) {
    std::string s;
    for (Target t : v) s += to_string(t) + " ";
    return s;
  };
  auto f = megatron_flags(
      exported(Target::kMegatron,
               plan("dp=2,tp=4,zero=1,mb=2,precision=fp8,attention=flash,overlap=dp+tp,"
                    "offload=optimizer"))
          .text);
  EXPECT_EQ(f["--fp8-format"], "hybrid");
  EXPECT_EQ(f["--attention-backend"], "flash");
  for (const char* flag : {"--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap",
                           "--optimizer-cpu-offload", "--use-precision-aware-optimizer",
                           "--overlap-cpu-optimizer-d2h-h2d"})
    EXPECT_EQ(f.count(flag), 1u) << flag;
  EXPECT_EQ(f["--optimizer-offload-fraction"], "1.0");
  auto none = megatron_flags(exported(Target::kMegatron, plan("dp=8,overlap=none")).text);
  EXPECT_EQ(none.count("--overlap-grad-reduce"), 0u);
  auto k = toml_keys(
      exported(Target::kTorchtitan, plan("dp=2,tp=4,zero=3,mb=2,sp=on,precision=fp8,overlap=dp+tp,"
                                         "offload=optimizer+params"))
          .text);
  EXPECT_EQ(k["model.converters"], "[\"float8\"]");
  EXPECT_EQ(k["parallelism.enable_async_tensor_parallel"], "true");
  EXPECT_EQ(k["training.enable_cpu_offload"], "true");
  auto nvme = nlohmann::json::parse(
      exported(Target::kDeepSpeed,
               plan("dp=8,zero=3,mb=1,overlap=dp,offload=optimizer+params:nvme"))
          .text);
  EXPECT_EQ(nvme["zero_optimization"]["offload_optimizer"]["device"], "nvme");
  EXPECT_EQ(nvme["zero_optimization"]["offload_param"]["device"], "nvme");
  EXPECT_EQ(nvme["zero_optimization"]["overlap_comm"], true);
  auto cpu = nlohmann::json::parse(
      exported(Target::kDeepSpeed, plan("dp=8,zero=2,offload=optimizer")).text);
  EXPECT_EQ(cpu["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(cpu["zero_optimization"].count("offload_param"), 0u);
  // Who runs what: NVMe offload only DeepSpeed; offloaded activations no external stack.
  EXPECT_EQ(names(runnable_by(spec("dp=8,zero=3,offload=optimizer+params:nvme"), {true, false})),
            "deepspeed heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=8,zero=1,offload=optimizer"), {true, false})),
            "megatron deepspeed heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=8,zero=2,offload=activations"), {true, false})), "heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=2,tp=4,zero=1,precision=fp8"), {true, false})),
            "megatron heddle ");
  auto refused = expressible(Target::kMegatron, spec("dp=8,zero=3,offload=optimizer+params:nvme"),
                             {true, false});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("it offloads the optimizer only"), std::string::npos);
}

// cp=N: Megatron-LM's --context-parallel-size with the plan's form as --cp-comm-type (p2p is its
// ring attention), torchtitan's context_parallel_degree and rotate method; DeepSpeed's
// sequence parallelism (Ulysses, all-to-all over heads) is another algorithm and is refused.
TEST(Export, ContextParallelism) {
  auto ring = exported(Target::kMegatron, plan("dp=2,cp=4,tp=2,zero=1,sp=on"));
  auto f = megatron_flags(ring.text);
  EXPECT_EQ(f["--context-parallel-size"], "4");
  EXPECT_EQ(f["--cp-comm-type"], "p2p");
  EXPECT_EQ(f["--tensor-model-parallel-size"], "2");
  EXPECT_NE(ring.text.find("launch 16 ranks (data parallel 2 = 16 / (tp 2 x cp 4 x pp 1))"),
            std::string::npos)
      << ring.text;
  auto gathered =
      megatron_flags(exported(Target::kMegatron, plan("dp=2,cp=4,zero=1,cp_comm=allgather")).text);
  EXPECT_EQ(gathered["--cp-comm-type"], "allgather");
  EXPECT_EQ(megatron_flags(
                exported(Target::kMegatron, plan("dp=8,cp=2,cp_comm=ring")).text)["--cp-comm-type"],
            "p2p");
  EXPECT_EQ(megatron_flags(exported(Target::kMegatron, plan("dp=8")).text)
                .count("--context-parallel-size"),
            0u);
  auto k = toml_keys(exported(Target::kTorchtitan, plan("dp=2,cp=4,tp=2,zero=3,sp=on")).text);
  EXPECT_EQ(k["parallelism.context_parallel_degree"], "4");
  EXPECT_EQ(k["parallelism.context_parallel_rotate_method"], "\"alltoall\"");
  EXPECT_EQ(k["parallelism.data_parallel_shard_degree"], "2");
  auto kg =
      toml_keys(exported(Target::kTorchtitan, plan("dp=2,cp=4,zero=2,cp_comm=allgather")).text);
  EXPECT_EQ(kg["parallelism.context_parallel_rotate_method"], "\"allgather\"");
  EXPECT_EQ(toml_keys(exported(Target::kTorchtitan, plan("dp=8,zero=2")).text)
                .count("parallelism.context_parallel_degree"),
            0u);
  // torchtitan shards with FSDP2 over dp_shard x cp whenever cp > 1: zero=0 is not its plan.
  auto ddp = expressible(Target::kTorchtitan, spec("dp=2,cp=2,zero=0"), {true, false});
  ASSERT_FALSE(ddp.ok());
  EXPECT_NE(ddp.error().message.find("cp=2 with zero=0"), std::string::npos);
  auto ds = export_plan(Target::kDeepSpeed, plan("dp=4,cp=2,zero=1"));
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.error().message.find("DeepSpeed cannot run cp=2: its sequence parallelism "
                                    "(DeepSpeed-Ulysses"),
            std::string::npos)
      << ds.error().message;
  // Both stacks balance causal attention over 2*cp chunks: the sequence must divide into them.
  auto odd = plan("dp=2,cp=4,zero=1");
  odd.seq = 1028;
  auto bad = export_plan(Target::kMegatron, odd);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("2*cp = 8 chunks"), std::string::npos) << bad.error().message;
  auto names = [](std::vector<Target> v) {
    std::string s;
    for (Target t : v) s += to_string(t) + " ";
    return s;
  };
  EXPECT_EQ(names(runnable_by(spec("dp=2,cp=2,tp=2,zero=1,sp=on"), {true, false})),
            "megatron heddle ");
  EXPECT_EQ(names(runnable_by(spec("dp=2,cp=2,tp=2,zero=3,sp=on"), {true, false})),
            "megatron torchtitan heddle ");
}

TEST(Export, RefusesWhatTheTargetCannotRun) {
  auto e = export_plan(Target::kDeepSpeed, plan("dp=2,pp=4"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("cannot export the plan dp=2,pp=4"), std::string::npos);
  EXPECT_NE(e.error().message.find("DeepSpeed cannot run pp=4"), std::string::npos);
  EXPECT_FALSE(export_plan(Target::kHeddle, plan("dp=8")).ok());
}

TEST(Export, ASearchKeptToMegatronExportsItsBest) {
  zoo::ZooOverrides over;
  over.layers = 4;
  over.batch = 16;
  auto src = *model::zoo_scalable_model("gpt3-1.3b", over);
  auto cluster = *cost::cluster_preset("a100x8");
  search::ConfigSearchOptions o;
  o.train = true;
  o.time_limit_s = 30;
  o.admits = [](const StrategySpec& s, bool ilp) {
    return expressible(Target::kDeepSpeed, s, {true, ilp}).ok();
  };
  auto found = search::search_configs(src, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  for (const auto& c : found->ranking) {
    EXPECT_EQ(c.sim.pp, 1) << c.sim.strategy;  // DeepSpeed's JSON has no pipeline
    EXPECT_EQ(c.stage_planner, "tactics");
  }
  auto p = export_plan_of(src, cluster, found->best, true);
  EXPECT_EQ(p.batch, 16);
  EXPECT_EQ(p.layers, 4);
  auto j = nlohmann::json::parse(exported(Target::kDeepSpeed, p).text);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], found->best.sim.micro_batch);
  EXPECT_EQ(j["zero_optimization"]["stage"], found->best.spec.zero.value_or(0));
  EXPECT_EQ(j["gradient_accumulation_steps"].get<int64_t>() * found->best.sim.micro_batch *
                found->best.sim.dp,
            16);
}

}  // namespace
}  // namespace heddle::exporting
