#!/usr/bin/python3
"""Parses a safetensors file with json + struct only and checks it against
the expected tensors given as JSON on argv[2]:
{"name": {"dtype": "F32", "shape": [..], "first": x, "last": y}, ...}.
Exit 0 when the file is valid and holds those values."""
import json
import struct
import sys

path, want = sys.argv[1], json.loads(sys.argv[2])
with open(path, "rb") as f:
    data = f.read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
body = data[8 + n:]
meta = header.pop("__metadata__", {})
assert meta.get("format") == "pt", meta
end = 0
for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    b, e = info["data_offsets"]
    assert b == end, f"{name}: hole or overlap at {b} (expected {end})"
    end = e
    count = 1
    for d in info["shape"]:
        count *= d
    assert e - b == count * 4, f"{name}: {e - b} bytes for shape {info['shape']}"
assert end == len(body), f"data ends at {end}, file body has {len(body)}"
for name, w in want.items():
    info = header[name]
    assert info["dtype"] == w["dtype"] and info["shape"] == w["shape"], (name, info)
    b, e = info["data_offsets"]
    values = struct.unpack(f"<{(e - b) // 4}f", body[b:e])
    assert abs(values[0] - w["first"]) < 1e-6 and abs(values[-1] - w["last"]) < 1e-6, (name, values[0], values[-1])
print("OK", len(header), "tensors")
