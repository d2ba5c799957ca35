#!/usr/bin/env python3
"""Times ncnn (the engine behind realcugan-ncnn-vulkan) on the CPU for benches/cpu.rs.

Runs one Real-CUGAN model on a padded input of the given size, as realcugan-ncnn-vulkan's
process_cpu feeds it (blob in0 -> out0), with float32 storage and arithmetic and the given
thread count, and prints one JSON line: {"runs_s": [...], "median_s": ..., "ncnn": version}.
The first run is a warm-up and not reported. Needs the `ncnn` PyPI package (and numpy).

usage: ncnn_cpu.py PARAM BIN --size N [--threads 2] [--runs 3]
"""

import argparse
import json
import statistics
import time

import ncnn
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("param")
    ap.add_argument("bin")
    ap.add_argument("--size", type=int, required=True, help="net input side (image side + 2 * prepadding)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_packed = False
    net.opt.use_fp16_storage = False
    net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    net.opt.num_threads = args.threads
    if net.load_param(args.param) != 0 or net.load_model(args.bin) != 0:
        raise SystemExit(f"ncnn failed to load {args.param} / {args.bin}")

    rng = np.random.default_rng(0)
    arr = np.ascontiguousarray(rng.random((3, args.size, args.size), dtype=np.float32))
    # An ncnn-owned copy: the extractor may write into its input blob.
    mat = ncnn.Mat(arr).clone()

    def once() -> float:
        ex = net.create_extractor()
        ex.input("in0", mat)
        t = time.perf_counter()
        ret, out = ex.extract("out0")
        elapsed = time.perf_counter() - t
        if ret != 0:
            raise SystemExit(f"ncnn extract failed ({ret})")
        np.array(out)  # make sure the result is materialised
        return elapsed

    once()  # warm-up: allocator pools, packed weights, winograd transforms
    runs = [once() for _ in range(args.runs)]
    print(json.dumps({"runs_s": runs, "median_s": statistics.median(runs), "ncnn": ncnn.__version__}))


if __name__ == "__main__":
    main()
