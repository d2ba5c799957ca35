#!/usr/bin/env python3
"""Where the GPU waits: a report of a hip-on-cuda timeline trace (HOC_TRACE=FILE).

The trace (rocm-backend/testing/hip-on-cuda/src/hoc_internal.h) has one line per
operation put on a stream (kernel, copy, memset, rocBLAS GEMM, MIOpen conv) with CUDA
event times around it, and one per blocking host call (sync, event_sync, malloc, free)
with its host time. This script splits the trace into segments (a new segment starts at
each run of host-to-device copies of at least --split-bytes: an input image's upload, or
the weights'), and prints for each segment:
  - the host span, the GPU span, the GPU's busy time (the operations' event intervals)
    and its idle time (the rest of the span);
  - GPU time by operation name;
  - the host's blocking calls (count and time);
  - the largest GPU-idle gaps, each with the operations around it and the host calls
    made while the GPU waited.

Usage: hoc-trace-report.py TRACE.csv [--split-bytes N] [--gaps K] [--segments last|all]
"""
import argparse
import csv
import sys
from collections import defaultdict

HOST_ONLY = {"sync", "event_sync", "malloc", "free"}


def load(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("bytes",):
                r[k] = int(r[k])
            for k in ("host_begin_us", "host_end_us", "gpu_begin_us", "gpu_end_us"):
                r[k] = float(r[k])
            r["seq"] = int(r["seq"])
            rows.append(r)
    return rows


def segments(rows, split_bytes):
    segs, cur, prev_big_h2d = [], [], False
    for r in rows:
        big_h2d = r["kind"] == "memcpy_h2d" and r["bytes"] >= split_bytes
        if big_h2d and not prev_big_h2d and cur:
            segs.append(cur)
            cur = []
        if r["kind"] not in HOST_ONLY:
            prev_big_h2d = big_h2d
        cur.append(r)
    if cur:
        segs.append(cur)
    return segs


def label(r):
    return r["name"] or r["kind"]


def report(seg, index, gaps_shown):
    ops = [r for r in seg if r["kind"] not in HOST_ONLY and r["gpu_begin_us"] >= 0]
    host = [r for r in seg if r["kind"] in HOST_ONLY]
    h0 = min(r["host_begin_us"] for r in seg)
    h1 = max(r["host_end_us"] for r in seg)
    print(f"\n## segment {index}: records {seg[0]['seq']}..{seg[-1]['seq']}, "
          f"host {h0 / 1e3:.3f}..{h1 / 1e3:.3f} ms ({(h1 - h0) / 1e3:.2f} ms)")
    if not ops:
        print("no timed GPU operations")
        return
    g0, g1 = ops[0]["gpu_begin_us"], max(r["gpu_end_us"] for r in ops)
    busy = sum(max(0.0, r["gpu_end_us"] - r["gpu_begin_us"]) for r in ops)
    span = g1 - g0
    print(f"GPU span {span / 1e3:.2f} ms, busy {busy / 1e3:.2f} ms, idle {(span - busy) / 1e3:.2f} ms "
          f"({100 * (span - busy) / span if span else 0:.0f}%), {len(ops)} operations")

    by_name = defaultdict(lambda: [0, 0.0])
    for r in ops:
        e = by_name[label(r)]
        e[0] += 1
        e[1] += r["gpu_end_us"] - r["gpu_begin_us"]
    print("\n| GPU time by operation | calls | ms |\n| --- | ---: | ---: |")
    for name, (n, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"| {name[:70]} | {n} | {us / 1e3:.2f} |")

    by_kind = defaultdict(lambda: [0, 0.0])
    for r in host:
        e = by_kind[r["kind"]]
        e[0] += 1
        e[1] += r["host_end_us"] - r["host_begin_us"]
    if by_kind:
        print("\n| host blocking call | calls | host ms |\n| --- | ---: | ---: |")
        for kind, (n, us) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
            print(f"| {kind} | {n} | {us / 1e3:.2f} |")

    # Gaps: the GPU idle between one operation's end and the next one's start, with the
    # host records issued in between (by sequence number).
    gaps = []
    for prev, nxt in zip(ops, ops[1:]):
        g = nxt["gpu_begin_us"] - prev["gpu_end_us"]
        if g > 0:
            between = [r for r in seg if prev["seq"] < r["seq"] < nxt["seq"]]
            gaps.append((g, prev, nxt, between))
    total_gap = sum(g for g, *_ in gaps)
    big = [x for x in gaps if x[0] >= 20.0]
    print(f"\nGPU-idle gaps: {len(gaps)} totalling {total_gap / 1e3:.2f} ms; "
          f"{len(big)} of at least 20 us totalling {sum(g for g, *_ in big) / 1e3:.2f} ms")
    print("\n| idle us | after | before | host calls meanwhile | host us from issue of 'after' to issue of 'before' |\n"
          "| ---: | --- | --- | --- | ---: |")
    for g, prev, nxt, between in sorted(gaps, key=lambda x: -x[0])[:gaps_shown]:
        calls = defaultdict(lambda: [0, 0.0])
        for r in between:
            c = calls[r["kind"]]
            c[0] += 1
            c[1] += r["host_end_us"] - r["host_begin_us"]
        meanwhile = ", ".join(f"{k} x{n} ({us:.0f} us)" for k, (n, us) in calls.items()) or "-"
        print(f"| {g:.1f} | {label(prev)[:40]} | {label(nxt)[:40]} | {meanwhile} | "
              f"{nxt['host_begin_us'] - prev['host_end_us']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--split-bytes", type=int, default=4 << 20)
    ap.add_argument("--gaps", type=int, default=15)
    ap.add_argument("--segments", choices=["last", "all"], default="all")
    a = ap.parse_args()
    rows = load(a.trace)
    if not rows:
        sys.exit(f"{a.trace}: no records")
    segs = segments(rows, a.split_bytes)
    print(f"# {a.trace}: {len(rows)} records, {len(segs)} segment(s)")
    chosen = list(enumerate(segs))
    if a.segments == "last":
        chosen = chosen[-1:]
    for i, s in chosen:
        report(s, i, a.gaps)


if __name__ == "__main__":
    main()
