// The zoo's presets. Sources: GPT-3 sizes as in Alpa's benchmark suite (seq 1024, vocab 51200;
// gpt3-175b from the GPT-3 paper, seq 2048, vocab 50257); Megatron rows from Narayanan et al.
// SC'21 Table 1 (vocab 51,200, seq 2,048); Llama 2 / Llama 3 / Mixtral model cards.
#include "heddle/ops/zoo/Zoo.h"

#include <functional>

#include "heddle/support/Strings.h"

namespace heddle::zoo {

namespace {

struct GptRow {
  const char* name;
  int64_t layers, hidden, heads, seq, vocab;
  const char* source;
};

const GptRow kGpt[] = {
    {"gpt-tiny", 2, 64, 4, 32, 128, "small test size"},
    {"gpt3-1.3b", 24, 2048, 32, 1024, 51200, "Alpa GPT-3 1.3B"},
    {"gpt3-2.6b", 32, 2560, 32, 1024, 51200, "Alpa GPT-3 2.6B"},
    {"gpt3-6.7b", 32, 4096, 32, 1024, 51200, "Alpa GPT-3 6.7B"},
    {"gpt3-15b", 48, 5120, 40, 1024, 51200, "Alpa GPT-3 15B"},
    {"gpt3-39b", 48, 8192, 64, 1024, 51200, "Alpa GPT-3 39B"},
    {"gpt3-175b", 96, 12288, 96, 2048, 50257, "GPT-3 paper 175B"},
    {"megatron-1.7b", 24, 2304, 24, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-3.6b", 30, 3072, 32, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-7.5b", 36, 4096, 32, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-18.4b", 40, 6144, 48, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-39.1b", 48, 8192, 64, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-76.1b", 60, 10240, 80, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-145.6b", 80, 12288, 96, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-310.1b", 96, 16384, 128, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-529.6b", 105, 20480, 128, 2048, 51200, "Megatron-LM Table 1"},
    {"megatron-1t", 128, 25600, 160, 2048, 51200, "Megatron-LM Table 1 (1008B)"},
};

struct LlamaRow {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, ffn, vocab, seq;
  double theta;
  int64_t experts;  // 0: dense MLP
  const char* source;
};

// Sizes from the models' config.json files (Hugging Face) and model cards; parameter counts
// are asserted in tests/ops/ZooTest.cpp.
const LlamaRow kLlama[] = {
    {"llama-tiny", 2, 64, 4, 2, 172, 128, 32, 10000.0, 0, "small test size"},
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0, 0, "Llama 2 model card, 6.74B"},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0, 0, "Llama 2 model card, 13.0B"},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 10000.0, 0, "Llama 2 model card, 69.0B"},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0, 0, "Llama 3 model card, 8.03B"},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0, 0, "Llama 3 model card, 70.6B"},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 500000.0, 0,
     "Llama 3.1 model card, 405B"},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, 1000000.0, 8,
     "Mixtral 8x7B: 8 SwiGLU experts, top-2, 46.7B (seq 4096 of its 32k context)"},
    {"mixtral-tiny", 2, 64, 4, 2, 96, 128, 32, 10000.0, 4, "small test size, 4 experts, top-2"},
};

std::vector<ZooEntry> make_entries() {
  std::vector<ZooEntry> e;
  e.push_back({"mlp", "mlp", "784-512-512-10 classifier, batch 64 (examples/mlp.hd)"});
  for (const auto& r : kGpt)
    e.push_back({r.name, "gpt",
                 "l=" + std::to_string(r.layers) + " h=" + std::to_string(r.hidden) +
                     " heads=" + std::to_string(r.heads) + " s=" + std::to_string(r.seq) +
                     " V=" + std::to_string(r.vocab) + " (" + r.source + ")"});
  for (const auto& r : kLlama)
    e.push_back({r.name, "llama",
                 "l=" + std::to_string(r.layers) + " h=" + std::to_string(r.hidden) +
                     " heads=" + std::to_string(r.heads) + "/" + std::to_string(r.kv_heads) +
                     " kv ffn=" + std::to_string(r.ffn) + " V=" + std::to_string(r.vocab) +
                     (r.experts ? " experts=" + std::to_string(r.experts) : "") + " (" + r.source +
                     ")"});
  e.push_back({"resnet50", "resnet", "ResNet-50 v1.5, 224x224, 1000 classes (25.6M)"});
  e.push_back({"wide-resnet50-2", "resnet",
               "Wide ResNet-50-2 (torchvision), 224x224, 1000 classes (68.9M); --hidden widens"});
  e.push_back({"vit-b16", "vit", "ViT-B/16, 224x224, 1000 classes (86.6M)"});
  e.push_back({"resnet-tiny", "resnet",
               "small test size: ResNet-50's bottleneck stages, 1 block each, width 8, 32x32, "
               "10 classes, batch 2"});
  e.push_back({"vit-tiny", "vit",
               "small test size: l=2 h=32 heads=4 mlp=64, 24x24 patch 8 (10 tokens), 10 "
               "classes, batch 2"});
  e.push_back({"gshard-moe", "moe", "GShard MoE: l=12 h=768 heads=12, 8 experts, top-2"});
  e.push_back({"moe-tiny", "moe", "small test size, 4 experts, top-2"});
  return e;
}

