#!/usr/bin/python3
"""Exports the ONNX test fixtures in tests/data/ with Debian's python3-torch.

Run with `/usr/bin/python3 tools/export_fixtures.py [NAME...]` (needs python3-torch and python3-onnx; CI
does not: it uses the committed files). For each model NAME it writes NAME.onnx, NAME.in.npy (a
fixed input) and NAME.out.npy (torch's output for that input). Deterministic: fixed seeds.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(torch.relu(self.fc1(x)))))


class SmallCnn(nn.Module):
    """Strided and padded convs, BatchNorm, max and average pooling, a residual, a classifier."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.conv3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(x + self.bn2(self.conv2(x)))
        x = self.avg(torch.relu(self.conv3(x)))
        return self.fc(torch.flatten(x, 1))


class Encoder(nn.Module):
    """PyTorch's own nn.TransformerEncoder (post-norm, GELU) over token embeddings."""

    def __init__(self, vocab=32, d=32, heads=4, layers=2, seq=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, 4)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids) + self.pos))


class CausalBlock(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        att = att.masked_fill(~self.mask[:s, :s], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Decoder(nn.Module):
    """A GPT-style causal decoder (nanoGPT's shape), exported at opset 14 so LayerNorm decomposes."""

    def __init__(self, vocab=48, d=32, heads=4, layers=2, seq=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([CausalBlock(d, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


class InvertedResidual(nn.Module):
    """MobileNetV2/V3's block: 1x1 expand, depthwise 3x3, squeeze-excite, 1x1 project."""

    def __init__(self, cin, cout, expand, stride, act):
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), act())
        self.dw = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                                nn.BatchNorm2d(mid), act())
        self.se_reduce = nn.Conv2d(mid, mid // 4, 1)
        self.se_expand = nn.Conv2d(mid // 4, mid, 1)
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.dw(self.expand(x))
        s = F.adaptive_avg_pool2d(y, 1)
        y = y * F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        y = self.project(y)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    """A tiny MobileNetV2/V3: ReLU6 (Clip), Hardswish, depthwise convs, squeeze-excite."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.b1 = InvertedResidual(8, 8, 2, 1, nn.ReLU6)
        self.b2 = InvertedResidual(8, 16, 2, 2, nn.Hardswish)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.b2(self.b1(self.stem(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TinyVit(nn.Module):
    """torchvision's ViT layout: patch conv, class token, learned positions, encoder, head."""

    def __init__(self, image=16, patch=4, d=32, heads=4, layers=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.ln(self.enc(x))[:, 0])


class Pools(nn.Module):
    """ceil_mode pooling (squeezenet, googlenet), Pad in its three modes, inception's padded average
    pool, swin's padding up to a window multiple (Mod on the traced shape) and strided slices."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * (36 + 49 + 36 + 144 + 195 + 195 + 176 + 225 + 24), 3)

    def forward(self, x):  # x [B, 3, 14, 14] -> conv 12 x 12
        x = self.conv(x)
        pad_r = (5 - x.shape[-1] % 5) % 5
        parts = [
            F.max_pool2d(x, 3, 2, ceil_mode=True),                                 # 6 x 6
            F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),  # 7 x 7
            F.avg_pool2d(x, 3, 2, ceil_mode=True),                                 # 6 x 6
            F.avg_pool2d(x, 3, 1, padding=1),                                      # 12 x 12
            F.pad(x, (1, 2, 0, 1), mode="reflect"),                                # 13 x 15
            F.pad(x, (2, 1, 1, 0), mode="replicate"),                              # 13 x 15 -> 195
            F.pad(x, (0, 0, 2, 2), value=0.5)[:, :, :, :11],                       # 16 x 11 -> 176
            F.pad(x, (0, pad_r, 0, pad_r)),                                        # 15 x 15
            x[:, :, 0::2, 1::3],                                                   # 6 x 4
        ]
        return self.fc(torch.cat([p.flatten(1) for p in parts], 1))


class Recurrent(nn.Module):
    """nn.LSTM (2 layers, bidirectional), nn.GRU started from a given state, and a bidirectional
    ReLU nn.RNN, over a batch-first sequence."""

    def __init__(self, d=8, h=6):
        super().__init__()
        self.lstm = nn.LSTM(d, h, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(2 * h, h, batch_first=True)
        self.rnn = nn.RNN(h, h, nonlinearity="relu", bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(1, 1, h) * 0.5)
        self.head = nn.Linear(2 * h, 5)

    def forward(self, x):  # x [B, S, d]
        y, _ = self.lstm(x)
        h0 = self.h0.expand(1, x.shape[0], -1).contiguous()
        y, hn = self.gru(y, h0)
        y, _ = self.rnn(y.transpose(0, 1), hn.expand(2, -1, -1).contiguous())
        return self.head(y[-1])


def randomize_norms(model):
    # Non-trivial BatchNorm statistics and LayerNorm affines, so the tests exercise them.
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            with torch.no_grad():
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                    m.running_var.copy_(1 + 0.3 * torch.rand(m.running_var.shape, generator=g))


def export(name, model, x, opset, dynamic_batch=False, fold=True):
    model.eval()
    randomize_norms(model)
    with torch.no_grad():
        y = model(x)
    path = os.path.join(OUT, name + ".onnx")
    kwargs = {}
    if dynamic_batch:
        kwargs["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    if not fold:
        kwargs["training"] = torch.onnx.TrainingMode.PRESERVE  # skips the BN-into-Conv fusion
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                      opset_version=opset, do_constant_folding=fold, **kwargs)
    np.save(os.path.join(OUT, name + ".in.npy"), x.numpy())
    np.save(os.path.join(OUT, name + ".out.npy"), y.numpy())
    print(f"{name}: opset {opset}, input {tuple(x.shape)}, output {tuple(y.shape)}", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])  # fixture names to write; default all
    if only:
        global export
        full = export
        export = lambda name, *a, **k: full(name, *a, **k) if name in only else None  # noqa
    torch.manual_seed(0)
    export("mlp", Mlp(), torch.randn(4, 16), 13, dynamic_batch=True)
    torch.manual_seed(0)
    # Without constant folding torch keeps BatchNormalization (it would fuse it into Conv).
    export("cnn", SmallCnn(), torch.randn(4, 3, 32, 32), 13, fold=False)
    torch.manual_seed(0)
    export("encoder", Encoder(), torch.randint(0, 32, (4, 8)), 17)
    torch.manual_seed(0)
    export("decoder", Decoder(), torch.randint(0, 48, (4, 8)), 14)
    torch.manual_seed(0)
    export("mobilenet", MobileNet(), torch.randn(4, 3, 32, 32), 13, fold=False)
    torch.manual_seed(0)
    export("vit", TinyVit(), torch.randn(4, 3, 16, 16), 17)
    torch.manual_seed(0)
    export("pools", Pools(), torch.randn(4, 3, 14, 14), 17)
    torch.manual_seed(0)
    export("recurrent", Recurrent(), torch.randn(4, 7, 8), 17)


if __name__ == "__main__":
    main()
