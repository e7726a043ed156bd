// Model builders of the zoo, each from a config struct: MLP, GPT, Llama, ResNet-50, ViT and a
// GShard mixture-of-experts transformer. Graphs are shape-only, so even gpt3-175b builds fast.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/support/Result.h"

namespace heddle::zoo {

/// What every builder adds beyond the network.
struct ModelOptions {
  /// false (default): the output is the logits. true: an integer `labels` input is added and
  /// the output is the scalar mean cross-entropy loss (for training graphs).
  bool with_loss = false;
};

/// A multilayer perceptron classifier (the examples/mlp.hd network by default).
struct MlpConfig {
  int64_t batch = 64;               ///< default 64
  int64_t inputs = 784;             ///< input features; default 784
  int64_t hidden = 512;             ///< width of each hidden layer; default 512
  int64_t layers = 2;               ///< hidden layers; default 2
  int64_t classes = 10;             ///< default 10
  std::string activation = "relu";  ///< relu, gelu, gelu_tanh, silu, sigmoid, tanh
};

/// A GPT (pre-LayerNorm decoder, learned positions, GELU MLP of 4h, tied output embedding).
/// Parameters: 12 l h^2 + 13 l h + (V + s) h (Megatron's formula) + 2h (final LayerNorm).
struct GptConfig {
  int64_t layers = 2;               ///< l
  int64_t hidden = 64;              ///< h; divisible by heads
  int64_t heads = 4;                ///< attention heads
  int64_t seq = 32;                 ///< s: sequence length
  int64_t vocab = 128;              ///< V
  int64_t batch = 1;                ///< sequences per step
  std::string activation = "gelu";  ///< MLP activation
};

/// A Llama (RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention, untied head).
struct LlamaConfig {
  int64_t layers = 2;
  int64_t hidden = 64;  ///< divisible by heads
  int64_t heads = 4;
  int64_t kv_heads = 2;  ///< divides heads
  int64_t ffn = 172;     ///< SwiGLU inner width
  int64_t seq = 32;
  int64_t vocab = 128;
  int64_t batch = 1;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  /// > 0: every layer's MLP is a sparse mixture of this many SwiGLU experts of width `ffn`, top-k
  /// routed (Mixtral); default 0, a dense MLP.
  int64_t experts = 0;
  int64_t top_k = 2;  ///< experts per token when `experts` > 0 (Mixtral: 2); 1 <= top_k <= experts
};

/// ResNet-50 v1.5 (torchvision layout; BatchNorm in inference form: per-channel scale and
/// shift, 2 parameters per channel as in the published 25.6M count).
struct ResNetConfig {
  int64_t batch = 1;
  int64_t width = 64;  ///< bottleneck width of the first stage (64; 128: Wide ResNet-50-2)
  int64_t image = 224;
  int64_t classes = 1000;
  /// Stem channels; stage s outputs 4 * stem << s channels (default 64: 256, 512, 1024, 2048).
  int64_t stem = 64;
  /// Bottleneck blocks per stage (stage s is width << s wide inside); default ResNet-50's
  /// 3, 4, 6, 3.
  std::vector<int64_t> blocks = {3, 4, 6, 3};
};

/// ViT (patch embedding convolution, class token, learned positions, pre-LN encoder, GELU).
struct VitConfig {
  int64_t batch = 1;
  int64_t image = 224;
  int64_t patch = 16;
  int64_t layers = 12;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t mlp = 3072;
  int64_t classes = 1000;
};

/// A GShard-style MoE transformer: every other layer's MLP is a top-k gated mixture of experts
/// expressed with dispatch and combine einsums; capacity = ceil(k * tokens * factor / experts).
struct MoeConfig {
  int64_t layers = 4;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t experts = 4;
  int64_t top_k = 2;  ///< experts per token (GShard: 2); 1 <= top_k <= experts
  int64_t ffn = 256;
  int64_t seq = 32;
  int64_t vocab = 128;
  int64_t batch = 1;
  double capacity_factor = 1.25;
};

/// Builders. Inconsistent configs give a Diagnostic naming the field and the constraint.
Result<Graph> build_mlp(const MlpConfig& c, const ModelOptions& o = {});
Result<Graph> build_gpt(const GptConfig& c, const ModelOptions& o = {});
Result<Graph> build_llama(const LlamaConfig& c, const ModelOptions& o = {});
Result<Graph> build_resnet50(const ResNetConfig& c, const ModelOptions& o = {});
Result<Graph> build_vit(const VitConfig& c, const ModelOptions& o = {});
Result<Graph> build_moe(const MoeConfig& c, const ModelOptions& o = {});

/// Megatron's parameter count `12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h))`, exactly (integers).
int64_t megatron_parameters(const GptConfig& c);

}  // namespace heddle::zoo
