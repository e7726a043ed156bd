#!/usr/bin/env python3
"""Writes a copy of an ONNX model whose large initializers point at a missing external file.

Usage: fuzz/strip_onnx_weights.py IN.onnx OUT.onnx [MIN_BYTES]

The importer declares such initializers as data-free parameters (shapes only), so the copy keeps
the whole graph but is a few kilobytes instead of a hundred: libFuzzer mutates and imports it ten
times faster. Initializers under MIN_BYTES (default 64) keep their data, because shape constants,
scalars (LayerNorm's epsilon, GELU's sqrt(2)) and Reshape targets must stay for the patterns to
fire. Uses protoc and onnx.proto from Debian's protobuf-compiler and libonnx-dev.
"""
import re
import subprocess
import sys

PROTO_DIR = "/usr/include"
PROTO = "onnx/onnx.proto"


def protoc(mode, data):
    return subprocess.run(["protoc", f"--{mode}=onnx.ModelProto", "-I", PROTO_DIR, PROTO],
                          input=data, capture_output=True, check=True).stdout


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    min_bytes = int(sys.argv[3]) if len(sys.argv) == 4 else 64
    text = protoc("decode", open(sys.argv[1], "rb").read()).decode("latin-1")
    out = []
    depth, init_depth = 0, None  # brace depth; the depth inside the current initializer block
    for line in text.splitlines():
        if init_depth is None and re.match(r"^\s*initializer \{$", line):
            init_depth = depth + 1
        m = re.match(r'^(\s*)raw_data: "(.*)"$', line)
        depth += line.count("{") - line.count("}") if not m else 0
        if init_depth is not None and depth < init_depth:
            init_depth = None
        # Only initializers: a Constant node's tensor must keep its data to import at all.
        # The escaped length over-counts (\ooo is 4 characters for 1 byte): fine for a threshold.
        if m and init_depth is not None and len(m.group(2)) >= min_bytes:
            ind = m.group(1)
            out.append(f"{ind}data_location: EXTERNAL")
            out.append(f'{ind}external_data {{ key: "location" value: "weights.bin" }}')
        else:
            out.append(line)
    open(sys.argv[2], "wb").write(protoc("encode", ("\n".join(out) + "\n").encode("latin-1")))


if __name__ == "__main__":
    main()
