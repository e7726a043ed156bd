// The zoo's vision models: ResNet-50 v1.5 and ViT.
#include "Blocks.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/zoo/Models.h"

namespace heddle::zoo {

using namespace blocks;

namespace {

// BatchNorm in inference form: per-channel scale and shift ([C, 1, 1], broadcast over H, W).
ValueId batch_norm(Ops& ops, ValueId x, int64_t c, const std::string& name) {
  ValueId y = ops.mul(x, ops.param(name + ".gamma", f32({c, 1, 1})));
  return ops.add(y, ops.param(name + ".beta", f32({c, 1, 1})));
}

ValueId conv_bn(Ops& ops, ValueId x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                const std::string& name, bool relu) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {k / 2, k / 2};
  ValueId y = ops.conv2d(x, ops.param(name + ".conv.w", f32({cout, cin, k, k})), o);
  y = batch_norm(ops, y, cout, name + ".bn");
  return relu ? ops.relu(y) : y;
}

}  // namespace

Result<Graph> build_resnet50(const ResNetConfig& c, const ModelOptions& o) {
  Graph g("resnet50");
  Ops ops(g);
  if (check_min(ops, "resnet50", "batch", c.batch, 1) &&
      check_min(ops, "resnet50", "image", c.image, 32) &&
      check_min(ops, "resnet50", "classes", c.classes, 1) &&
      check_min(ops, "resnet50", "hidden", c.width, 1)) {
    ValueId x = ops.input("image", f32({c.batch, 3, c.image, c.image}));
    x = conv_bn(ops, x, 3, 64, 7, 2, "stem", true);
    x = ops.maxpool2d(x, {{3, 3}, {2, 2}, {1, 1}});
    int64_t cin = 64;
    const int64_t blocks[4] = {3, 4, 6, 3};
    for (int64_t s = 0; s < 4; ++s) {
      int64_t w = c.width << s, out = 256 << s;
      for (int64_t b = 0; b < blocks[s]; ++b) {
        std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
        int64_t stride = b == 0 && s > 0 ? 2 : 1;
        ValueId y = conv_bn(ops, x, cin, w, 1, 1, p + ".a", true);
        y = conv_bn(ops, y, w, w, 3, stride, p + ".b", true);
        y = conv_bn(ops, y, w, out, 1, 1, p + ".c", false);
        ValueId skip = x;
        if (b == 0) skip = conv_bn(ops, x, cin, out, 1, stride, p + ".down", false);
        x = ops.relu(ops.add(y, skip));
        cin = out;
      }
    }
    ValueId logits = dense(ops, ops.global_avgpool(x), cin, c.classes, "fc", true);
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  HEDDLE_TRY(ops.status());
  HEDDLE_TRY(verify_ok(g));
  return g;
}

Result<Graph> build_vit(const VitConfig& c, const ModelOptions& o) {
  Graph g("vit");
  Ops ops(g);
  if (check_min(ops, "vit", "batch", c.batch, 1) && check_min(ops, "vit", "layers", c.layers, 1) &&
      check_min(ops, "vit", "patch", c.patch, 1) &&
      check_divisible(ops, "vit", "image", c.image, "patch", c.patch) &&
      check_divisible(ops, "vit", "hidden", c.hidden, "heads", c.heads) &&
      check_min(ops, "vit", "mlp", c.mlp, 1)) {
    int64_t H = c.hidden, n = (c.image / c.patch) * (c.image / c.patch), B = c.batch;
    ValueId img = ops.input("image", f32({B, 3, c.image, c.image}));
    Conv2dOptions po;
    po.stride = {c.patch, c.patch};
    ValueId x = ops.conv2d(img, ops.param("patch.w", f32({H, 3, c.patch, c.patch})), po);
    x = ops.add(x, ops.param("patch.bias", f32({H, 1, 1})));
    x = ops.transpose(ops.reshape(x, {B, H, n}), {0, 2, 1});
    ValueId cls = ops.broadcast(ops.param("cls_token", f32({1, 1, H})), {B, 1, H});
    x = ops.add(ops.concat({cls, x}, 1), ops.param("pos_embed", f32({n + 1, H})));
    AttnSpec a{c.heads, c.heads, false, true, 0};
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string p = "blocks" + std::to_string(l);
      x = ops.add(x, attention(ops, layer_norm(ops, x, H, p + ".ln1"), a, p + ".attn"));
      ValueId m =
          ops.gelu(dense(ops, layer_norm(ops, x, H, p + ".ln2"), H, c.mlp, p + ".fc1", true));
      x = ops.add(x, dense(ops, m, c.mlp, H, p + ".fc2", true));
    }
    x = layer_norm(ops, x, H, "norm");
    ValueId cls_out = ops.reshape(ops.slice(x, {0, 0, 0}, {B, 1, H}), {B, H});
    ValueId logits = dense(ops, cls_out, H, c.classes, "head", true);
    ops.output(o.with_loss ? mean_loss(ops, logits) : logits);
  }
  HEDDLE_TRY(ops.status());
  HEDDLE_TRY(verify_ok(g));
  return g;
}

}  // namespace heddle::zoo
