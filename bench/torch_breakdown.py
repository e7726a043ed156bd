#!/usr/bin/python3
"""Where a training step's time goes, heddle next to PyTorch, on one core.

    /usr/bin/python3 bench/torch_breakdown.py --heddle build/tools/heddle/heddle \
        [--cases gpt,llama,moe] [--top 12] [--steps 12]

For torch_compare.py's language-model training cases (the same models, sizes, batch and AdamW):
heddle's `run --train --profile --json` (device 0's time per step by kernel, the steps after the
first) and PyTorch's step under torch.profiler (self CPU time per step by aten op, after 25
warm-up steps), both with one thread on the first core. Each side's matrix products (heddle's
einsum kernels, with the adds fused after them; PyTorch's mm, addmm, bmm and baddbmm) are summed
apart from the rest, then the slowest kernels of each are listed. The profiler adds its own
overhead to PyTorch's ops (the unprofiled median step is printed beside it); read the shares, not
the sum. Needs what torch_compare.py needs (`scripts/install-deps --bench`).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch_compare as tc  # noqa: E402  (bench/torch_compare.py)

PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def heddle_profile(binary, model, size, steps):
    """heddle's per-step kernel times (ms) and median step (ms) on one core."""
    env = tc.Heddle.env(1)
    cmd = ["taskset", "-c", "0", binary, "run"] + tc.zoo_args(model, size) + [
        "--mesh", "1", "--train", "--steps", str(steps), "--profile", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise SystemExit(f"torch_breakdown: {' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    j = json.loads(r.stdout)
    kernels = [(k["kernel"], k["seconds"] * 1e3) for k in j["profile"]]
    return kernels, j["median_step_s"] * 1e3


def torch_profile(model, size, seed):
    """PyTorch's per-step self CPU time (ms) by op, and its unprofiled median step (ms)."""
    tc.TorchThreads(pin=True, ncores=os.cpu_count() or 1).use(1)  # one thread, on core 0
    _, _, _, _, step = tc.torch_lm(model, size, seed)
    for _ in range(25):
        step()
    ts = []
    for _ in range(8):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    n = 5
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            step()
    ops = [(e.key, e.self_cpu_time_total / 1e3 / n) for e in prof.key_averages()]
    return ops, statistics.median(ts) * 1e3


def ms(v):
    return "" if v is None else f"{v:.2f}"


def split(rows, is_product):
    prod = sum(t for name, t in rows if is_product(name))
    return prod, sum(t for _, t in rows) - prod


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--heddle", required=True, help="the heddle binary")
    p.add_argument("--cases", default="gpt,llama,moe", help="of " + ",".join(tc.TRAIN))
    p.add_argument("--top", type=int, default=12, help="kernels listed per side (default 12)")
    p.add_argument("--steps", type=int, default=12, help="heddle's steps (default 12)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    for case in a.cases.split(","):
        if case not in tc.TRAIN:
            raise SystemExit(f"torch_breakdown: unknown case {case!r}; one of {', '.join(tc.TRAIN)}")
        model, size = tc.TRAIN[case]
        hk, hstep = heddle_profile(a.heddle, model, size, a.steps)
        tk, tstep = torch_profile(model, size, a.seed)
        hp, hr = split(hk, lambda k: k.startswith("einsum") or k.startswith("fused einsum"))
        tp, tr = split(tk, lambda k: k in PRODUCTS)
        print(f"## {case}: {model} {size}, one thread\n")
        print(f"heddle: median step {hstep:.1f} ms; by kernel {hp + hr:.1f} ms, matrix products "
              f"{hp:.1f} ms ({hp / (hp + hr):.0%}), the rest {hr:.1f} ms")
        print(f"PyTorch: median step {tstep:.1f} ms unprofiled; under the profiler {tp + tr:.1f} ms "
              f"of self time, matrix products {tp:.1f} ms ({tp / (tp + tr):.0%}), the rest "
              f"{tr:.1f} ms\n")
        print("| heddle kernel | ms/step | PyTorch op | ms/step |")
        print("|---|---|---|---|")
        hs = sorted(hk, key=lambda r: -r[1])[:a.top]
        ts = sorted(tk, key=lambda r: -r[1])[:a.top]
        for i in range(max(len(hs), len(ts))):
            h = hs[i] if i < len(hs) else ("", None)
            t = ts[i] if i < len(ts) else ("", None)
            print(f"| {h[0]} | {ms(h[1])} | {t[0]} | {ms(t[1])} |")
        print()


if __name__ == "__main__":
    main()