std::string join_flags(std::initializer_list<const char*> allowed) {
  std::string out;
  for (const char* a : allowed) out += (out.empty() ? "" : ", --") + std::string(a);
  return out;
}

// Applies the overrides named in `allowed`; any other set override is an error.
Status apply(const ZooOverrides& o, std::string_view model,
             std::initializer_list<const char*> allowed,
             const std::vector<std::pair<const char*, int64_t*>>& fields) {
  const std::pair<const char*, const std::optional<int64_t>*> all[] = {
      {"layers", &o.layers}, {"hidden", &o.hidden},     {"heads", &o.heads},
      {"seq", &o.seq},       {"vocab", &o.vocab},       {"batch", &o.batch},
      {"ffn", &o.ffn},       {"kv-heads", &o.kv_heads}, {"experts", &o.experts},
      {"top-k", &o.top_k}};
  for (auto [name, val] : all) {
    if (!val->has_value()) continue;
    bool ok = false;
    for (const char* a : allowed) ok = ok || std::string_view(a) == name;
    if (!ok)
      return Diagnostic("override --" + std::string(name) + " does not apply to model '" +
                        std::string(model) + "' (it takes --" + join_flags(allowed) + ")");
    for (auto [f, dst] : fields)
      if (std::string_view(f) == name) *dst = **val;
  }
  return {};
}

// The fields every language model takes (`--layers ... --batch`), then `more`.
template <class Config>
std::vector<std::pair<const char*, int64_t*>> lm_fields(
    Config& c, std::initializer_list<std::pair<const char*, int64_t*>> more = {}) {
  std::vector<std::pair<const char*, int64_t*>> f = {{"layers", &c.layers}, {"hidden", &c.hidden},
                                                     {"heads", &c.heads},   {"seq", &c.seq},
                                                     {"vocab", &c.vocab},   {"batch", &c.batch}};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

bool is_gpt(std::string_view name) {
  for (const auto& r : kGpt)
    if (name == r.name) return true;
  return false;
}

const LlamaRow* find_llama(std::string_view name) {
  for (const auto& r : kLlama)
    if (name == r.name) return &r;
  return nullptr;
}

bool is_vit(std::string_view name) { return name == "vit-b16" || name == "vit-tiny"; }
bool is_moe(std::string_view name) { return name == "gshard-moe" || name == "moe-tiny"; }

Result<LlamaConfig> llama_config(const LlamaRow& r, const ZooOverrides& over) {
  LlamaConfig c;
  c.layers = r.layers;
  c.hidden = r.hidden;
  c.heads = r.heads;
  c.kv_heads = r.kv_heads;
  c.ffn = r.ffn;
  c.vocab = r.vocab;
  c.seq = r.seq;
  c.rope_theta = r.theta;
  c.experts = r.experts;
  const std::string_view name = r.name;
  c.batch = name == "llama-tiny" || name == "mixtral-tiny" ? 2 : 1;
  const bool sparse = r.experts > 0;
  HEDDLE_TRY(apply(
      over, name,
      sparse ? std::initializer_list<const char*>{"layers", "hidden", "heads", "seq", "vocab",
                                                  "batch", "ffn", "kv-heads", "experts", "top-k"}
             : std::initializer_list<const char*>{"layers", "hidden", "heads", "seq", "vocab",
                                                  "batch", "ffn", "kv-heads"},
      lm_fields(c, {{"ffn", &c.ffn},
                    {"kv-heads", &c.kv_heads},
                    {"experts", &c.experts},
                    {"top-k", &c.top_k}})));
  if (over.heads && !over.kv_heads && c.heads % c.kv_heads != 0) c.kv_heads = c.heads;
  return c;
}

Result<VitConfig> vit_config(std::string_view name, const ZooOverrides& over) {
  VitConfig c;
  if (name == "vit-tiny") {
    c.batch = 2;
    c.image = 24;
    c.patch = 8;
    c.layers = 2;
    c.hidden = 32;
    c.heads = 4;
    c.mlp = 64;
    c.classes = 10;
  }
  HEDDLE_TRY(apply(
      over, name, {"layers", "hidden", "heads", "batch"},
      {{"layers", &c.layers}, {"hidden", &c.hidden}, {"heads", &c.heads}, {"batch", &c.batch}}));
  return c;
}

Result<MoeConfig> moe_config(std::string_view name, const ZooOverrides& over) {
  MoeConfig c;
  if (name == "gshard-moe") {
    c.layers = 12;
    c.hidden = 768;
    c.heads = 12;
    c.experts = 8;
    c.ffn = 3072;
    c.seq = 1024;
    c.vocab = 32000;
  } else {
    c.batch = 2;
  }
  HEDDLE_TRY(apply(
      over, name, {"layers", "hidden", "heads", "seq", "vocab", "batch", "ffn", "experts", "top-k"},
      lm_fields(c, {{"ffn", &c.ffn}, {"experts", &c.experts}, {"top-k", &c.top_k}})));
  return c;
}

}  // namespace

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> e = make_entries();
  return e;
}

