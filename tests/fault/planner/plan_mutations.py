#!/usr/bin/env python3
"""Deterministic mutation run of the real `strata plan` over model and
cluster files and its flags: the CI stand-in for tests/fuzz/config_fuzz
(CI has no libFuzzer run).

Every numeric field of a small model and cluster file, and every numeric
flag, gets boundary values (0, -1, 2^31, 2^63, 1e308, NaN, strings, lists,
maps, ...); then structural mutations: each line dropped, each key
duplicated, deep flow and block nesting, alias bombs, non-UTF-8 bytes,
binary garbage, empty files. Each run must exit 0, or 2 with a message on
stderr naming the problem; never a signal, never another code, and within
MAX_SECONDS.

  plan_mutations.py STRATA_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

MAX_SECONDS = 2.0

MODEL = {
    "name": "m",
    "num_layers": "4",
    "hidden_size": "256",
    "num_attention_heads": "4",
    "num_query_groups": "2",
    "ffn_hidden_size": "1024",
    "vocab_size": "1000",
    "seq_length": "512",
}
CLUSTER_TEXT = """name: c
gpu:
  name: g
  peak_bf16_tflops: 100
  memory_gib: 16
  gemm_efficiency: 0.7
  hbm_gbps: 1000
gpus_per_node: 4
intra_node_gbps: 100
nics:
  - count: 1
    gbps: 100
network:
  nodes_per_leaf: 2
  leaves_per_pod: 2
  oversubscription: 1
  pod_oversubscription: 1
