// The zoo's language models: MLP, GPT, Llama and the GShard MoE transformer.
#include <cmath>

#include "Blocks.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/zoo/Models.h"

namespace heddle::zoo {

using namespace blocks;

namespace {

Result<Graph> finish(Graph g, const Ops& ops) {
  HEDDLE_TRY(ops.status());
  HEDDLE_TRY(verify_ok(g));
  return g;
}

bool check_lm(Ops& ops, const char* m, int64_t layers, int64_t hidden, int64_t heads, int64_t seq,
              int64_t vocab, int64_t batch) {
  return check_min(ops, m, "layers", layers, 1) && check_min(ops, m, "hidden", hidden, 1) &&
         check_min(ops, m, "heads", heads, 1) && check_min(ops, m, "seq", seq, 1) &&
         check_min(ops, m, "vocab", vocab, 1) && check_min(ops, m, "batch", batch, 1) &&
         check_divisible(ops, m, "hidden", hidden, "heads", heads);
}

// Expert slots per expert: ceil(k T factor / E), as the GShard layer.
int64_t expert_capacity(int64_t k, int64_t tokens, double factor, int64_t experts) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(k) * static_cast<double>(tokens) *
                                        factor / static_cast<double>(experts)));
}

// A Mixtral-style sparse MLP: a router picks the top k of `c.experts` SwiGLU experts per token
// (tokens dispatched to expert slots of capacity ceil(k T 1.25 / E), as the GShard layer).
ValueId swiglu_experts(Ops& ops, ValueId h, const LlamaConfig& c, const std::string& p) {
  const int64_t H = c.hidden, T = c.batch * c.seq, E = c.experts;
  const int64_t C = expert_capacity(c.top_k, T, 1.25, E);
  ValueId t = ops.reshape(h, {T, H});
  ValueId probs = ops.softmax(dense(ops, t, H, E, p + ".router", false), -1);
  auto gate = ops.topk_gating(probs, c.top_k, C);
  if (gate.size() != 2) return h;
  ValueId xin = ops.einsum("tec,th->ech", gate[1], t);
  ValueId w1 = ops.param(p + ".experts.w1", f32({E, H, c.ffn}));
  ValueId w3 = ops.param(p + ".experts.w3", f32({E, H, c.ffn}));
  ValueId w2 = ops.param(p + ".experts.w2", f32({E, c.ffn, H}));
  ValueId hid =
      ops.mul(ops.silu(ops.einsum("ech,ehf->ecf", xin, w1)), ops.einsum("ech,ehf->ecf", xin, w3));
  ValueId out = ops.einsum("ecf,efh->ech", hid, w2);
  return ops.reshape(ops.einsum("tec,ech->th", gate[0], out), {c.batch, c.seq, H});
}

}  // namespace

int64_t megatron_parameters(const GptConfig& c) {
  int64_t l = c.layers, h = c.hidden;
  return 12 * l * h * h + 13 * l * h + (c.vocab + c.seq) * h;
}

