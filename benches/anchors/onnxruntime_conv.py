#!/usr/bin/env python3
"""onnxruntime CPU convolution anchor (MLAS), for side-by-side ratios.

Builds one single-Conv ONNX model per shape with onnx.helper (random weights and
bias as initializers, NCHW), runs it with onnxruntime's CPU execution provider
(intra_op_num_threads=2 by default, graph optimisation ORT_ENABLE_ALL, which on
x86 includes the NCHWc layout transform) and prints, per shape, ONE JSON line on
stdout:

  {"anchor": "onnxruntime", "name": ..., "n": 1, "c": 512, "k": 512, "h": 256, "w": 256,
   "r": 3, "s": 3, "pad": 1, "stride": 1, "p": 256, "q": 256, "dtype": "f32",
   "threads": 2, "runs": 5, "warmup": 1, "median_s": ..., "min_s": ..., "gflops": ...,
   "flop": ..., "peak_rss_delta_bytes": ..., "cpu_utilisation": ..., "executed_ops": [...], ...}

  flop   = 2*N*K*C*R*S*P*Q   (bias add and layout reorders are not counted)
  gflops = flop / median_s / 1e9
  cpu_utilisation = process CPU time / (wall time x threads) over the timed runs; well
                    below 1 means the cores were shared with other work (or threads idled)

Peak RSS delta: by default every shape runs in a fresh child process (so peaks of
earlier shapes do not hide later ones); the baseline is VmRSS after onnxruntime is
imported and the input/weight arrays exist, the peak is VmHWM after the timed runs.
The delta is what onnxruntime itself adds: the session with its copy/prepack of the
weights, layout reorders, workspace and the output.

A shape that fails prints a JSON line with "error" instead of timings (e.g. --fp16:
onnxruntime's CPU EP has no float16 Conv kernel on x86; that is reported, not faked).
Human-readable progress goes to stderr; stdout carries only the JSON lines.

Shapes:
  default              SD/FLUX VAE decoder convs at the --sizes output sizes (256,512):
                       3x3 512->512, 512->256, 256->256, 256->128, 128->128 (pad 1),
                       1x1 shortcuts 512->256, 256->128 (pad 0), conv_out 3x3 128->3
  --shape SPEC         repeatable: CIN:COUT:H[xW]:K[:PAD[:STRIDE[:N]]]
                       e.g. 512:512:256:3  or  256:128:64x96:1:0
  --shapes-json FILE   a JSON list of {"c","k","h","w","r"[,"s","pad","stride","n","name"]},
                       or examples-sd/fixtures/full_config_shapes.json (its "models"
                       layers; identical shapes are run once)

Examples:
  python benches/anchors/onnxruntime_conv.py --sizes 256
  python benches/anchors/onnxruntime_conv.py --shape 512:512:256:3 --runs 3 --threads 2
  python benches/anchors/onnxruntime_conv.py --fp16 --sizes 256
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

DEFAULT_CONVS = [
    # (name, C_in, C_out, kernel)
    ("3x3_512_512", 512, 512, 3),
    ("3x3_512_256", 512, 256, 3),
    ("3x3_256_256", 256, 256, 3),
    ("3x3_256_128", 256, 128, 3),
    ("3x3_128_128", 128, 128, 3),
    ("1x1_512_256", 512, 256, 1),
    ("1x1_256_128", 256, 128, 1),
    ("conv_out_128_3", 128, 3, 3),
]


def proc_status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def out_size(x, r, pad, stride):
    return (x + 2 * pad - r) // stride + 1


def normalise(sh: dict) -> dict:
    s = dict(sh)
    s.setdefault("n", 1)
    s.setdefault("w", s["h"])
    s.setdefault("s", s["r"])
    s.setdefault("pad", s["r"] // 2)
    s.setdefault("stride", 1)
    s.setdefault("name", f"{s['r']}x{s['s']}_{s['c']}_{s['k']}_{s['h']}x{s['w']}")
    s["p"] = out_size(s["h"], s["r"], s["pad"], s["stride"])
    s["q"] = out_size(s["w"], s["s"], s["pad"], s["stride"])
    if s["p"] < 1 or s["q"] < 1:
        raise SystemExit(f"shape {s['name']}: output size {s['p']}x{s['q']} < 1")
    return s


def parse_spec(spec: str) -> dict:
    parts = spec.split(":")
    if not 4 <= len(parts) <= 7:
        raise SystemExit(f"--shape {spec!r}: expected CIN:COUT:H[xW]:K[:PAD[:STRIDE[:N]]]")
    try:
        c, k = int(parts[0]), int(parts[1])
        hw = parts[2].lower().split("x")
        h = int(hw[0])
        w = int(hw[1]) if len(hw) > 1 else h
        r = int(parts[3])
        sh = {"c": c, "k": k, "h": h, "w": w, "r": r}
        if len(parts) > 4:
            sh["pad"] = int(parts[4])
        if len(parts) > 5:
            sh["stride"] = int(parts[5])
        if len(parts) > 6:
            sh["n"] = int(parts[6])
    except ValueError:
        raise SystemExit(f"--shape {spec!r}: not integers")
    return sh


def load_shapes_json(path: str) -> list[dict]:
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict) and "models" in data:
        seen = set()
        out = []
        for model, m in data["models"].items():
            for l in m["layers"]:
                key = (l["C_in"], l["C_out"], l["H_in"], l["W_in"], *l["kernel"], l["padding"][0], l["stride"][0])
                if key in seen:
                    continue
                seen.add(key)
                out.append({
                    "name": f"{model}:{l['layer']}",
                    "c": l["C_in"], "k": l["C_out"], "h": l["H_in"], "w": l["W_in"],
                    "r": l["kernel"][0], "s": l["kernel"][1],
                    "pad": l["padding"][0], "stride": l["stride"][0],
                })
        return out
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a JSON list of shapes or full_config_shapes.json")
    return data


def default_shapes(sizes: list[int]) -> list[dict]:
    out = []
    for size in sizes:
        for name, c, k, r in DEFAULT_CONVS:
            out.append({"name": f"{name}@{size}", "c": c, "k": k, "h": size, "w": size, "r": r,
                        "pad": 1 if r == 3 else 0})
    return out


def build_model(s: dict, fp16: bool, seed: int):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    np_dtype = np.float16 if fp16 else np.float32
    onnx_dtype = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    rng = np.random.default_rng(seed)
    fan_in = s["c"] * s["r"] * s["s"]
    wt = (rng.standard_normal((s["k"], s["c"], s["r"], s["s"])) / np.sqrt(fan_in)).astype(np_dtype)
    bias = (0.1 * rng.standard_normal((s["k"],))).astype(np_dtype)
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"],
        kernel_shape=[s["r"], s["s"]],
        pads=[s["pad"], s["pad"], s["pad"], s["pad"]],
        strides=[s["stride"], s["stride"]],
        dilations=[1, 1],
        group=1,
    )
    graph = helper.make_graph(
        [node], "single_conv",
        [helper.make_tensor_value_info("x", onnx_dtype, [s["n"], s["c"], s["h"], s["w"]])],
        [helper.make_tensor_value_info("y", onnx_dtype, [s["n"], s["k"], s["p"], s["q"]])],
        initializer=[numpy_helper.from_array(wt, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="rocm-vision-anchor")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString(), wt.nbytes + bias.nbytes


def optimized_ops(model_bytes: bytes, so) -> list[str]:
    """Op types of the graph onnxruntime executes, read back from its optimized-model dump."""
    import tempfile

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "optimized.onnx")
        so.optimized_model_filepath = path
        so.log_severity_level = 3  # the dump warns that NCHWc graphs are hardware specific
        ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        m = onnx.load(path)
    return [(n.domain + "." if n.domain else "") + n.op_type for n in m.graph.node]


def run_shape(s: dict, args) -> dict:
    """Runs one shape in this process and returns its result record."""
    import numpy as np
    import onnxruntime as ort

    dtype = "f16" if args.fp16 else "f32"
    rec = {"anchor": "onnxruntime", "ort_version": ort.__version__, "name": s["name"],
           "n": s["n"], "c": s["c"], "k": s["k"], "h": s["h"], "w": s["w"], "r": s["r"], "s": s["s"],
           "pad": s["pad"], "stride": s["stride"], "p": s["p"], "q": s["q"], "dtype": dtype,
           "threads": args.threads, "runs": args.runs, "warmup": args.warmup,
           "graph_optimization": args.opt_level}
    flop = 2 * s["n"] * s["k"] * s["c"] * s["r"] * s["s"] * s["p"] * s["q"]
    rec["flop"] = flop
    try:
        model_bytes, weight_bytes = build_model(s, args.fp16, args.seed)
        rng = np.random.default_rng(args.seed + 1)
        x = rng.standard_normal((s["n"], s["c"], s["h"], s["w"]), dtype=np.float32)
        if args.fp16:
            x = x.astype(np.float16)
        itemsize = x.itemsize
        rec["input_bytes"] = x.nbytes
        rec["output_bytes"] = s["n"] * s["k"] * s["p"] * s["q"] * itemsize
        rec["weight_bytes"] = weight_bytes

        baseline = proc_status_bytes("VmRSS")
        try:  # reset VmHWM to the current RSS (Linux >= 4.0) so the peak is this shape's
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[args.opt_level]
        if not args.spin:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        t0 = time.perf_counter()
        sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        rec["session_create_s"] = time.perf_counter() - t0
        rec["providers"] = sess.get_providers()

        for _ in range(args.warmup):
            y = sess.run(None, {"x": x})[0]
            del y
        times = []
        cpu_times = []
        for _ in range(args.runs):
            c0 = time.process_time()
            t0 = time.perf_counter()
            y = sess.run(None, {"x": x})[0]
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
            del y
        peak = proc_status_bytes("VmHWM")
        med = statistics.median(times)
        rec.update({
            "median_s": med,
            "min_s": min(times),
            "max_s": max(times),
            "times_s": times,
            "gflops": flop / med / 1e9,
            # CPU seconds this process got per wall second per thread, over the timed runs:
            # well below 1 means other processes were taking the cores (or threads idled).
            "cpu_utilisation": sum(cpu_times) / sum(times) / args.threads,
            "baseline_rss_bytes": baseline,
            "peak_rss_bytes": peak,
            "peak_rss_delta_bytes": peak - baseline,
        })
        # What actually ran (after the peak was read, so it does not count): the graph
        # after onnxruntime's transformers, e.g. NCHWc Conv with reorders, or Casts around
        # an f32 Conv where the CPU EP has no kernel for the requested type.
        rec["executed_ops"] = optimized_ops(model_bytes, so)
        if args.fp16:
            if any(op.endswith("Cast") for op in rec["executed_ops"]):
                rec["note"] = ("no float16 Conv kernel in onnxruntime's CPU EP here: it inserted Cast "
                               "nodes and ran the convolution in float32; the time includes the casts")
            else:
                rec["note"] = "float16 Conv ran without inserted casts"
    except Exception as e:  # reported, never turned into a number
        rec["error"] = f"{type(e).__name__}: {e}"
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", default=[], metavar="SPEC",
                    help="CIN:COUT:H[xW]:K[:PAD[:STRIDE[:N]]] (repeatable)")
    ap.add_argument("--shapes-json", metavar="FILE", help="JSON list of shapes, or full_config_shapes.json")
    ap.add_argument("--sizes", default="256,512",
                    help="output sizes for the default shape set (comma separated; default 256,512)")
    ap.add_argument("--threads", type=int, default=2, help="intra_op_num_threads (default 2)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per shape (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument("--fp16", action="store_true", help="float16 model (reports what ORT's CPU EP does)")
    ap.add_argument("--opt-level", choices=["all", "extended", "basic", "none"], default="all",
                    help="graph optimisation level (default all)")
    ap.add_argument("--no-spin", dest="spin", action="store_false",
                    help="disable intra-op thread spinning (default: ORT's default, spinning on)")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="run all shapes in this process (peak RSS deltas then less meaningful)")
    ap.add_argument("--list", action="store_true", help="print the normalised shapes as JSON lines and exit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.runs < 1 or args.threads < 1 or args.warmup < 0:
        raise SystemExit("--runs and --threads must be >= 1, --warmup >= 0")

    if args._child is not None:
        rec = run_shape(json.loads(args._child), args)
        print(json.dumps(rec), flush=True)
        return

    shapes = []
    for spec in args.shape:
        shapes.append(parse_spec(spec))
    if args.shapes_json:
        shapes.extend(load_shapes_json(args.shapes_json))
    if not shapes:
        try:
            sizes = [int(x) for x in args.sizes.split(",") if x]
        except ValueError:
            raise SystemExit(f"--sizes {args.sizes!r}: expected comma-separated integers")
        shapes = default_shapes(sizes)
    shapes = [normalise(s) for s in shapes]
    if args.list:
        for s in shapes:
            print(json.dumps(s))
        return

    import onnxruntime as ort

    print(f"# onnxruntime {ort.__version__}, python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, threads={args.threads}, runs={args.runs}, warmup={args.warmup}, "
          f"dtype={'f16' if args.fp16 else 'f32'}, opt={args.opt_level}, isolate={args.isolate}",
          file=sys.stderr, flush=True)

    failures = 0
    for s in shapes:
        if args.isolate:
            cmd = [sys.executable, os.path.abspath(__file__), "--_child", json.dumps(s),
                   "--threads", str(args.threads), "--runs", str(args.runs), "--warmup", str(args.warmup),
                   "--opt-level", args.opt_level, "--seed", str(args.seed)]
            if args.fp16:
                cmd.append("--fp16")
            if not args.spin:
                cmd.append("--no-spin")
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                rec = {"anchor": "onnxruntime", "name": s["name"], "error":
                       f"child exited {proc.returncode}: {proc.stderr.strip()[-500:]}"}
        else:
            rec = run_shape(s, args)
        print(json.dumps(rec), flush=True)
        if "error" in rec:
            failures += 1
            print(f"# {rec['name']}: ERROR {rec['error']}", file=sys.stderr, flush=True)
        else:
            print(f"# {rec['name']:>22}: median {rec['median_s'] * 1e3:9.2f} ms  {rec['gflops']:7.1f} GFLOP/s  "
                  f"peak RSS +{rec['peak_rss_delta_bytes'] / 2**20:8.1f} MiB  cpu util {rec['cpu_utilisation']:.2f}",
                  file=sys.stderr, flush=True)
    sys.exit(1 if failures == len(shapes) else 0)


if __name__ == "__main__":
    main()
