"""`realcugan_torch.py selftest`: every supported layer type, ncnn vs the module."""
from __future__ import annotations

import os
import struct
import sys
import tempfile

import numpy as np

from .common import DTYPES, TAG_FP16, TAG_FP32, emit
from .module import build_module
from .ncnn_files import load_bin, parse_param
from .pipeline import import_ncnn

# ----------------------------------------------------------------------------------
# selftest: every supported layer type, ncnn vs the module, on a synthetic graph
# ----------------------------------------------------------------------------------


def cmd_selftest(args) -> int:
    import torch

    ncnn, why = import_ncnn(args.ncnn_path)
    if ncnn is None:
        print(f"selftest SKIPPED: ncnn not importable ({why})", file=sys.stderr)
        return 3
    rng = np.random.default_rng(7)
    lines, blobs, weights = [], set(), []

    def layer(ty, name, bottoms, tops, params="", w=None):
        lines.append(f"{ty} {name} {len(bottoms)} {len(tops)} {' '.join(bottoms + tops)} {params}".rstrip())
        blobs.update(tops)
        for tag, arr in w or []:
            if tag is not None:
                weights.append(struct.pack("<I", tag))
            if tag == TAG_FP16:
                raw = arr.astype("<f2").tobytes()
                weights.append(raw + b"\0" * ((-len(raw)) % 4))
            else:
                weights.append(arr.astype("<f4").tobytes())

    def rnd(*shape, s=0.3):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    C = 3
    layer("Input", "in", [], ["in0"], "0=24 1=20 2=3")
    layer("Convolution", "c0", ["in0"], ["c0"], "0=8 1=3 4=1 5=1 6=216 9=2 -23310=1,1.000000e-01",
          [(TAG_FP16, rnd(216)), (None, rnd(8))])
    layer("ConvolutionDepthWise", "dw", ["c0"], ["dw"], "0=8 1=3 4=1 15=0 14=0 16=1 5=1 6=72 7=8 9=1",
          [(TAG_FP32, rnd(72)), (None, rnd(8))])
    layer("Split", "sp", ["dw"], ["s1", "s2", "s3", "s4"])
    layer("Pooling", "gmax", ["s1"], ["g"], "0=0 4=1")
    layer("InnerProduct", "fc", ["g"], ["fc"], "0=8 1=1 2=64 9=3 -23310=2,-5.000000e-01,5.000000e-01",
          [(TAG_FP16, rnd(64)), (None, rnd(8))])
    layer("BinaryOp", "sub", ["s2", "fc"], ["bs"], "0=1")
    layer("Eltwise", "el", ["bs", "s3"], ["el"], "0=1 -23301=2,5.000000e-01,2.000000e+00")
    layer("Deconvolution", "dc", ["el"], ["dc"], "0=4 1=3 3=2 4=1 15=0 14=1 16=0 5=1 6=288 9=4",
          [(TAG_FP16, rnd(288)), (None, rnd(4))])
    layer("Split", "sp2", ["dc"], ["d1", "d2", "d3"])
    layer("Interp", "bil", ["d1"], ["bil"], "0=2 1=1.500000e+00 2=1.500000e+00")
    layer("Interp", "near", ["d2"], ["near"], "0=1 3=57 4=69")
    layer("BinaryOp", "mx", ["bil", "near"], ["mx"], "0=4")
    layer("Padding", "prf", ["mx"], ["prf"], "0=1 1=2 2=3 3=0 4=2")
    layer("Padding", "pc", ["prf"], ["pc"], "0=0 1=1 2=1 3=2 4=0 5=2.500000e-01")
    layer("Split", "sp4", ["pc"], ["pc1", "pc2"])
    layer("Crop", "cr", ["pc1"], ["cr"], "-23309=2,2,3 -23310=2,-1,82 -23311=2,1,2")
    layer("Crop", "crd", ["pc2"], ["crd"], "-23309=2,0,0 -23310=2,58,72 -23311=2,-2,-1")
    layer("Interp", "nscale", ["d3"], ["ns"], "0=1 1=2.000000e+00 2=3.000000e+00")
    layer("Pooling", "nsp", ["ns"], ["nsp"], "0=1 4=1")
    layer("BinaryOp", "nsa", ["crd", "nsp"], ["crd2"], "0=0")
    layer("Concat", "cat", ["cr", "crd2"], ["cat"], "0=0")
    layer("PixelShuffle", "ps1", ["cat"], ["ps1"], "0=2 1=1")
    layer("ReLU", "lr", ["ps1"], ["lr"], "0=2.000000e-01")
    layer("Convolution", "c1", ["lr"], ["c1"], "0=8 1=2 3=2 5=0 6=64", [(TAG_FP32, rnd(64))])
    layer("Sigmoid", "sg", ["c1"], ["sg"])
    layer("BinaryOp", "sc", ["sg"], ["sc"], "0=7 1=1 2=2.000000e+00")
    layer("Split", "sp3", ["sc"], ["e1", "e2"])
    layer("TanH", "th", ["e1"], ["th"])
    layer("Clip", "cl", ["e2"], ["cl"], "0=1.200000e+00 1=1.500000e+00")
    layer("BinaryOp", "mul", ["th", "cl"], ["m"], "0=2")
    layer("Pooling", "gavg", ["s4"], ["ga"], "0=1 4=1")
    layer("InnerProduct", "fc2", ["ga"], ["fc2"], "0=8 1=1 2=64 9=4", [(TAG_FP16, rnd(64)), (None, rnd(8))])
    layer("Convolution", "c2", ["m"], ["c2"], "0=8 1=3 4=1 5=1 6=576 9=5", [(TAG_FP16, rnd(576)), (None, rnd(8))])
    layer("BinaryOp", "se", ["c2", "fc2"], ["se"], "0=2")
    layer("PixelShuffle", "ps0", ["se"], ["out0"], "0=2")
    d = tempfile.mkdtemp(prefix="rv-selftest-")
    param, bin_ = os.path.join(d, "t.param"), os.path.join(d, "t.bin")
    with open(param, "w") as f:
        f.write(f"7767517\n{len(lines)} {len(blobs)}\n" + "\n".join(lines) + "\n")
    with open(bin_, "wb") as f:
        f.write(b"".join(weights))

    x = rng.random((C, 20, 24), dtype=np.float32)
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    net.opt.num_threads = 2
    if net.load_param(param) != 0 or net.load_model(bin_) != 0:
        raise SystemExit("ncnn refused the synthetic graph")
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(x).clone())
    ret, out = ex.extract("out0")
    if ret != 0:
        raise SystemExit(f"ncnn extract failed ({ret})")
    ref = np.array(out)
    layers = parse_param(param)
    load_bin(layers, bin_)
    device = torch.device(args.device or "cpu")
    dtype = getattr(torch, DTYPES[args.dtype])
    m = build_module(layers).eval().to(device=device, dtype=dtype, memory_format=torch.channels_last)
    with torch.inference_mode():
        got = m(torch.from_numpy(x)[None].to(device, dtype).contiguous(memory_format=torch.channels_last))[0]
    got = got[0].float().cpu().numpy()
    types = sorted({l.type for l in layers})
    rec = {"selftest": "ncnn-vs-torch", "layer_types": types, "shape": list(ref.shape), "dtype": args.dtype}
    if got.shape != ref.shape:
        rec["error"] = f"shape {got.shape} vs ncnn {ref.shape}"
        emit(rec)
        return 1
    err = float(np.abs(got - ref).max())
    tol = {"f32": 1e-4, "f16": 2e-2, "bf16": 1e-1}[args.dtype]
    rec.update({"max_abs_diff": err, "ref_max_abs": float(np.abs(ref).max()), "tolerance": tol, "ok": err <= tol})
    emit(rec)
    return 0 if err <= tol else 1
