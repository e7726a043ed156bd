// The zoo: every preset builds and verifies; parameter counts equal the published numbers; small
// presets run in the interpreter; bad configs name the field and the constraint.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "heddle/ir/GraphStats.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle {
namespace {

int64_t params(const Graph& g) { return graph_stats(g).parameters; }

TEST(Zoo, EveryPresetBuildsAndVerifies) {
  for (const auto& e : zoo::zoo_entries()) {
    SCOPED_TRACE(e.name);
    auto g = zoo::build_zoo_model(e.name);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_GT(params(*g), 0);
    EXPECT_GT(graph_flops(*g), 0);
    ASSERT_EQ(g->outputs().size(), 1u);
  }
}

TEST(Zoo, GptPresetsMatchTheMegatronFormula) {
  // Megatron's P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)) counts every weight but the final
  // LayerNorm (2h), which the graph has.
  for (const auto& e : zoo::zoo_entries()) {
    if (e.family != "gpt") continue;
    SCOPED_TRACE(e.name);
    auto c = zoo::gpt_preset(e.name);
    ASSERT_TRUE(c.ok());
    auto g = zoo::build_gpt(*c);
    ASSERT_TRUE(g.ok());
    double l = double(c->layers), h = double(c->hidden), V = double(c->vocab), s = double(c->seq);
    double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    EXPECT_EQ(zoo::megatron_parameters(*c), std::llround(formula));
    EXPECT_EQ(params(*g), zoo::megatron_parameters(*c) + 2 * c->hidden);
  }
}

TEST(Zoo, MegatronRowsReproduceTable1) {
  // First column of Narayanan et al. Table 1, in billions (one decimal; 1008 for the last row).
  const std::pair<const char*, double> rows[] = {
      {"megatron-1.7b", 1.7},     {"megatron-3.6b", 3.6},     {"megatron-7.5b", 7.5},
      {"megatron-18.4b", 18.4},   {"megatron-39.1b", 39.1},   {"megatron-76.1b", 76.1},
      {"megatron-145.6b", 145.6}, {"megatron-310.1b", 310.1}, {"megatron-529.6b", 529.6},
      {"megatron-1t", 1008.0}};
  for (auto [name, billions] : rows) {
    auto c = zoo::gpt_preset(name);
    ASSERT_TRUE(c.ok());
    double p = double(zoo::megatron_parameters(*c)) / 1e9;
    double digits = billions >= 1000 ? 1.0 : 10.0;
    EXPECT_EQ(std::round(p * digits) / digits, billions) << name << " " << p;
  }
}

TEST(Zoo, PublishedParameterCounts) {
  auto llama = zoo::build_zoo_model("llama2-7b");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(params(*llama), 6738415616);  // 6.74B (Llama 2 paper / model card)
  auto rn = zoo::build_zoo_model("resnet50");
  ASSERT_TRUE(rn.ok());
  EXPECT_EQ(params(*rn), 25557032);  // torchvision resnet50: 25.6M
  auto vit = zoo::build_zoo_model("vit-b16");
  ASSERT_TRUE(vit.ok());
  EXPECT_EQ(params(*vit), 86567656);  // timm vit_base_patch16_224: 86.6M
  auto l70 = zoo::build_zoo_model("llama2-70b");
  ASSERT_TRUE(l70.ok());
  EXPECT_NEAR(double(params(*l70)) / 1e9, 68.98, 0.01);
  auto l405 = zoo::build_zoo_model("llama3-405b");
  ASSERT_TRUE(l405.ok());
  EXPECT_NEAR(double(params(*l405)) / 1e9, 405.9, 0.1);
}

TEST(Zoo, SmallPresetsRunInTheInterpreter) {
  for (const char* name :
       {"mlp", "gpt-tiny", "llama-tiny", "moe-tiny", "resnet-tiny", "vit-tiny"}) {
    SCOPED_TRACE(name);
    zoo::ModelOptions mo;
    mo.with_loss = true;
    zoo::ZooOverrides ov;
    if (std::string(name) == "mlp") ov.batch = 4;
    auto g = zoo::build_zoo_model(name, ov, mo);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    Interpreter it(*g);
    auto r = it.run(random_inputs(*g, 1, 10));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    float loss = (*r)[0].f32()[0];
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_GT(loss, 0.5);  // near log(classes) at initialisation
  }
}

// The small vision presets keep their full-size models' structure at a tiny size.
TEST(Zoo, TinyVisionPresetsKeepTheirStructure) {
  auto count = [](const Graph& g, OpKind k) {
    int64_t n = 0;
    for (const Op& op : g.ops()) n += op.kind == k;
    return n;
  };
  auto r50 = zoo::build_zoo_model("resnet50");
  auto rt = zoo::build_zoo_model("resnet-tiny");
  ASSERT_TRUE(r50.ok() && rt.ok());
  // Stem, then per bottleneck 1x1, 3x3, 1x1 convs plus a projection shortcut in each stage's
  // first block: 1 + 16 * 3 + 4 = 53 in ResNet-50, 1 + 4 * 3 + 4 = 17 with one block per stage.
  EXPECT_EQ(count(*r50, OpKind::kConv2d), 53);
  EXPECT_EQ(count(*rt, OpKind::kConv2d), 17);
  for (const Graph* g : {&*r50, &*rt}) {
    EXPECT_EQ(count(*g, OpKind::kMaxPool2d), 1);
    EXPECT_EQ(count(*g, OpKind::kGlobalAvgPool), 1);
  }
  EXPECT_EQ(rt->type(rt->outputs()[0]).shape(), IVec({2, 10}));
  auto vt = zoo::build_zoo_model("vit-tiny");
  ASSERT_TRUE(vt.ok());
  EXPECT_EQ(count(*vt, OpKind::kConv2d), 1);   // patch embedding
  EXPECT_EQ(count(*vt, OpKind::kSoftmax), 2);  // one attention per layer
  EXPECT_EQ(vt->type(vt->outputs()[0]).shape(), IVec({2, 10}));
}

TEST(Zoo, PublishedLlamaAndMixtralCounts) {
  // Parameter counts Hugging Face reports for the released checkpoints (safetensors metadata of
  // meta-llama/Llama-2-13b-hf, Meta-Llama-3-8B, Meta-Llama-3-70B, Llama-3.1-405B and
  // mistralai/Mixtral-8x7B-v0.1): 13.0B, 8.03B, 70.6B, 406B and 46.7B.
  const std::pair<const char*, int64_t> published[] = {{"llama2-13b", 13015864320},
                                                       {"llama3-8b", 8030261248},
                                                       {"llama3-70b", 70553706496},
                                                       {"llama3-405b", 405853388800},
                                                       {"mixtral-8x7b", 46702792704}};
  for (auto [name, count] : published) {
    SCOPED_TRACE(name);
    auto g = zoo::build_zoo_model(name);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_EQ(params(*g), count);
  }
}

TEST(Zoo, LlamaAndMoeOverrides) {
  // Llama-2-13B described from llama2-7b by its sizes (the 11.29B without --ffn).
  zoo::ZooOverrides o;
  o.layers = 40;
  o.hidden = 5120;
  o.heads = 40;
  auto no_ffn = zoo::build_zoo_model("llama2-7b", o);
  ASSERT_TRUE(no_ffn.ok());
  EXPECT_NE(params(*no_ffn), 13015864320);
  o.ffn = 13824;
  auto l13 = zoo::build_zoo_model("llama2-7b", o);
  ASSERT_TRUE(l13.ok());
  EXPECT_EQ(params(*l13), 13015864320);
  // Llama-3-8B from llama2-7b: 8 KV heads, ffn 14336, vocab 128256.
  zoo::ZooOverrides e;
  e.kv_heads = 8;
  e.ffn = 14336;
  e.vocab = 128256;
  auto l8 = zoo::build_zoo_model("llama2-7b", e);
  ASSERT_TRUE(l8.ok());
  EXPECT_EQ(params(*l8), 8030261248);
  // Experts scale the expert weights: each expert is 3 h ffn (SwiGLU) per layer.
  zoo::ZooOverrides x;
  x.experts = 8;
  auto tiny8 = zoo::build_zoo_model("mixtral-tiny", x);
  auto tiny4 = zoo::build_zoo_model("mixtral-tiny");
  ASSERT_TRUE(tiny8.ok() && tiny4.ok());
  EXPECT_EQ(params(*tiny8) - params(*tiny4), 2 * (4 * 3 * 64 * 96 + 4 * 64));
  zoo::ZooOverrides m;
  m.experts = 6;
  m.ffn = 128;
  m.top_k = 2;
  EXPECT_TRUE(zoo::build_zoo_model("moe-tiny", m).ok());
  // --top-k routes each token to k experts: the gating op takes k, and expert capacity grows with
  // it (ceil(k T 1.25 / E)); the weights do not change.
  for (const char* model : {"mixtral-tiny", "moe-tiny"}) {
    int64_t last_capacity = 0;
    for (int64_t kk : {1, 2, 3}) {
      zoo::ZooOverrides k;
      k.top_k = kk;
      auto built = zoo::build_zoo_model(model, k);
      ASSERT_TRUE(built.ok()) << model << " top-k " << kk << ": " << built.error().message;
      EXPECT_EQ(params(*built), params(*zoo::build_zoo_model(model)));
      std::set<int64_t> capacities;
      for (const Op& op : built->ops())
        if (op.kind == OpKind::kTopkGating) {
          EXPECT_EQ(std::get<int64_t>(op.attrs.at("k")), kk);
          capacities.insert(std::get<int64_t>(op.attrs.at("capacity")));
        }
      ASSERT_EQ(capacities.size(), 1u) << model << " top-k " << kk;  // every layer alike
      // 2 x 32 tokens over 4 experts at capacity factor 1.25: ceil(k * 64 * 1.25 / 4) = 20 k.
      EXPECT_EQ(*capacities.begin(), 20 * kk) << model;
      EXPECT_GT(*capacities.begin(), last_capacity);
      last_capacity = *capacities.begin();
    }
  }
  // Refused with the reason: top-k above the experts, kv heads that do not divide, experts on
  // dense.
  zoo::ZooOverrides k;
  k.top_k = 5;
  auto top5 = zoo::build_zoo_model("mixtral-tiny", k);
  ASSERT_FALSE(top5.ok());
  EXPECT_NE(top5.error().message.find("field 'top_k' must be in [1, 4]"), std::string::npos)
      << top5.error().message;
  zoo::ZooOverrides kv;
  kv.kv_heads = 3;
  auto bad_kv = zoo::build_zoo_model("llama-tiny", kv);
  ASSERT_FALSE(bad_kv.ok());
  EXPECT_NE(bad_kv.error().message.find("kv_heads"), std::string::npos) << bad_kv.error().message;
  zoo::ZooOverrides dense;
  dense.experts = 4;
  auto d = zoo::build_zoo_model("llama2-7b", dense);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--experts does not apply"), std::string::npos);
  zoo::ZooOverrides gpt_ffn;
  gpt_ffn.ffn = 100;
  EXPECT_FALSE(zoo::build_zoo_model("gpt-tiny", gpt_ffn).ok());
}

TEST(Zoo, OverridesAndBadConfigs) {
  zoo::ZooOverrides o;
  o.layers = 3;
  o.hidden = 96;
  o.heads = 6;
  auto g = zoo::build_zoo_model("gpt-tiny", o);
  ASSERT_TRUE(g.ok());
  auto c = zoo::gpt_preset("gpt-tiny", o);
  EXPECT_EQ(params(*g), zoo::megatron_parameters(*c) + 2 * 96);

  o.heads = 5;
  auto bad = zoo::build_zoo_model("gpt-tiny", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("hidden 96 is not divisible by heads 5"), std::string::npos)
      << bad.error().message;

  zoo::ZooOverrides v;
  v.vocab = 10;
  auto r = zoo::build_zoo_model("resnet50", v);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--vocab does not apply"), std::string::npos);

  zoo::ZooOverrides l;
  l.layers = 0;
  auto z = zoo::build_zoo_model("llama-tiny", l);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.error().message.find("'layers' must be >= 1"), std::string::npos);

  auto u = zoo::build_zoo_model("gpt-5");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message.find("unknown model 'gpt-5'"), std::string::npos);

  zoo::MlpConfig m;
  m.activation = "swish";
  auto a = zoo::build_mlp(m);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("'activation'"), std::string::npos);
}

}  // namespace
}  // namespace heddle