Result<Graph> build_mlp(const MlpConfig& c, const ModelOptions& o) {
  Graph g("mlp");
  Ops ops(g);
  if (check_min(ops, "mlp", "batch", c.batch, 1) && check_min(ops, "mlp", "hidden", c.hidden, 1) &&
      check_min(ops, "mlp", "layers", c.layers, 0) &&
      check_min(ops, "mlp", "inputs", c.inputs, 1) &&
      check_min(ops, "mlp", "classes", c.classes, 1)) {
    ValueId x = ops.input("x", f32({c.batch, c.inputs}));
    int64_t width = c.inputs;
    for (int64_t i = 0; i < c.layers; ++i) {
      x = ops.activation(c.activation,
                         dense(ops, x, width, c.hidden, "fc" + std::to_string(i), true));
      width = c.hidden;
    }
    ValueId logits = dense(ops, x, width, c.classes, "head", true);
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  return finish(std::move(g), ops);
}

Result<Graph> build_gpt(const GptConfig& c, const ModelOptions& o) {
  Graph g("gpt");
  Ops ops(g);
  if (check_lm(ops, "gpt", c.layers, c.hidden, c.heads, c.seq, c.vocab, c.batch)) {
    int64_t H = c.hidden;
    ValueId ids = ops.input("ids", i64({c.batch, c.seq}));
    ValueId wte = ops.param("wte", f32({c.vocab, H}));
    ValueId x = ops.add(ops.embedding(ids, wte), ops.param("wpe", f32({c.seq, H})));
    AttnSpec a{c.heads, c.heads, true, true, 0};
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string p = "h" + std::to_string(l);
      x = ops.add(x, attention(ops, layer_norm(ops, x, H, p + ".ln1"), a, p + ".attn"));
      ValueId m = dense(ops, layer_norm(ops, x, H, p + ".ln2"), H, 4 * H, p + ".mlp.fc", true);
      m = dense(ops, ops.activation(c.activation, m), 4 * H, H, p + ".mlp.proj", true);
      x = ops.add(x, m);
    }
    x = layer_norm(ops, x, H, "ln_f");
    ValueId logits = ops.einsum("bsh,vh->bsv", x, wte);  // tied with the token embedding
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  return finish(std::move(g), ops);
}

Result<Graph> build_llama(const LlamaConfig& c, const ModelOptions& o) {
  Graph g("llama");
  Ops ops(g);
  if (check_lm(ops, "llama", c.layers, c.hidden, c.heads, c.seq, c.vocab, c.batch) &&
      check_min(ops, "llama", "kv_heads", c.kv_heads, 1) &&
      check_divisible(ops, "llama", "heads", c.heads, "kv_heads", c.kv_heads) &&
      check_min(ops, "llama", "ffn", c.ffn, 1) &&
      (c.experts == 0 || (check_min(ops, "llama", "experts", c.experts, 2) &&
                          check_range(ops, "llama", "top_k", c.top_k, 1, c.experts,
                                      "experts per token, at most the experts"))) &&
      check_divisible(ops, "llama", "head dim", c.hidden / c.heads, "rotary pair size", 2)) {
    int64_t H = c.hidden;
    ValueId ids = ops.input("ids", i64({c.batch, c.seq}));
    ValueId x = ops.embedding(ids, ops.param("embed", f32({c.vocab, H})));
    AttnSpec a{c.heads, c.kv_heads, true, false, c.rope_theta};
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string p = "layers" + std::to_string(l);
      ValueId h = ops.rmsnorm(x, ops.param(p + ".attn_norm.gamma", f32({H})), c.norm_eps);
      x = ops.add(x, attention(ops, h, a, p + ".attn"));
      h = ops.rmsnorm(x, ops.param(p + ".mlp_norm.gamma", f32({H})), c.norm_eps);
      if (c.experts > 0) {
        x = ops.add(x, swiglu_experts(ops, h, c, p));
        continue;
      }
      ValueId gate = ops.silu(dense(ops, h, H, c.ffn, p + ".mlp.gate", false));
      ValueId up = dense(ops, h, H, c.ffn, p + ".mlp.up", false);
      x = ops.add(x, dense(ops, ops.mul(gate, up), c.ffn, H, p + ".mlp.down", false));
    }
    x = ops.rmsnorm(x, ops.param("norm.gamma", f32({H})), c.norm_eps);
    ValueId logits = dense(ops, x, H, c.vocab, "lm_head", false);
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  return finish(std::move(g), ops);
}

Result<Graph> build_moe(const MoeConfig& c, const ModelOptions& o) {
  Graph g("gshard_moe");
  Ops ops(g);
  if (check_lm(ops, "moe", c.layers, c.hidden, c.heads, c.seq, c.vocab, c.batch) &&
      check_min(ops, "moe", "experts", c.experts, 2) &&
      check_range(ops, "moe", "top_k", c.top_k, 1, c.experts,
                  "experts per token, at most the experts") &&
      check_min(ops, "moe", "ffn", c.ffn, 1)) {
    if (!(c.capacity_factor > 0)) ops.fail("moe: field 'capacity_factor' must be positive");
    int64_t H = c.hidden, T = c.batch * c.seq, E = c.experts;
    const int64_t C = expert_capacity(c.top_k, T, c.capacity_factor, E);
    ValueId ids = ops.input("ids", i64({c.batch, c.seq}));
    ValueId wte = ops.param("wte", f32({c.vocab, H}));
    ValueId x = ops.add(ops.embedding(ids, wte), ops.param("wpe", f32({c.seq, H})));
    AttnSpec a{c.heads, c.heads, true, true, 0};
    for (int64_t l = 0; l < c.layers && ops.ok(); ++l) {
      std::string p = "h" + std::to_string(l);
      x = ops.add(x, attention(ops, layer_norm(ops, x, H, p + ".ln1"), a, p + ".attn"));
      ValueId h = layer_norm(ops, x, H, p + ".ln2");
      ValueId m;
      if (l % 2 == 1) {
        // Top-k gating; dispatch tokens to expert slots, run every expert, combine back.
        ValueId t = ops.reshape(h, {T, H});
        ValueId probs = ops.softmax(dense(ops, t, H, E, p + ".gate", false), -1);
        auto gate = ops.topk_gating(probs, c.top_k, C);
        if (gate.size() != 2) break;
        ValueId xin = ops.einsum("tec,th->ech", gate[1], t);
        ValueId w1 = ops.param(p + ".experts.w1", f32({E, H, c.ffn}));
        ValueId w2 = ops.param(p + ".experts.w2", f32({E, c.ffn, H}));
        ValueId hid = ops.gelu(ops.einsum("ech,ehf->ecf", xin, w1));
        ValueId out = ops.einsum("ecf,efh->ech", hid, w2);
        m = ops.reshape(ops.einsum("tec,ech->th", gate[0], out), {c.batch, c.seq, H});
      } else {
        m = dense(ops, ops.gelu(dense(ops, h, H, c.ffn, p + ".mlp.fc", true)), c.ffn, H,
                  p + ".mlp.proj", true);
      }
      x = ops.add(x, m);
    }
    x = layer_norm(ops, x, H, "ln_f");
    ValueId logits = ops.einsum("bsh,vh->bsv", x, wte);
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  return finish(std::move(g), ops);
}

}  // namespace heddle::zoo
