#!/usr/bin/env python3
"""Writes the binary files of the bad-input catalogue (.onnx, .npy) with the standard library only:
a tiny hand-encoded protobuf writer for ONNX, and numpy's .npy header format. Run from this
directory; the outputs are committed, so tests need no Python."""
import struct


def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    """A protobuf field: int -> varint, bytes/str -> length-delimited."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def value_info(name, dims):
    shape = b"".join(field(1, field(1, d) if isinstance(d, int) else field(2, d)) for d in dims)
    tensor = field(1, 1) + field(2, shape)  # elem_type FLOAT, shape
    return field(1, name) + field(2, field(1, tensor))


def node(op, inputs, outputs, name, attrs=b""):
    return (b"".join(field(1, i) for i in inputs) + b"".join(field(2, o) for o in outputs) +
            field(3, name) + field(4, op) + attrs)


def initializer(name, dims, raw=None, external=None, dtype=1):
    t = b"".join(field(1, d) for d in dims) + field(2, dtype) + field(8, name)
    if raw is not None:
        t += field(9, raw)
    if external is not None:
        t += field(13, field(1, "location") + field(2, external)) + field(14, 1)
    return t


def model(nodes, inits, inputs, outputs, opset=17):
    g = b"".join(field(1, n) for n in nodes) + field(2, "g")
    g += b"".join(field(5, t) for t in inits)
    g += b"".join(field(11, v) for v in inputs) + b"".join(field(12, v) for v in outputs)
    return field(1, 8) + field(8, field(1, "") + field(2, opset)) + field(7, g)


def floats(n, v=0.5):
    return struct.pack("<%df" % n, *([v] * n))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


x = value_info("x", [2, 4])
y = value_info("y", [2, 3])
write("missing_weights.onnx",
      model([node("MatMul", ["x", "w"], ["y"], "mm")], [initializer("w", [4, 3], external="no_such_weights.bin")], [x], [y]))
write("unknown_op.onnx", model([node("Frobnicate", ["x"], ["y"], "frob")], [], [x], [y]))
write("shape_mismatch.onnx",
      model([node("MatMul", ["x", "w"], ["y"], "mm")], [initializer("w", [5, 3], raw=floats(15))], [x], [y]))
write("raw_data_size.onnx",
      model([node("MatMul", ["x", "w"], ["y"], "mm")], [initializer("w", [4, 3], raw=floats(5))], [x], [y]))
write("escaping_external.onnx",
      model([node("MatMul", ["x", "w"], ["y"], "mm")], [initializer("w", [4, 3], external="../../../etc/passwd")], [x], [y]))
write("old_opset.onnx", model([node("Relu", ["x"], ["y"], "r")], [], [x], [value_info("y", [2, 4])], opset=7))
write("dynamic_dim.onnx", model([node("Relu", ["x"], ["y"], "r")], [], [value_info("x", ["batch", 4])], [value_info("y", ["batch", 4])]))
# BatchNormalization whose scale is int64 (dtype 7): the folding read it as floats.
write("batchnorm_int.onnx", model(
    [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], "bn")],
    [initializer("s", [4], struct.pack("<4q", 1, 2, 3, 4), dtype=7),
     initializer("b", [4], floats(4)), initializer("m", [4], floats(4)),
     initializer("v", [4], floats(4))],
    [value_info("x", [2, 4])], [value_info("y", [2, 4])]))
# A Reshape target computed from floats holding -inf (converted to int64, which was undefined).
write("reshape_inf.onnx", model(
    [node("Reshape", ["x", "s"], ["y"], "r")],
    [initializer("s", [2], struct.pack("<2f", float("-inf"), 4.0))],
    [value_info("x", [2, 4])], [value_info("y", [2, 4])]))
write("garbage.onnx", bytes(range(7, 250, 3)) * 3)
write("empty.onnx", b"")
with open("../data/mlp.onnx", "rb") as f:
    write("truncated.onnx", f.read()[:4000])


def npy(path, descr, shape, data, fortran=False, major=1):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    pre = 10 if major == 1 else 12
    h += " " * (64 - (pre + len(h) + 1) % 64) + "\n"
    size = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    write(path, b"\x93NUMPY" + bytes([major, 0]) + size + h.encode() + data)


v = [0.5] * 8
v[5] = float("nan")
npy("nan.npy", "<f4", "(2, 4)", struct.pack("<8f", *v))
v = [0.5] * 8
v[6], v[7] = float("-inf"), float("inf")
npy("inf.npy", "<f4", "(2, 4)", struct.pack("<8f", *v))
npy("good.npy", "<f4", "(2, 4)", floats(8))
npy("wrong_shape.npy", "<f4", "(2, 3)", floats(6))
npy("wrong_dtype.npy", "<i8", "(2, 4)", struct.pack("<8q", *range(8)))
npy("short_data.npy", "<f4", "(2, 4)", floats(5))
npy("fortran.npy", "<f4", "(2, 4)", floats(8), fortran=True)
npy("float16.npy", "<f2", "(2, 4)", b"\0" * 16)
npy("huge_shape.npy", "<f4", "(1000000000000, 1000000000000)", floats(4))
npy("bad_shape.npy", "<f4", "(2 4)", floats(8))
write("not_npy.npy", b"hello, world\n")
with open("good.npy", "rb") as f:
    write("truncated.npy", f.read()[:40])
