#!/usr/bin/env python3
"""ncnn anchor for Real-CUGAN on the GPU (issue 7): Tencent ncnn through Vulkan, the engine of
realcugan-ncnn-vulkan (what AMD users run today), on the same model files and image as ours.

Reference: the `ncnn` PyPI package (1.0.20261020 in the GPU-tier runs, the version the
examples-sr fixtures were made with), running the .param/.bin of models/ (blob in0 -> out0)
with realcugan-ncnn-vulkan's GPU options (src/realcugan.cpp: use_vulkan_compute,
use_fp16_packed, use_fp16_storage, use_int8_storage on; use_fp16_arithmetic off), on the
whole image (untiled: one net run over the padded image, as realcugan-ncnn-vulkan does for an
image no larger than its tile), with realcugan-ncnn-vulkan's pre/post-processing
(examples-sr/fixtures/make_fixtures.py describes it: x/255, reflect padding 18/14/19 for
2x/3x/4x plus the round-up to a multiple of 2/4/2 on the bottom/right, v*255 + 0.5 truncated
and clamped; the 4x residual is not implemented here: scales 2 and 3 only).

Subcommands (JSON lines on stdout, progress on stderr):

  make-image  a deterministic RGB test image (seeded numpy: smooth gradients, discs, lines,
              text-like strokes and mild noise, so that it is neither flat nor pure noise).
  run         load the model, print the Vulkan device ncnn found, one warm-up run, then
              --runs timed runs (each: extractor, input, extract out0, copy to host: what
              realcugan-ncnn-vulkan pays per tile, minus its shader pre/post-processing),
              median reported. --cpu runs on the CPU in float32 instead (a check of this
              script where there is no GPU). --save-npy writes the 8-bit result (HWC .npy).
              With no Vulkan GPU it prints a record with "error" and exits 3.
  compare     our PNG against a .npy result: max / mean absolute difference in 8-bit levels.

ncnn allocates its device memory itself and reports none of it: scripts/gpu-apps.sh samples
nvidia-smi around this program for its memory.

usage:
  realcugan_ncnn.py make-image OUT.png --size 1920x1080
  realcugan_ncnn.py run --param P --bin B --image IN.png --scale 2 [--runs 3] [--cpu] [--save-npy F]
  realcugan_ncnn.py compare --ours OURS.png --ref F.npy
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

PREPADDING = {2: 18, 3: 14, 4: 19}
ROUND_MULTIPLE = {2: 2, 3: 4, 4: 2}


def log(msg: str) -> None:
    print(f"realcugan_ncnn: {msg}", file=sys.stderr, flush=True)


def emit(rec: dict) -> None:
    print(json.dumps(rec), flush=True)


def make_image(path: str, w: int, h: int, seed: int) -> None:
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([
        128 + 100 * np.sin(xx / 97.0 + yy / 211.0),
        128 + 90 * np.cos(yy / 73.0 - xx / 301.0),
        128 + 80 * np.sin((xx + yy) / 151.0),
    ], axis=-1)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(pil)
    for _ in range(120):
        x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
        r = int(rng.integers(4, 90))
        col = tuple(int(c) for c in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            d.ellipse([x - r, y - r, x + r, y + r], fill=col, outline=(0, 0, 0), width=int(rng.integers(1, 4)))
        else:
            d.line([x, y, x + int(rng.integers(-200, 200)), y + int(rng.integers(-200, 200))], fill=col,
                   width=int(rng.integers(1, 6)))
    arr = np.asarray(pil).astype(np.int16) + rng.integers(-6, 7, (h, w, 3), dtype=np.int16)
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB").save(path)
    emit({"step": "make-image", "path": path, "width": w, "height": h, "seed": seed})


def pad_input(rgb: np.ndarray, scale: int) -> np.ndarray:
    h, w, _ = rgb.shape
    p, m = PREPADDING[scale], ROUND_MULTIPLE[scale]
    hh, ww = -(-h // m) * m, -(-w // m) * m
    x = rgb.astype(np.float32).transpose(2, 0, 1) * np.float32(1.0 / 255.0)
    return np.ascontiguousarray(np.pad(x, ((0, 0), (p, p + hh - h), (p, p + ww - w)), mode="reflect"))


def cmd_run(args) -> int:
    import ncnn
    from PIL import Image

    rec = {"impl": "ncnn-cpu" if args.cpu else "ncnn-vulkan", "model": args.param, "scale": args.scale,
           "ncnn": ncnn.__version__, "runs": args.runs}
    if args.scale not in (2, 3):
        raise SystemExit("only --scale 2 or 3 (the 4x residual is not implemented here)")
    rgb = np.asarray(Image.open(args.image).convert("RGB"))
    h, w, _ = rgb.shape
    rec.update({"image": args.image, "width": w, "height": h})
    net = ncnn.Net()
    if args.cpu:
        net.opt.use_vulkan_compute = False
        net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False
        net.opt.use_bf16_storage = False
        net.opt.num_threads = args.threads
    else:
        t = time.perf_counter()
        count = ncnn.get_gpu_count()
        rec["vulkan_init_s"] = round(time.perf_counter() - t, 3)
        if count == 0:
            rec["error"] = "ncnn found no Vulkan GPU (no loader, no ICD for this driver, or the driver refused)"
            emit(rec)
            return 3
        try:
            info = ncnn.get_gpu_info(0)
            rec["vulkan_device"] = info.device_name()
            rec["vulkan_driver_version"] = info.driver_version()
        except Exception as e:  # informative only
            rec["vulkan_device"] = f"? ({e})"
        net.opt.use_vulkan_compute = True
        net.opt.use_fp16_packed = True
        net.opt.use_fp16_storage = True
        net.opt.use_fp16_arithmetic = False
        net.opt.use_int8_storage = True
    t = time.perf_counter()
    if net.load_param(args.param) != 0 or net.load_model(args.bin) != 0:
        rec["error"] = f"ncnn failed to load {args.param} / {args.bin}"
        emit(rec)
        return 1
    rec["load_s"] = round(time.perf_counter() - t, 3)
    # ncnn.Mat(ndarray) only wraps the buffer: keep `padded` referenced until clone() has
    # copied it (a temporary would be freed first).
    padded = pad_input(rgb, args.scale)
    mat = ncnn.Mat(padded).clone()

    def once():
        # A fresh copy per run: the net may write into its input blob.
        inp = mat.clone()
        t = time.perf_counter()
        ex = net.create_extractor()
        ex.input("in0", inp)
        ret, out = ex.extract("out0")
        if ret != 0:
            raise RuntimeError(f"ncnn extract failed ({ret})")
        arr = np.array(out)
        return time.perf_counter() - t, arr

    first, _ = once()
    times, arr = [], None
    for _ in range(args.runs):
        dt, arr = once()
        times.append(dt)
    rec.update({"first_run_s": round(first, 4), "runs_s": [round(t, 4) for t in times],
                "ms": round(statistics.median(times) * 1e3, 2), "ms_min": round(min(times) * 1e3, 2),
                "out_shape": list(arr.shape)})
    if args.save_npy:
        v = arr[:, : h * args.scale, : w * args.scale] * np.float32(255.0) + np.float32(0.5)
        np.save(args.save_npy, np.clip(np.trunc(v), 0, 255).astype(np.uint8).transpose(1, 2, 0))
        rec["npy"] = args.save_npy
    emit(rec)
    return 0


def cmd_compare(args) -> int:
    from PIL import Image

    ours = np.asarray(Image.open(args.ours).convert("RGB"), dtype=np.int16)
    rec = {"step": "compare", "ours": args.ours, "ref": args.ref, "label": args.label}
    try:
        ref = np.load(args.ref).astype(np.int16)
        if ref.shape != ours.shape:
            raise ValueError(f"shapes differ: ours {ours.shape}, reference {ref.shape}")
        d = np.abs(ours - ref)
        rec.update({"max_abs_levels": int(d.max()), "mean_abs_levels": round(float(d.mean()), 5),
                    "values_over_1_level": int((d > 1).sum()), "values": int(d.size)})
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    emit(rec)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-image")
    p.add_argument("out")
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--seed", type=int, default=20261202)
    p = sub.add_parser("run")
    p.add_argument("--param", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--scale", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--save-npy")
    p = sub.add_parser("compare")
    p.add_argument("--ours", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--label", default="")
    args = ap.parse_args()
    if args.cmd == "make-image":
        w, h = (int(v) for v in args.size.lower().split("x"))
        make_image(args.out, w, h, args.seed)
        return 0
    if args.cmd == "run":
        return cmd_run(args)
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
