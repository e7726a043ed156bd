#!/usr/bin/python3
"""Exports torchvision classification models to ONNX and checks heddle against torch.

Usage: /usr/bin/python3 tools/torchvision_check.py [--heddle PATH] [--out DIR] [--batch N]
           [--dynamic] [--rebatch N] [--mesh N --strategy S] [--plan-only] [MODEL...]

For each model (default: every classification builder of torchvision.models), with random weights
(seeded; BatchNorm statistics and norm affines randomized so outputs are not degenerate), writes
DIR/MODEL.onnx (opset 17; fixed batch, or a dynamic batch with --dynamic), an input and torch's
output, runs `heddle run MODEL.onnx --input x.npy --output y.npy --check` (partitioned, checked
against heddle's interpreter), and prints one table row: import/run status, the largest
|heddle - torch| relative to max |torch|, and the times. Needs Debian's python3-torch,
python3-torchvision and python3-onnx (scripts/install-deps --bench); CI does not run it.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))

# Input sizes: the smallest the architecture accepts comfortably (ViTs fix theirs).
SIZES = {"inception_v3": 96, "googlenet": 64, "vit_b_16": 224, "vit_b_32": 224, "vit_l_16": 224,
         "vit_l_32": 224, "vit_h_14": 224, "maxvit_t": 224, "alexnet": 224}
# VGG's AdaptiveAvgPool2d((7, 7)) exports only when it divides evenly: 224 (7 x 7 features).
SIZES.update({v: 224 for v in ("vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn",
                               "vgg19", "vgg19_bn")})
KWARGS = {"googlenet": {"aux_logits": False, "init_weights": True},
          "inception_v3": {"aux_logits": False, "init_weights": True}}


def classification_models():
    names = []
    for name in sorted(dir(torchvision.models)):
        obj = getattr(torchvision.models, name)
        if name.startswith("_") or not callable(obj) or not name.islower():
            continue
        if name in ("get_model", "get_weight", "list_models", "get_model_weights",
                    "get_model_builder"):
            continue
        names.append(name)
    return names


def randomize_norms(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                    m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
            if isinstance(m, torch.nn.Linear) and not m.weight.detach().any():
                m.weight.copy_(0.05 * torch.randn(m.weight.shape, generator=g))  # ViT's zero head
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.3 * torch.rand(m.running_var.shape, generator=g))


def check(name, args):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, **KWARGS.get(name, {})).eval()
    randomize_norms(model)
    size = SIZES.get(name, 64)
    x = torch.randn(args.batch, 3, size, size)
    with torch.no_grad():
        y = model(x)
    base = os.path.join(args.out, name)
    t0 = time.time()
    extra = {"dynamic_axes": {"x": {0: "batch"}, "y": {0: "batch"}}} if args.dynamic else {}
    torch.onnx.export(model, (x,), base + ".onnx", input_names=["x"], output_names=["y"],
                      opset_version=17, **extra)
    export_s = time.time() - t0
    if args.rebatch:  # run the batch-`batch` export at another batch, against torch at that batch
        x = torch.randn(args.rebatch, 3, size, size)
        with torch.no_grad():
            y = model(x)
    np.save(base + ".in.npy", x.numpy())
    if args.plan_only:
        return f"| `{name}` | {size} | | | {export_s:.0f} s | | {plan(base + '.onnx', args)} |"
    cmd = [args.heddle, "run", base + ".onnx", "--mesh", str(args.mesh), "--strategy",
           args.strategy, "--input", base + ".in.npy", "--output", base + ".heddle.npy", "--check"]
    if args.dynamic:
        cmd += ["--dim", f"batch={args.rebatch or args.batch}"]
    elif args.rebatch:
        cmd += ["--batch", str(args.rebatch)]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    run_s = time.time() - t0
    planned = plan(base + ".onnx", args)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["?"])[-1]
        return (f"| `{name}` | {size} | fails: {msg[:160]} | | {export_s:.0f} s | {run_s:.0f} s "
                f"| {planned} |")
    got = np.load(base + ".heddle.npy")
    want = y.numpy()
    rel = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    ok = "matches" if rel <= 1e-4 else "DIFFERS"
    return (f"| `{name}` | {size} | {ok} | {rel:.1e} | {export_s:.0f} s | {run_s:.0f} s "
            f"| {planned} |")


def plan(path, args):
    """Plans the model's training step at batch 256 on 8 A100s: the plan's step time and MFU."""
    cmd = [args.heddle, "plan", path, "--cluster", "a100x8", "--train", "--json"]
    cmd += ["--dim", "batch=256"] if args.dynamic else ["--batch", "256"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return "fails: " + (r.stderr.strip().splitlines() or ["?"])[-1][:120]
    j = json.loads(r.stdout)
    return f"{j['strategy']}: {j['step_time_s'] * 1e3:.1f} ms, MFU {j['mfu'] * 100:.1f}%"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heddle", default=os.path.join(HERE, "..", "build", "tools", "heddle",
                                                     "heddle"))
    p.add_argument("--out", default="/tmp/heddle_torchvision")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--mesh", type=int, default=2)
    p.add_argument("--strategy", default="dp=2")
    p.add_argument("--rebatch", type=int, default=0,
                   help="run the export at this batch (--batch N), against torch at it")
    p.add_argument("--plan-only", action="store_true", help="export and plan; do not run")
    p.add_argument("models", nargs="*")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print("| model | input | heddle vs torch | max rel error | export | heddle run --check "
          "| plan --train --batch 256, a100x8 |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models or classification_models():
        try:
            row = check(name, args)
        except Exception as e:  # an export failure is a row too
            row = f"| `{name}` | | torch export fails: {type(e).__name__} | | | | |"
        print(row, flush=True)


if __name__ == "__main__":
    sys.exit(main())
