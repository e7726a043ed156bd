// The zoo registry: named presets (mlp, gpt3-*, megatron-*, llama*, mixtral-8x7b, resnet50,
// vit-b16, gshard-moe, small test sizes) with the overrides of `heddle show`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/ops/zoo/Models.h"

namespace heddle::zoo {

/// One zoo entry for `heddle show --list`.
struct ZooEntry {
  std::string name;
  std::string family;       ///< mlp, gpt, llama, resnet, vit, moe
  std::string description;  ///< sizes and where the preset comes from
};

/// Overrides of a preset; unset fields keep the preset's value.
struct ZooOverrides {
  std::optional<int64_t> layers, hidden, heads, seq, vocab, batch;
  /// MLP inner width (llama, moe), key/value heads (llama), experts (moe, mixtral) and experts per
  /// token (moe, mixtral: 2 only, the gating op is top-2).
  std::optional<int64_t> ffn, kv_heads, experts, top_k;

  /// The batch and, where given, the hidden size, sequence length and layer count; the rest unset.
  static ZooOverrides sized(int64_t batch, std::optional<int64_t> hidden = {},
                            std::optional<int64_t> seq = {}, std::optional<int64_t> layers = {}) {
    ZooOverrides o;
    o.batch = batch;
    o.hidden = hidden;
    o.seq = seq;
    o.layers = layers;
    return o;
  }
};

/// Every preset, in a stable order.
const std::vector<ZooEntry>& zoo_entries();

/// True when `name` is a preset.
bool is_zoo_model(std::string_view name);

/// Builds preset `name` with overrides. Diagnostics: unknown name (listing the presets), an
/// override the family does not take, inconsistent sizes.
Result<Graph> build_zoo_model(std::string_view name, const ZooOverrides& over = {},
                              const ModelOptions& options = {});

/// The GPT config of a gpt/megatron preset with overrides applied (for formula checks).
Result<GptConfig> gpt_preset(std::string_view name, const ZooOverrides& over = {});

/// How a preset repeats: `layers` identical layers, grouped in units of `unit` layers that a
/// pipeline stage or a cost model may take or cost as one. `layers` == 0: the preset is not
/// described as repeating (MLP, ResNet: built and costed whole).
struct ZooLayers {
  int64_t layers = 0;  ///< repeating layers after the overrides; default 0: not layered
  int64_t unit = 1;    ///< layers per repeating unit; default 1 (2 for MoE: dense + expert layer)
};

/// The repeating layers of preset `name` with overrides applied. Diagnostics as build_zoo_model().
Result<ZooLayers> zoo_layers(std::string_view name, const ZooOverrides& over = {});

}  // namespace heddle::zoo
