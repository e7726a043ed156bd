"""torchvision models for bench/torch_compare.py: seeded weights, and the training form.

Forward cases export the eval-mode model as it is (torch's exporter folds each BatchNorm that
follows a convolution into the convolution's weights and bias).

Training cases need both sides to train the *same parameters* under the same function, or AdamW
(an elementwise update) would move different numbers:

- heddle imports an ONNX BatchNormalization as `x * scale + shift` with two trained [C,1,1]
  parameters (inference statistics; training-mode BatchNorm is not imported), and a BatchNorm
  the exporter folded into a convolution as that convolution's weights and bias.
- So the PyTorch module is first rewritten into exactly that form, then exported: every
  BatchNorm that directly follows a convolution is folded into it (torch.fx's `fuse`, eval
  statistics), every other BatchNorm (DenseNet's, after a concat) becomes `x * scale + shift`
  with parameters scale = gamma / sqrt(var + eps), shift = beta - mean * scale. The exported file
  and the module then hold the same parameters; the exporter's constant folding only transposes
  or slices some (ViT's attention projections), which an elementwise optimizer does not notice.
- The module stays in eval mode (no dropout: the ONNX export has none either) with every
  parameter trainable. Batch statistics are therefore *not* computed on either side: this is a
  BatchNorm-free training step (convolutions with bias), not torchvision's train-mode step.
"""
import math

import torch
import torch.nn as nn


def randomize_norms(model, gen):
    """BatchNorm statistics and norm affines drawn at random (seeded), and parameters that
    torchvision initializes to zero (ViT's classifier head and class token, biases) drawn too, so
    that eval-mode outputs are not degenerate and a mistranslated op shows in the comparison."""
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.uniform_(-1.0 / math.sqrt(fan_in), 1.0 / math.sqrt(fan_in), generator=gen)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.1, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.1, 0.1, generator=gen)


def torchvision_model(name, seed):
    """torchvision's `name` with weights=None after manual_seed(seed), norms randomized; eval."""
    import torchvision
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None)
    randomize_norms(model, torch.Generator().manual_seed(seed + 1))
    return model.eval()


class ChannelAffine(nn.Module):
    """An inference BatchNorm as heddle imports it: x * scale + shift, [C,1,1] parameters."""

    def __init__(self, bn):
        super().__init__()
        with torch.no_grad():
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            shift = bn.bias - bn.running_mean * scale
        self.scale = nn.Parameter(scale.detach().reshape(-1, 1, 1).clone())
        self.shift = nn.Parameter(shift.detach().reshape(-1, 1, 1).clone())

    def forward(self, x):
        return x * self.scale + self.shift


def _replace_batchnorms(module):
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(module, name, ChannelAffine(child))
        else:
            _replace_batchnorms(child)


def training_model(name, seed):
    """The training form of torchvision's `name` (module docstring): BatchNorms folded into the
    preceding convolutions or turned into trainable per-channel affines; eval mode, every
    parameter trainable."""
    from torch.fx.experimental.optimization import fuse
    model = torchvision_model(name, seed)
    has_bn = any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    if has_bn:
        model = fuse(model)
        _replace_batchnorms(model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)
    return model
