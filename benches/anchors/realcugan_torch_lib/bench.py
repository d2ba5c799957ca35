"""`realcugan_torch.py [bench]`: check against ncnn (or its fixture), then time."""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from .common import DTYPES, REPO, SEED, emit, log
from .module import build_module
from .ncnn_files import load_bin, parse_param
from .pipeline import (Upscaler, import_ncnn, level_diff, make_image, ncnn_pipeline, padding_for, parse_size,
                       parse_variant)

# ----------------------------------------------------------------------------------
# bench
# ----------------------------------------------------------------------------------


def cmd_bench(args) -> int:
    import torch

    kind_dir, stem, scale = parse_variant(args.model)
    model_dir = args.model_dir
    if model_dir is None:
        model_dir = next((d for d in (os.path.join(REPO, "models"), os.path.join(REPO, ".device-carry", "apps", "models"))
                          if os.path.isfile(os.path.join(d, kind_dir, stem + ".param"))), os.path.join(REPO, "models"))
    param = os.path.join(model_dir, kind_dir, stem + ".param")
    bin_ = os.path.join(model_dir, kind_dir, stem + ".bin")
    if not os.path.isfile(param) or not os.path.isfile(bin_):
        raise SystemExit(f"{param} / .bin not found (scripts/fetch-models.sh, or --model-dir)")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, DTYPES[args.dtype])
    mf = torch.contiguous_format if args.nchw else torch.channels_last

    layers = parse_param(param)
    load_bin(layers, bin_)
    types = sorted({l.type for l in layers})
    net = build_module(layers).eval().to(device=device, dtype=dtype, memory_format=mf)
    if net.input_names != ["in0"] or net.output_names != ["out0"]:
        raise SystemExit(f"expected blob in0 -> out0, the graph has {net.input_names} -> {net.output_names}")
    rec = {"anchor": "pytorch-realcugan", "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version() if cuda else None,
           "device": torch.cuda.get_device_name(device) if cuda else "cpu",
           "model": f"{kind_dir}/{stem}", "scale": scale, "dtype": args.dtype,
           "memory_format": "channels_last" if mf is torch.channels_last else "nchw",
           "cudnn_benchmark": torch.backends.cudnn.benchmark, "tf32": False, "compile": args.compile,
           "layer_types": types}
    log(f"{param}: {len(layers)} layers ({', '.join(types)}), on {rec['device']}, {args.dtype}, {rec['memory_format']}")

    up = Upscaler(net, scale, device, dtype, mf)

    # ---- check against ncnn (or its fixture) before anything is timed ----
    with torch.inference_mode():
        ncnn, why = (None, "--skip-check") if args.skip_check else import_ncnn(args.ncnn_path)
        ref = None
        if ncnn is not None:
            cw, ch = parse_size(args.check_size)
            img = make_image(cw, ch, SEED)
            log(f"check: ncnn {ncnn.__version__} (CPU, fp32) vs this module ({args.dtype}) on a {cw}x{ch} image")
            ref, ref_padded, ref_out = ncnn_pipeline(ncnn, param, bin_, img, scale, args.threads or 2)
            rec.update({"check": "ok", "check_reference": f"ncnn {ncnn.__version__} cpu fp32", "check_image": [ch, cw]})
            # The parts, for the diagnosis: our padding (on the device) and the net's raw output.
            padded = up.prepare(torch.from_numpy(img).to(device))
            rec["pad_max_abs_diff"] = float((padded[0].cpu() - torch.from_numpy(ref_padded)).abs().max())
            raw = net(padded.to(dtype).contiguous(memory_format=mf))[0][0].float().cpu().numpy()
            if raw.shape != ref_out.shape:
                raise SystemExit(f"check: net output {raw.shape}, ncnn's {ref_out.shape}")
            rec["out_max_abs_diff"] = float(np.abs(raw - ref_out).max())
        elif not args.skip_check:
            fx = os.path.join(REPO, "examples-sr", "fixtures")
            kind = kind_dir.removeprefix("models-")
            exp = os.path.join(fx, "expected", f"{kind}_{stem}__rgb64.png")
            try:
                from PIL import Image

                if not os.path.isfile(exp):
                    raise FileNotFoundError(exp)
                img = np.array(Image.open(os.path.join(fx, "inputs", "rgb64.png")).convert("RGB"))
                ref = np.asarray(Image.open(exp).convert("RGB"))
                log(f"ncnn not importable ({why}): checking against the ncnn-made fixture {exp}")
                rec.update({"check": "ok", "check_reference": f"fixture {os.path.relpath(exp, REPO)}",
                            "check_image": [64, 64]})
            except Exception as e:
                log(f"check SKIPPED: ncnn not importable ({why}) and no fixture ({type(e).__name__}: {e})")
        if ref is None:
            rec.update({"check": "skipped", "max_level_diff": None})
            if not args.skip_check:
                print("check SKIPPED: ncnn not importable", file=sys.stderr, flush=True)
        else:
            got = up(img)
            rec.update(level_diff(got, ref))
            if rec["max_level_diff"] > args.max_level_diff:
                rec["check"] = "failed"
                log(f"check FAILED: max |diff| {rec['max_level_diff']} levels > {args.max_level_diff}")
                emit(rec)
                return 1
            log(f"check ok: max |diff| {rec['max_level_diff']} level(s), mean {rec['mean_level_diff']}, "
                f"{rec['values_over_1_level']} of {rec['values']} values over 1"
                + (f"; raw net output max |diff| {rec['out_max_abs_diff']:.3g}" if "out_max_abs_diff" in rec else ""))
        if args.no_time:
            emit(rec)
            return 0

        # ---- timing ----
        if args.compile:
            up.net = torch.compile(net)
        w, h = parse_size(args.size)
        if args.image:
            from PIL import Image

            img = np.array(Image.open(args.image).convert("RGB"))
            h, w = img.shape[:2]
            rec["image_file"] = args.image
        else:
            img = make_image(w, h, SEED + 1)
        t, b, l, r = padding_for(h, w, scale)
        H, W = h + t + b, w + l + r
        rec.update({"image": [h, w], "input": [H, W], "padding": [t, b, l, r], "output": [h * scale, w * scale],
                    "warmup": args.warmup, "reps": args.reps})
        log(f"timing: image {w}x{h} -> net input {W}x{H} (reflect {t}/{b}/{l}/{r}) -> {w * scale}x{h * scale}")
        x = up.prepare(torch.from_numpy(img).to(device)).to(dtype).contiguous(memory_format=mf)

        def fwd():
            return up.net(x)

        def timed(fn, events: bool):
            ts = []
            for i in range(args.warmup + args.reps):
                if events:
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    s.record()
                    fn()
                    e.record()
                    e.synchronize()
                    dt = s.elapsed_time(e)
                else:
                    if cuda:
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    fn()
                    if cuda:
                        torch.cuda.synchronize()
                    dt = (time.perf_counter() - t0) * 1e3
                if i >= args.warmup:
                    ts.append(dt)
            return ts

        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
        ts = timed(fwd, cuda)
        rec.update({"median_ms": round(statistics.median(ts), 3), "min_ms": round(min(ts), 3),
                    "times_ms": [round(v, 3) for v in ts]})
        if cuda:
            rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
            rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        log(f"net: median {rec['median_ms']} ms, min {rec['min_ms']} ms over {args.reps}")
        out = None

        def whole():
            nonlocal out
            out = up(img)

        us = timed(whole, False)
        rec.update({"upscale_median_ms": round(statistics.median(us), 3), "upscale_min_ms": round(min(us), 3)})
        log(f"upscale (host image -> host image): median {rec['upscale_median_ms']} ms")
        if args.save_npy:
            np.save(args.save_npy, out)
            rec["npy"] = args.save_npy
    emit(rec)
    return 0
