#!/usr/bin/env python3
"""cuDNN anchor for the GPU tier: PyTorch F.conv2d with torch.backends.cudnn.benchmark on,
NCHW and NHWC (channels_last), on the SD/FLUX VAE-decoder conv shapes at 1024^2 output
(and the 128-channel one at 2048^2), f16, bf16 and f32 (TF32 disabled), timed with CUDA
events: median of --reps runs after warm-up. One JSON line per (shape, dtype, layout).

Run on the GPU machine (PyTorch is there): python3 benches/anchors/cudnn_conv.py [--reps N]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

SHAPES = [
    ("3x3 512->512", 512, 512, 3, 1024),
    ("3x3 512->256", 512, 256, 3, 1024),
    ("3x3 256->256", 256, 256, 3, 1024),
    ("3x3 256->128", 256, 128, 3, 1024),
    ("3x3 128->128", 128, 128, 3, 1024),
    ("1x1 512->256", 512, 256, 1, 1024),
    ("1x1 256->128", 256, 128, 1, 1024),
    ("3x3 128->3 (conv_out)", 128, 3, 3, 1024),
    ("3x3 128->128", 128, 128, 3, 2048),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dtypes", default="F16,BF16,F32", help="comma-separated subset of F16,BF16,F32")
    ap.add_argument("--layouts", default="NCHW,NHWC", help="comma-separated subset of NCHW,NHWC")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"cudnn_conv: {torch.cuda.get_device_name()} torch {torch.__version__} cudnn {torch.backends.cudnn.version()}", file=sys.stderr)
    for name, c, k, r, hw in SHAPES[: 2 if a.quick else None]:
        for dt_name, dt in [("F16", torch.float16), ("BF16", torch.bfloat16), ("F32", torch.float32)]:
            if dt_name not in a.dtypes.split(","):
                continue
            for layout in a.layouts.split(","):
                x = torch.randn(1, c, hw, hw, device=dev, dtype=dt)
                w = torch.randn(k, c, r, r, device=dev, dtype=dt) * 0.1
                if layout == "NHWC":
                    x = x.to(memory_format=torch.channels_last)
                    w = w.to(memory_format=torch.channels_last)
                pad = r // 2
                for _ in range(3):
                    F.conv2d(x, w, padding=pad)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                times = []
                for _ in range(a.reps):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    y = F.conv2d(x, w, padding=pad)
                    e.record()
                    e.synchronize()
                    times.append(s.elapsed_time(e))
                    del y
                times.sort()
                ms = times[len(times) // 2]
                flops = 2.0 * c * k * r * r * hw * hw
                print(json.dumps({
                    "impl": "cudnn", "layout": layout, "shape": name, "c": c, "k": k, "r": r, "hw": hw,
                    "dtype": dt_name, "ms": round(ms, 4), "tflops": round(flops / (ms * 1e-3) / 1e12, 2),
                    "peak_above_inputs_bytes": torch.cuda.max_memory_allocated() - base, "reps": a.reps,
                }), flush=True)
                del x, w
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
