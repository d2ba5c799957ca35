#!/usr/bin/env python3
"""Turns the GPU tier's outputs (ours.jsonl, cudnn.jsonl, tests.log) into a markdown report:
test counts, and per shape and dtype each algorithm's time, its ratio to cuDNN (NHWC and
NCHW) and the workspace it used. Usage: gpu-tier-report.py OUTDIR"""
import json
import re
import sys
from pathlib import Path


def load(p):
    rows = []
    if p.exists():
        for line in p.read_text().splitlines():
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def main():
    d = Path(sys.argv[1])
    print("# GPU tier report\n")
    m = d / "machine.txt"
    if m.exists():
        print("```\n" + m.read_text().strip() + "\n```\n")
    log = (d / "tests.log").read_text() if (d / "tests.log").exists() else ""
    passed = sum(int(x) for x in re.findall(r"test result: \w+\. (\d+) passed", log))
    failed = sum(int(x) for x in re.findall(r"(\d+) failed", log))
    print(f"GPU-tier tests: {passed} passed, {failed} failed (test binaries in tests.log)\n")
    hoc = (d / "hoc-test.log").read_text() if (d / "hoc-test.log").exists() else ""
    m2 = re.findall(r"== summary: (\d+) PASS, (\d+) FAIL", hoc)
    if m2:
        print(f"HIP-on-CUDA C test: {m2[-1][0]} PASS, {m2[-1][1]} FAIL\n")
    else:
        print("HIP-on-CUDA C test: no summary line (see hoc-test.log)\n")
    ours, cud = load(d / "ours.jsonl"), load(d / "cudnn.jsonl")
    key = lambda r: (r["shape"], r["hw"], r["dtype"])
    cudnn = {}
    for r in cud:
        cudnn.setdefault(key(r), {})[r["layout"]] = r["ms"]
    print("| shape | output | dtype | algorithm | ms | TFLOP/s | / cuDNN NHWC | / cuDNN NCHW | workspace MiB | chunks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in ours:
        c = cudnn.get(key(r), {})
        ratio = lambda lay: f"{r['ms'] / c[lay]:.2f}" if lay in c and c[lay] > 0 else "n/a"
        print(f"| {r['shape']} | {r['hw']}² | {r['dtype']} | {r['algorithm']} | {r['ms']:.3f} | {r['tflops']:.1f} | {ratio('NHWC')} | {ratio('NCHW')} | {r['workspace_bytes'] / 2**20:.1f} | {r['chunks']} |")
    print("\ncuDNN (PyTorch F.conv2d, cudnn.benchmark, TF32 off):\n")
    print("| shape | output | dtype | layout | ms | TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for r in cud:
        print(f"| {r['shape']} | {r['hw']}² | {r['dtype']} | {r['layout']} | {r['ms']:.3f} | {r['tflops']:.1f} |")


if __name__ == "__main__":
    main()
