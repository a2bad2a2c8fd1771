"""Checks a `strata trace` file (tests/integration/multihost/trace_test.sh).

check_trace.py FILE [TOLERANCE_US]: validates it against the JSON trace event format that
Perfetto and chrome://tracing load (an object with a `traceEvents` array;
every event a `ph` of M, X, i, s, t or f with its required fields: integer
`pid`, numeric `ts` >= 0 and `dur` >= 0 for X, an `id` for flow events,
`s` scope g/p/t for instants), then prints one line
`RESULT ranks=N sections=N pairs=N overlapping=N near=N bytes=N` where
pairs are the all_reduce spans of one (group, seq) on two ranks,
overlapping those whose spans intersect in time and near those that do
once widened by TOLERANCE_US (default 0: the alignment's error bound).
Exits 1 naming the first bad event.
"""
import json
import os
import sys


def fail(msg):
    print("check_trace: " + msg)
    sys.exit(1)


def main():
    path = sys.argv[1]
    tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents array")
    spans = {}
    ranks = set()
    sections = 0
    for i, e in enumerate(doc["traceEvents"]):
        where = "event %d (%s)" % (i, json.dumps(e)[:120])
        ph = e.get("ph")
        if ph not in ("M", "X", "i", "s", "t", "f"):
            fail(where + ": bad ph")
        if not isinstance(e.get("pid"), int):
            fail(where + ": pid is not an integer")
        if not isinstance(e.get("name"), str):
            fail(where + ": name is not a string")
        if ph == "M":
            if not isinstance(e.get("args"), dict):
                fail(where + ": metadata without args")
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            fail(where + ": ts missing or negative")
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                fail(where + ": dur missing or negative")
            ranks.add(e["pid"])
            if e.get("cat") == "step":
                sections += 1
            if e.get("cat") == "collective" and e["name"] == "all_reduce":
                key = (e["args"]["group"], e["args"]["seq"])
                spans.setdefault(key, {})[e["pid"]] = (ts, ts + dur)
        elif ph in ("s", "t", "f"):
            if "id" not in e:
                fail(where + ": flow event without id")
        elif e.get("s") not in ("g", "p", "t"):
            fail(where + ": instant without scope")
    pairs = overlapping = near = 0
    for by_rank in spans.values():
        if len(by_rank) < 2:
            continue
        (a0, a1), (b0, b1) = list(by_rank.values())[:2]
        pairs += 1
        if a0 <= b1 and b0 <= a1:
            overlapping += 1
        if a0 <= b1 + tol and b0 <= a1 + tol:
            near += 1
    print("RESULT ranks=%d sections=%d pairs=%d overlapping=%d near=%d bytes=%d"
          % (len(ranks), sections, pairs, overlapping, near,
             os.path.getsize(path)))


if __name__ == "__main__":
    main()
