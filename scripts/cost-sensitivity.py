#!/usr/bin/env python3
"""Megatron-LM Table 1 error of `heddle simulate` over a grid of the two global GEMM constants
(docs/validation.md). Writes the a100 preset with the grid's values into a cluster file and runs
every row. Usage: scripts/cost-sensitivity.py [BUILD_DIR]"""
import json, os, subprocess, sys, tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
heddle = os.path.join(build, "tools", "heddle", "heddle")
# model, layers, t, p, d, batch, published TFLOP/s per GPU
ROWS = [("megatron-1.7b", 24, 1, 1, 32, 512, 137), ("megatron-3.6b", 30, 2, 1, 32, 512, 138),
        ("megatron-7.5b", 36, 4, 1, 32, 512, 142), ("megatron-18.4b", 40, 8, 1, 32, 1024, 135),
        ("megatron-39.1b", 48, 8, 2, 32, 1536, 138), ("megatron-76.1b", 60, 8, 4, 32, 1792, 140),
        ("megatron-145.6b", 80, 8, 8, 24, 2304, 148), ("megatron-310.1b", 96, 8, 16, 15, 2160, 155),
        ("megatron-529.6b", 105, 8, 35, 9, 2520, 163), ("megatron-1t", 128, 8, 64, 6, 3072, 163)]


def errors(eff, knee):
    errs = []
    for model, layers, t, p, d, batch, published in ROWS:
        per = layers // p
        sched = "1f1b" if p == 1 else ("interleaved:2" if per % 2 == 0 else "interleaved:3")
        cluster = {"name": "a100", "count": t * p * d, "devices_per_node": 8,
                   "device": {"name": "a100", "peak_flops": 312e12, "vector_flops": 19.5e12,
                              "memory_bytes": 80e9, "memory_bandwidth": 2.039e12,
                              "gemm_efficiency": eff, "gemm_knee": knee},
                   "intra_node": {"name": "nvlink3", "bandwidth": 230e9, "latency": 1e-5},
                   "inter_node": {"name": "ib-hdr", "bandwidth": 25e9, "latency": 1e-5}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(cluster, f)
        out = subprocess.run([heddle, "simulate", model, "--cluster", f.name, "--strategy",
                              f"dp={d},tp={t},pp={p},mb=1,recompute=full,schedule={sched}",
                              "--batch", str(batch), "--train", "--json"],
                             capture_output=True, text=True)
        os.unlink(f.name)
        errs.append(abs(json.loads(out.stdout)["published_tflops_per_device"] - published) / published)
    return sum(errs) / len(errs), max(errs)


knees = [64, 128, 192]
print("| gemm_efficiency \\ knee | " + " | ".join(map(str, knees)) + " |")
print("|---|" + "---|" * len(knees))
for eff in [0.70, 0.75, 0.80]:
    cells = ["{:.1f}% / {:.1f}%".format(100 * m, 100 * w) for m, w in (errors(eff, k) for k in knees)]
    print(f"| {eff:.2f} | " + " | ".join(cells) + " |")