bool is_zoo_model(std::string_view name) {
  for (const auto& e : zoo_entries())
    if (e.name == name) return true;
  return false;
}

Result<GptConfig> gpt_preset(std::string_view name, const ZooOverrides& over) {
  for (const auto& r : kGpt) {
    if (name != r.name) continue;
    GptConfig c;
    c.layers = r.layers;
    c.hidden = r.hidden;
    c.heads = r.heads;
    c.seq = r.seq;
    c.vocab = r.vocab;
    c.batch = name == "gpt-tiny" ? 2 : 1;
    HEDDLE_TRY(
        apply(over, name, {"layers", "hidden", "heads", "seq", "vocab", "batch"}, lm_fields(c)));
    return c;
  }
  return Diagnostic("'" + std::string(name) + "' is not a GPT preset");
}

Result<Graph> build_zoo_model(std::string_view name, const ZooOverrides& over,
                              const ModelOptions& options) {
  if (name == "mlp") {
    MlpConfig c;
    HEDDLE_TRY(apply(over, name, {"layers", "hidden", "batch"},
                     {{"layers", &c.layers}, {"hidden", &c.hidden}, {"batch", &c.batch}}));
    return build_mlp(c, options);
  }
  if (is_gpt(name)) {
    auto c = gpt_preset(name, over);
    HEDDLE_TRY(c);
    return build_gpt(*c, options);
  }
  if (const LlamaRow* r = find_llama(name)) {
    auto c = llama_config(*r, over);
    HEDDLE_TRY(c);
    return build_llama(*c, options);
  }
  if (name == "resnet50" || name == "wide-resnet50-2" || name == "resnet-tiny") {
    ResNetConfig c;
    if (name == "wide-resnet50-2") c.width = 128;
    if (name == "resnet-tiny") {
      c.batch = 2;
      c.image = 32;
      c.classes = 10;
      c.width = 8;
      c.stem = 8;
      c.blocks = {1, 1, 1, 1};
    }
    HEDDLE_TRY(apply(over, name, {"batch", "hidden"}, {{"batch", &c.batch}, {"hidden", &c.width}}));
    return build_resnet50(c, options);
  }
  if (is_vit(name)) {
    auto c = vit_config(name, over);
    HEDDLE_TRY(c);
    return build_vit(*c, options);
  }
  if (is_moe(name)) {
    auto c = moe_config(name, over);
    HEDDLE_TRY(c);
    return build_moe(*c, options);
  }
  std::vector<std::string> names;
  for (const auto& e : zoo_entries()) names.push_back(e.name);
  return Diagnostic(
      "unknown model '" + std::string(name) +
      "': not a zoo name (heddle show --list) and not a file; zoo: " + join(names, ", "));
}

Result<ZooLayers> zoo_layers(std::string_view name, const ZooOverrides& over) {
  if (is_gpt(name)) {
    auto c = gpt_preset(name, over);
    HEDDLE_TRY(c);
    return ZooLayers{c->layers, 1};
  }
  if (const LlamaRow* r = find_llama(name)) {
    auto c = llama_config(*r, over);
    HEDDLE_TRY(c);
    return ZooLayers{c->layers, 1};
  }
  if (is_vit(name)) {
    auto c = vit_config(name, over);
    HEDDLE_TRY(c);
    return ZooLayers{c->layers, 1};
  }
  if (is_moe(name)) {  // dense and expert layers alternate: a unit is one of each
    auto c = moe_config(name, over);
    HEDDLE_TRY(c);
    return ZooLayers{c->layers, 2};
  }
  auto g = build_zoo_model(name, over);  // unknown names and overrides the preset does not take
  HEDDLE_TRY(g);
  return ZooLayers{};
}

}  // namespace heddle::zoo
