#!/usr/bin/python3
"""Checks heddle against torch on torch.nn's Transformer, TransformerEncoder/Decoder, LSTM, GRU, RNN.

Usage: /usr/bin/python3 tools/torch_nn_check.py [HEDDLE]   (run from a scratch directory)

Exports each module (random weights, opset 17, fixed shapes) and runs `heddle run M.onnx --mesh 2
--strategy dp=2 --input ... --output ... --check`, printing max |heddle - torch| / max |torch|.
Needs Debian's python3-torch and python3-onnx; CI does not run it.
"""
import os
import subprocess
import sys

import numpy as np
import torch

torch.manual_seed(0)
H = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tools", "heddle", "heddle")
def run(name, m, xs):
    m.eval()
    with torch.no_grad(): y = m(*xs)
    names = [f"x{i}" for i in range(len(xs))]
    torch.onnx.export(m, tuple(xs), name + ".onnx", opset_version=17, input_names=names, output_names=["y"])
    cmd = [H, "run", name + ".onnx", "--mesh", "2", "--strategy", "dp=2", "--output", name + ".h.npy", "--check"]
    for i, x in enumerate(xs):
        np.save(f"{name}.x{i}.npy", x.numpy()); cmd += ["--input", f"{name}.x{i}.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode: print(name, "FAILS", r.stderr.strip().splitlines()[-1][:300]); return
    got = np.load(name + ".h.npy"); want = y.numpy()
    print(name, "rel err %.1e" % (np.abs(got - want).max() / np.abs(want).max()))
d = 32
run("transformer", torch.nn.Transformer(d, 4, 2, 2, 64, dropout=0.0, batch_first=True), [torch.randn(2, 7, d), torch.randn(2, 5, d)])
run("encoder", torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False), [torch.randn(2, 7, d)])
run("decoder", torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(d, 4, 64, dropout=0.0, batch_first=True), 2), [torch.randn(2, 5, d), torch.randn(2, 7, d)])
class L(torch.nn.Module):
    def __init__(s, cell): super().__init__(); s.c = cell
    def forward(s, x): return s.c(x)[0]
run("lstm", L(torch.nn.LSTM(d, 16, 2, bidirectional=True)), [torch.randn(8, 2, d)])
run("gru", L(torch.nn.GRU(d, 16, 1, batch_first=True)), [torch.randn(2, 9, d)])
run("rnn", L(torch.nn.RNN(d, 16, 2)), [torch.randn(8, 2, d)])