num_nodes: 4
"""
FLAGS = {"--gpus": "8", "--global-batch": "16", "--seq": "512", "--top": "2",
         "--time-budget": "0.5"}
VALUES = ["0", "-1", "2147483648", "9223372036854775808",
          "-9223372036854775808", "1e308", "1e-308", ".nan", ".inf", "0x10",
          "1.5", "abc", "[1]", "{a: 1}", "~", "131072", "16777216"]
CLUSTER_VALUES = ["0", "-1", "2147483648", "9223372036854775808", "1e308",
                  ".nan", "abc", "[1]", "131073"]
FLAG_VALUES = ["0", "-1", "2147483648", "4294967296", "9223372036854775808",
               "1e308", "nan", "inf", "abc", "", "1.5", "131072", "131073",
               "16777217", "3601"]
FIX_VALUES = ["tp=0", "pp=-1", "dp=2147483648", "cp=3", "vpp=0", "mbs=0",
              "zero=4", "distopt=2", "sp=-1", "recompute=bogus", "tp",
              "tp=1,tp=2", "x=1", "mbs=16777217", "vpp=1000000", ","]


def model_text(fields):
    return "".join(f"{k}: {v}\n" for k, v in fields.items())


def cases():
    """Yields (name, model_text, cluster_text, extra_flags)."""
    base_model = model_text(MODEL)
    yield "base", base_model, CLUSTER_TEXT, {}
    for key in MODEL:
        if key == "name":
            continue
        for v in VALUES:
            yield f"model {key}={v}", model_text({**MODEL, key: v}), \
                CLUSTER_TEXT, {}
    cluster_lines = CLUSTER_TEXT.splitlines(keepends=True)
    for i, line in enumerate(cluster_lines):
        if ":" not in line or line.rstrip().endswith(":") or "name" in line:
            continue
        head = line[:line.index(":") + 1]
        for v in CLUSTER_VALUES:
            lines = list(cluster_lines)
            lines[i] = f"{head} {v}\n"
            yield f"cluster {head.strip()}{v}", base_model, "".join(lines), {}
    for flag in FLAGS:
        for v in FLAG_VALUES:
            yield f"flag {flag} {v}", base_model, CLUSTER_TEXT, {flag: v}
    for v in FIX_VALUES:
        yield f"flag --fix {v}", base_model, CLUSTER_TEXT, {"--fix": v}
    # Structure: missing fields, duplicates, nesting, aliases, bytes.
    model_lines = base_model.splitlines(keepends=True)
    for i in range(len(model_lines)):
        yield f"model without line {i + 1}", \
            "".join(model_lines[:i] + model_lines[i + 1:]), CLUSTER_TEXT, {}
        yield f"model with line {i + 1} twice", \
            "".join(model_lines + [model_lines[i]]), CLUSTER_TEXT, {}
    for i in range(len(cluster_lines)):
        yield f"cluster without line {i + 1}", base_model, \
            "".join(cluster_lines[:i] + cluster_lines[i + 1:]), {}
    for depth in (63, 65, 1000, 100000):
        yield f"flow nesting {depth}", \
            base_model + "source: " + "[" * depth + "]" * depth + "\n", \
            CLUSTER_TEXT, {}
    for depth in (60, 70, 500):
        yield f"block nesting {depth}", base_model + "source:\n" + "".join(
            " " * (i + 1) + "a:\n" for i in range(depth)), CLUSTER_TEXT, {}
    nics = "[" + ",".join(["{count: 1, gbps: 1}"] * 1000) + "]"
    yield "alias bomb", base_model, CLUSTER_TEXT.replace(
        "nics:\n  - count: 1\n    gbps: 100\n", f"nics: &n {nics}\n") + \
        "overrides: [" + ",".join(["{first_node: 0, num_nodes: 1, nics: *n}"]
                                  * 1000) + "]\n", {}
    yield "huge scalar", base_model + "source: " + "x" * (2 << 20) + "\n", \
        CLUSTER_TEXT, {}
    yield "non-utf8", base_model + "source: \xff\xfe\n", CLUSTER_TEXT, {}
    yield "nul byte", base_model + "source: a\0b\n", CLUSTER_TEXT, {}
    yield "garbage", "".join(chr(i % 256) for i in range(0, 5000, 7)), \
        CLUSTER_TEXT, {}
    yield "empty model", "", CLUSTER_TEXT, {}
    yield "empty cluster", base_model, "", {}
    yield "json model", '{"name": "j", "num_layers": 1e400}', CLUSTER_TEXT, {}
    yield "multi document", base_model + "---\nnum_layers: 0\n", \
        CLUSTER_TEXT, {}
    yield "tab indent", base_model + "source:\n\t- a\n", CLUSTER_TEXT, {}
    yield "anchor loop", base_model + "source: &a *a\n", CLUSTER_TEXT, {}
    yield "merge key", base_model + "<<: {num_layers: 2}\n", CLUSTER_TEXT, {}


def run(strata, tmp, index, case):
    name, model, cluster, extra = case
    mpath = os.path.join(tmp, f"m{index}.yaml")
    cpath = os.path.join(tmp, f"c{index}.yaml")
    with open(mpath, "wb") as f:
        f.write(model.encode("utf-8", "surrogateescape")
                if "\xff" not in model else model.encode("latin-1"))
    with open(cpath, "wb") as f:
        f.write(cluster.encode("utf-8"))
    flags = {**FLAGS, **extra}
    argv = [strata, "plan", "--model", mpath, "--cluster", cpath]
    for k, v in flags.items():
        argv += [k, v]
    start = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"{name}: still running after 30 s"
    took = time.monotonic() - start
    err = p.stderr.decode("utf-8", "replace").strip()
    if p.returncode < 0:
        return f"{name}: killed by signal {-p.returncode}: {err[-300:]}"
    if p.returncode not in (0, 2):
        return f"{name}: exit {p.returncode}: {err[-300:]}"
    if p.returncode == 2 and not err:
        return f"{name}: exit 2 without a message"
    if took > MAX_SECONDS:
        return f"{name}: took {took:.2f} s (limit {MAX_SECONDS} s)"
    return None


def main():
    strata = sys.argv[1]
    all_cases = list(cases())
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda ic: run(strata, tmp, *ic),
                                enumerate(all_cases)))
    failures = [r for r in results if r]
    for f in failures:
        print("FAIL", f)
    print(f"plan_mutations: {len(all_cases)} runs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
