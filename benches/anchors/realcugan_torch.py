#!/usr/bin/env python3
"""PyTorch + cuDNN anchor for Real-CUGAN (issue 28, item 5): the anchor an NVIDIA user would pick.

The same network as ours and ncnn's, built from the same ncnn .param/.bin files (no PyTorch
checkpoint, no hand-written architecture: the graph is the .param file's, executed in
topological order by a torch.nn.Module), run eagerly with cuDNN (benchmark mode on, TF32
off), weights and activations in f16 (or --dtype bf16/f32), channels_last memory format.
Nothing is fused or compiled beyond what eager PyTorch does (`--compile` opts into
torch.compile; off by default: plain eager + cuDNN is the anchor).

Before anything is timed, the module is checked against ncnn itself (the `ncnn` PyPI package,
CPU, float32, the options of examples-sr/fixtures/make_fixtures.py) on a small seeded image
(--check-size, 128x128 by default) through the whole realcugan-ncnn-vulkan pipeline:
x * (1/255.f), reflect padding 18/14/19 for 2x/3x/4x plus the round-up of the image to a
multiple of 2/4/2 on the bottom/right, the net, out[:, :h*s, :w*s] * 255 + 0.5 (+ the 4x
nearest-neighbour residual of the normalised input), truncated and clamped to 0..255.
The check fails (exit 1, nothing timed) when any 8-bit value differs by more than
--max-level-diff (1) levels. ncnn is imported from sys.path, after --ncnn-path DIR (a
folder, or a .tar.xz/.tar/.zip/.whl of the unpacked wheel, which is extracted to a temporary
folder: .device-carry/apps/py/ncnn.tar.xz on the GPU machine). Without ncnn the module is
checked against the ncnn-made fixture of that model (examples-sr/fixtures/expected/
<kind>_<model>__rgb64.png, the 64x64 input; needs pillow) and the record says "fixture";
with neither, "check SKIPPED" is printed, the timing still runs and the record says
"skipped".

Timing (--size WxH, 1920x1080 by default: the image size; the net input is the padded
image, 1956x1116 for 2x): the net alone on a device-resident padded input (median_ms /
min_ms: CUDA events around each forward, after 3 warm-ups, median of --reps), then the
whole upscale as our `realcugan` CLI reports it ("upscale": 8-bit HWC image in host memory
-> upload, normalise, pad, net, post-process, download -> 8-bit HWC image in host memory;
upscale_median_ms, host wall time with a device synchronize). On the CPU the same with
time.perf_counter (no meaning as a figure: a check of the script).

One JSON line on stdout (progress on stderr), e.g.
  {"anchor": "pytorch-realcugan", "torch": "2.11.0+cu130", "cudnn": 91300,
   "model": "models-se/up2x-no-denoise", "dtype": "f16", "image": [1080, 1920],
   "input": [1116, 1956], "output": [2160, 3840], "median_ms": ..., "min_ms": ..., "reps": 10,
   "upscale_median_ms": ..., "check": "ok", "max_level_diff": 0, ...}

Layer types: every one the Real-CUGAN files use (Input, Convolution with its fused
activation, Deconvolution, InnerProduct, Pooling (global), Split, Crop (slice form),
BinaryOp (per-channel broadcast, scalar form), PixelShuffle), and a few more of ncnn's
common ones (ConvolutionDepthWise, ReLU/leaky, Sigmoid, TanH, Clip, Eltwise, Concat,
Padding, Interp nearest/bilinear, Noop, Dropout); anything else is refused by name.
`selftest` runs a synthetic graph with all of them through ncnn and the module.

usage:
  realcugan_torch.py [bench] [--model models-se/up2x-no-denoise] [--model-dir models]
                     [--size 1920x1080] [--dtype f16|bf16|f32] [--reps 10] [--device cuda|cpu]
                     [--ncnn-path DIR] [--check-size 128x128] [--no-time] [--image PNG]
  realcugan_torch.py selftest [--ncnn-path DIR] [--device cpu] [--dtype f32]

On the GPU machine (models are git-ignored: carry them, or use the staged ones):
  python3 benches/anchors/realcugan_torch.py --model-dir .device-carry/apps/models \\
      --ncnn-path .device-carry/apps/py/ncnn.tar.xz
On the CPU (a check of the script):
  /opt/torch-venv/bin/python benches/anchors/realcugan_torch.py --device cpu --dtype f32 \\
      --size 256x256 --reps 2
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import struct
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PREPADDING = {2: 18, 3: 14, 4: 19}  # realcugan-ncnn-vulkan src/main.cpp
ROUND_MULTIPLE = {2: 2, 3: 4, 4: 2}  # src/realcugan.cpp, prepadding_bottom/right
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
SEED = 20261202

TAG_FP16 = 0x01306B47
TAG_FP32 = 0x00000000
TAG_FP32_RAW = 0x0002C056
TAG_INT8 = 0x000D4B38


def log(msg: str) -> None:
    print(f"realcugan_torch: {msg}", file=sys.stderr, flush=True)


def emit(rec: dict) -> None:
    print(json.dumps(rec), flush=True)


# ----------------------------------------------------------------------------------
# ncnn .param / .bin
# ----------------------------------------------------------------------------------


class NcnnLayer:
    def __init__(self, ty: str, name: str, bottoms: list[str], tops: list[str], params: dict):
        self.type, self.name, self.bottoms, self.tops, self.params = ty, name, bottoms, tops, params
        self.weights: dict[str, np.ndarray] = {}

    def p(self, key: int, default=None):
        return self.params.get(key, default)

    def __repr__(self) -> str:
        return f"{self.type} {self.name} {self.bottoms} -> {self.tops} {self.params}"


def _num(s: str):
    # ncnn's paramdict: a value with '.', 'e' or 'E' is a float, otherwise an int.
    return float(s) if any(c in s for c in ".eE") else int(s)


def parse_param(path: str) -> list[NcnnLayer]:
    with open(path) as f:
        lines = [ln for ln in (l.strip() for l in f) if ln]
    if not lines or lines[0] != "7767517":
        raise SystemExit(f"{path}: not an ncnn text .param (magic {lines[0] if lines else '<empty>'!r}, want 7767517)")
    layer_count, blob_count = (int(v) for v in lines[1].split())
    layers = []
    for ln in lines[2:]:
        t = ln.split()
        ty, name, n_in, n_out = t[0], t[1], int(t[2]), int(t[3])
        bottoms, tops = t[4 : 4 + n_in], t[4 + n_in : 4 + n_in + n_out]
        params: dict = {}
        for kv in t[4 + n_in + n_out :]:
            k, v = kv.split("=", 1)
            k = int(k)
            if k <= -23300:  # array: -23300 - id = count,v0,v1,...
                vals = v.split(",")
                n = int(vals[0])
                if len(vals) - 1 != n:
                    raise SystemExit(f"{path}: {name}: array {k} says {n} values, has {len(vals) - 1}")
                params[-23300 - k] = [_num(x) for x in vals[1:]]
            else:
                params[k] = _num(v)
        layers.append(NcnnLayer(ty, name, bottoms, tops, params))
    if len(layers) != layer_count:
        raise SystemExit(f"{path}: header says {layer_count} layers, file has {len(layers)}")
    blobs = {b for l in layers for b in l.tops}
    if len(blobs) != blob_count:
        log(f"note: {path}: header says {blob_count} blobs, the layers produce {len(blobs)}")
    return layers


class BinReader:
    """ncnn ModelBinFromDataReader: load(n, 0) = a 4-byte tag then the data (fp16 padded to 4
    bytes, or raw fp32), load(n, 1) = raw fp32 with no tag (biases)."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            self.data = f.read()
        self.off = 0
        self.path = path

    def _take(self, n: int, what: str) -> bytes:
        if self.off + n > len(self.data):
            raise SystemExit(f"{self.path}: truncated reading {what} at byte {self.off} (need {n}, have "
                             f"{len(self.data) - self.off})")
        b = self.data[self.off : self.off + n]
        self.off += n
        return b

    def weights(self, count: int, what: str) -> np.ndarray:
        (tag,) = struct.unpack("<I", self._take(4, what + " tag"))
        if tag == TAG_FP16:
            raw = self._take((count * 2 + 3) & ~3, what)
            return np.frombuffer(raw, dtype="<f2", count=count).astype(np.float32)
        if tag in (TAG_FP32, TAG_FP32_RAW):
            return self.f32(count, what)
        kind = "int8 quantised weights" if tag == TAG_INT8 else "a codebook or corrupt data"
        raise SystemExit(f"{self.path}: {what}: weight tag 0x{tag:08X} ({kind}) is not supported")

    def f32(self, count: int, what: str) -> np.ndarray:
        return np.frombuffer(self._take(count * 4, what), dtype="<f4", count=count).astype(np.float32)


def load_bin(layers: list[NcnnLayer], path: str) -> None:
    r = BinReader(path)
    for l in layers:
        ctx = f"{l.type} {l.name}"
        if l.type in ("Convolution", "ConvolutionDepthWise", "Deconvolution", "InnerProduct"):
            wkey = 2 if l.type == "InnerProduct" else 6
            nout = l.p(0)
            if l.p(8, 0):
                raise SystemExit(f"{ctx}: int8_scale_term is not supported")
            l.weights["weight"] = r.weights(l.p(wkey), ctx + " weights")
            if l.p(1 if l.type == "InnerProduct" else 5, 0):
                l.weights["bias"] = r.f32(nout, ctx + " bias")
    if r.off != len(r.data):
        raise SystemExit(f"{path}: {len(r.data) - r.off} bytes left after the last layer's weights")


# ----------------------------------------------------------------------------------
# The graph as a torch.nn.Module
# ----------------------------------------------------------------------------------


def build_module(layers: list[NcnnLayer]):
    import torch
    import torch.nn.functional as F
    from torch import nn

    def act_fn(ty: int, ps: list):
        if ty == 0:
            return None
        if ty == 1:
            return lambda x: F.relu(x, inplace=True)
        if ty == 2:
            slope = float(ps[0]) if ps else 0.0
            return lambda x: F.leaky_relu(x, slope, inplace=True)
        if ty == 3:
            lo, hi = float(ps[0]), float(ps[1])
            return lambda x: x.clamp_(lo, hi)
        if ty == 4:
            return lambda x: torch.sigmoid_(x)
        if ty == 5:
            return lambda x: F.mish(x, inplace=True)
        if ty == 6:
            a, b = (float(ps[0]), float(ps[1])) if ps else (0.2, 0.5)
            return lambda x: x * (x * a + b).clamp_(0.0, 1.0)
        raise SystemExit(f"activation_type {ty} is not supported")

    def is_vec(t) -> bool:  # an ncnn 1-D blob, kept as [1, W]
        return t.dim() == 2

    def as_channel(t):  # 1-D [1, C] -> [1, C, 1, 1] for a per-channel broadcast
        return t.reshape(1, -1, 1, 1)

    class NcnnNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.mods = nn.ModuleDict()
            self.ops = []  # (layer name, type, fn, bottoms, tops)
            self.input_names = []
            for l in self._toposort(layers):
                fn = self._lower(l)
                self.ops.append((l.name, l.type, fn, l.bottoms, l.tops))
            outputs = {b for op in self.ops for b in op[4]}
            consumed = {b for op in self.ops for b in op[3]}
            self.output_names = sorted(outputs - consumed)
            # Last use of each blob, to drop it as soon as it is dead (as ncnn's light mode).
            self.last_use = {}
            for i, op in enumerate(self.ops):
                for b in op[3]:
                    self.last_use[b] = i

        @staticmethod
        def _toposort(ls):
            producer = {}
            for i, l in enumerate(ls):
                for t in l.tops:
                    if t in producer:
                        raise SystemExit(f"blob {t} produced twice ({ls[producer[t]].name}, {l.name})")
                    producer[t] = i
            done, order, avail = set(), [], set()
            pending = list(range(len(ls)))
            while pending:
                rest = []
                for i in pending:  # stable: file order among the ready layers
                    if all(b in avail for b in ls[i].bottoms):
                        order.append(ls[i])
                        avail.update(ls[i].tops)
                        done.add(i)
                    else:
                        rest.append(i)
                if len(rest) == len(pending):
                    missing = {b for i in rest for b in ls[i].bottoms if b not in avail}
                    raise SystemExit(f"graph has a cycle or unproduced blobs: {sorted(missing)[:8]}")
                pending = rest
            return order

        def _key(self, name):
            return re.sub(r"[^0-9A-Za-z_]", "_", name)

        def _lower(self, l: NcnnLayer):
            ty, p = l.type, l.p
            if ty == "Input":
                self.input_names.extend(l.tops)
                return None
            if ty in ("Convolution", "ConvolutionDepthWise"):
                nout, kw = p(0), p(1)
                kh, dw = p(11, kw), p(2, 1)
                dh, sw = p(12, dw), p(3, 1)
                sh = p(13, sw)
                pl = p(4, 0)
                pr, pt = p(15, pl), p(14, pl)
                pb, pad_value = p(16, pt), float(p(18, 0.0))
                group = p(7, 1) if ty == "ConvolutionDepthWise" else 1
                if min(pl, pr, pt, pb) < 0:
                    raise SystemExit(f"{l.name}: automatic padding ({pl}) is not supported")
                if p(19, 0):
                    raise SystemExit(f"{l.name}: dynamic weights are not supported")
                w = l.weights["weight"]
                cin_g = w.size // (nout * kh * kw)
                if cin_g * nout * kh * kw != w.size:
                    raise SystemExit(f"{l.name}: weight_data_size {w.size} is not a multiple of {nout}*{kh}*{kw}")
                sym = pl == pr and pt == pb and pad_value == 0.0
                m = nn.Conv2d(cin_g * group, nout, (kh, kw), stride=(sh, sw), dilation=(dh, dw), groups=group,
                              padding=(pt, pl) if sym else 0, bias="bias" in l.weights)
                with torch.no_grad():
                    m.weight.copy_(torch.from_numpy(w.reshape(nout, cin_g, kh, kw)))
                    if m.bias is not None:
                        m.bias.copy_(torch.from_numpy(l.weights["bias"]))
                self.mods[self._key(l.name)] = m
                act = act_fn(p(9, 0), p(10, []))
                pads = None if sym else (pl, pr, pt, pb)

                def conv(x, m=m, act=act, pads=pads, pv=pad_value):
                    if pads is not None and any(pads):
                        x = F.pad(x, pads, value=pv)
                    y = m(x)
                    return act(y) if act else y

                return conv
            if ty == "Deconvolution":
                nout, kw = p(0), p(1)
                kh, dw = p(11, kw), p(2, 1)
                dh, sw = p(12, dw), p(3, 1)
                sh = p(13, sw)
                pl = p(4, 0)
                pr, pt = p(15, pl), p(14, pl)
                pb = p(16, pt)
                if min(pl, pr, pt, pb) < 0 or p(18, 0) or p(19, 0) or p(20, 0) or p(21, 0) or p(28, 0):
                    raise SystemExit(f"{l.name}: automatic padding, output_pad, output size or dynamic weights "
                                     "are not supported")
                w = l.weights["weight"]
                cin = w.size // (nout * kh * kw)
                sym = pl == pr and pt == pb
                m = nn.ConvTranspose2d(cin, nout, (kh, kw), stride=(sh, sw), dilation=(dh, dw),
                                       padding=(pt, pl) if sym else 0, bias="bias" in l.weights)
                with torch.no_grad():
                    # ncnn [out][in][kh][kw] (scatter, no flip) -> PyTorch's [in][out][kh][kw]
                    m.weight.copy_(torch.from_numpy(np.ascontiguousarray(
                        w.reshape(nout, cin, kh, kw).transpose(1, 0, 2, 3))))
                    if m.bias is not None:
                        m.bias.copy_(torch.from_numpy(l.weights["bias"]))
                self.mods[self._key(l.name)] = m
                act = act_fn(p(9, 0), p(10, []))
                cut = None if sym else (pl, pr, pt, pb)

                def deconv(x, m=m, act=act, cut=cut):
                    y = m(x)
                    if cut is not None:
                        H, W = y.shape[2], y.shape[3]
                        y = y[:, :, cut[2] : H - cut[3], cut[0] : W - cut[1]]
                    return act(y) if act else y

                return deconv
            if ty == "InnerProduct":
                nout = p(0)
                w = l.weights["weight"]
                m = nn.Linear(w.size // nout, nout, bias="bias" in l.weights)
                with torch.no_grad():
                    m.weight.copy_(torch.from_numpy(w.reshape(nout, -1)))
                    if m.bias is not None:
                        m.bias.copy_(torch.from_numpy(l.weights["bias"]))
                self.mods[self._key(l.name)] = m
                act = act_fn(p(9, 0), p(10, []))

                def fc(x, m=m, act=act):
                    y = m(x.reshape(1, -1))
                    return act(y) if act else y

                return fc
            if ty == "Pooling":
                ptype, glob = p(0, 0), p(4, 0)
                if not glob or p(7, 0):
                    raise SystemExit(f"{l.name}: only global pooling is supported")
                if ptype == 1:
                    return lambda x: x.mean(dim=(2, 3))
                if ptype == 0:
                    return lambda x: x.amax(dim=(2, 3))
                raise SystemExit(f"{l.name}: pooling_type {ptype} is not supported")
            if ty == "Split":
                return lambda x, n=len(l.tops): (x,) * n
            if ty in ("Noop",):
                return lambda x: x
            if ty == "Dropout":
                scale = float(p(0, 1.0))
                return (lambda x: x) if scale == 1.0 else (lambda x, s=scale: x * s)
            if ty == "Crop":
                if len(l.bottoms) != 1:
                    raise SystemExit(f"{l.name}: Crop with a reference blob is not supported")
                starts, ends, axes = p(9), p(10), p(11)
                if starts is None or ends is None:
                    raise SystemExit(f"{l.name}: only the slice form of Crop (-23309/-23310/-23311) is supported")
                if axes is None:
                    axes = list(range(len(starts)))

                def crop(x, starts=starts, ends=ends, axes=axes):
                    if is_vec(x):
                        raise SystemExit("Crop of a 1-D blob is not supported")
                    idx = [slice(None)] * 4
                    for s, e, a in zip(starts, ends, axes):
                        a = a + 3 if a < 0 else a  # [C, H, W]: 0, 1, 2 or -3, -2, -1
                        n = x.shape[a + 1]
                        s = 0 if s == -233 else (n + s if s < 0 else s)
                        e = n if e == -233 else (n + e if e <= 0 else e)  # ncnn: end 0 means n
                        e = min(n, e)
                        if not 0 <= s < e:
                            raise SystemExit(f"Crop {l.name}: empty or negative range {s}..{e} of {n}")
                        idx[a + 1] = slice(s, e)
                    return x[tuple(idx)]

                return crop
            if ty == "BinaryOp":
                op, with_scalar, b = p(0, 0), p(1, 0), float(p(2, 0.0))
                ops = {0: torch.add, 1: torch.sub, 2: torch.mul, 3: torch.div, 4: torch.maximum, 5: torch.minimum,
                       6: torch.pow, 7: lambda a, c: torch.sub(c, a), 8: lambda a, c: torch.div(c, a)}
                if op not in ops:
                    raise SystemExit(f"{l.name}: BinaryOp op_type {op} is not supported")
                f = ops[op]
                if with_scalar:
                    if op in (4, 5, 6):
                        return lambda x, f=f, b=b: f(x, torch.tensor(b, dtype=x.dtype, device=x.device))
                    return lambda x, f=f, b=b: f(x, b)

                def binop(x, y, f=f):
                    if is_vec(x) != is_vec(y):  # [C, H, W] with a 1-D [C]: per channel
                        v, t = (x, y) if is_vec(x) else (y, x)
                        if v.shape[1] != t.shape[1]:
                            raise SystemExit(f"BinaryOp {l.name}: 1-D operand of {v.shape[1]} for {t.shape[1]} "
                                             "channels (only the per-channel broadcast is supported)")
                        x, y = (as_channel(x), y) if is_vec(x) else (x, as_channel(y))
                    elif x.shape != y.shape:
                        raise SystemExit(f"BinaryOp {l.name}: shapes {tuple(x.shape)} and {tuple(y.shape)}")
                    return f(x, y)

                return binop
            if ty == "Eltwise":
                op, coeffs = p(0, 0), p(1, [])

                def eltwise(*xs, op=op, coeffs=coeffs):
                    if op == 0:
                        y = xs[0]
                        for t in xs[1:]:
                            y = y * t
                        return y
                    if op == 1:
                        if coeffs:
                            y = xs[0] * coeffs[0]
                            for c, t in zip(coeffs[1:], xs[1:]):
                                y = y + t * c
                            return y
                        y = xs[0]
                        for t in xs[1:]:
                            y = y + t
                        return y
                    if op == 2:
                        y = xs[0]
                        for t in xs[1:]:
                            y = torch.maximum(y, t)
                        return y
                    raise SystemExit(f"Eltwise {l.name}: op_type {op} is not supported")

                return eltwise
            if ty == "Concat":
                axis = p(0, 0)

                def concat(*xs, axis=axis):
                    if is_vec(xs[0]):
                        return torch.cat(xs, dim=1)
                    a = axis + 3 if axis < 0 else axis
                    return torch.cat(xs, dim=a + 1)

                return concat
            if ty == "ReLU":
                slope = float(p(0, 0.0))
                return (lambda x: F.relu(x)) if slope == 0.0 else (lambda x, s=slope: F.leaky_relu(x, s))
            if ty == "Sigmoid":
                return torch.sigmoid
            if ty == "TanH":
                return torch.tanh
            if ty == "Clip":
                lo, hi = float(p(0, -3.4028235e38)), float(p(1, 3.4028235e38))
                return lambda x, lo=lo, hi=hi: x.clamp(lo, hi)
            if ty == "PixelShuffle":
                r, mode = p(0, 1), p(1, 0)
                if mode == 0:
                    return lambda x, r=r: F.pixel_shuffle(x, r)

                def shuffle1(x, r=r):  # out[c][y*r+i][x*r+j] = in[(i*r+j)*C + c][y][x]
                    n, crr, h, w = x.shape
                    c = crr // (r * r)
                    return x.reshape(n, r, r, c, h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c, h * r, w * r)

                return shuffle1
            if ty == "Padding":
                top, bottom, left, right = p(0, 0), p(1, 0), p(2, 0), p(3, 0)
                ptype, value = p(4, 0), float(p(5, 0.0))
                if p(6, 0) or p(7, 0) or p(8, 0):
                    raise SystemExit(f"{l.name}: per-channel or channel-axis Padding is not supported")
                mode = {0: "constant", 1: "replicate", 2: "reflect"}.get(ptype)
                if mode is None:
                    raise SystemExit(f"{l.name}: Padding type {ptype} is not supported")
                pads = (left, right, top, bottom)
                if mode == "constant":
                    return lambda x, pads=pads, v=value: F.pad(x, pads, value=v)
                return lambda x, pads=pads, mode=mode: F.pad(x, pads, mode=mode)
            if ty == "Interp":
                rtype, hs, ws = p(0, 0), float(p(1, 1.0)), float(p(2, 1.0))
                oh, ow, align = p(3, 0), p(4, 0), p(6, 0)
                if p(5, 0) or len(l.bottoms) != 1:
                    raise SystemExit(f"{l.name}: Interp with a dynamic target size is not supported")
                if rtype not in (1, 2):
                    raise SystemExit(f"{l.name}: Interp resize_type {rtype} (only nearest 1 and bilinear 2)")

                def interp(x, rtype=rtype, hs=hs, ws=ws, oh=oh, ow=ow, align=align):
                    if is_vec(x):
                        raise SystemExit("Interp of a 1-D blob is not supported")
                    h, w = x.shape[2], x.shape[3]
                    th, tw = (oh, ow) if (oh and ow) else (int(h * hs), int(w * ws))
                    if rtype == 1:
                        if oh and ow:
                            return F.interpolate(x, size=(th, tw), mode="nearest")
                        # ncnn: source index = (int)(dst * (1 / scale)), as PyTorch with scale_factor
                        return F.interpolate(x, scale_factor=(hs, ws), mode="nearest")
                    return F.interpolate(x, size=(th, tw), mode="bilinear", align_corners=bool(align))

                return interp
            raise SystemExit(f"layer type {ty} ({l.name}) is not supported")

        def forward(self, *inputs):
            if len(inputs) != len(self.input_names):
                raise SystemExit(f"the net has {len(self.input_names)} inputs, got {len(inputs)}")
            blobs = dict(zip(self.input_names, inputs))
            for i, (name, ty, fn, bottoms, tops) in enumerate(self.ops):
                if fn is None:
                    continue
                ys = fn(*(blobs[b] for b in bottoms))
                for b in bottoms:
                    if self.last_use.get(b) == i and b not in self.output_names:
                        del blobs[b]
                if len(tops) == 1:
                    blobs[tops[0]] = ys[0] if isinstance(ys, tuple) else ys
                else:
                    for t, y in zip(tops, ys):
                        blobs[t] = y
            return tuple(blobs[b] for b in self.output_names)

    return NcnnNet()


# ----------------------------------------------------------------------------------
# realcugan-ncnn-vulkan's pre/post-processing (examples-sr/fixtures/make_fixtures.py)
# ----------------------------------------------------------------------------------


def parse_variant(model: str) -> tuple[str, str, int]:
    kind_dir, stem = model.strip("/").split("/")[-2:]
    m = re.fullmatch(r"up([234])x-(conservative|no-denoise|denoise[123]x)", stem)
    if not m or not kind_dir.startswith("models-"):
        raise SystemExit(f"unrecognised model {model!r} (want models-se|pro|nose/upNx-...)")
    return kind_dir, stem, int(m.group(1))


def padding_for(h: int, w: int, scale: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right)"""
    p, m = PREPADDING[scale], ROUND_MULTIPLE[scale]
    return p, p + (-h) % m, p, p + (-w) % m


def make_image(w: int, h: int, seed: int) -> np.ndarray:
    """Seeded 8-bit RGB test image (numpy only): gradients, a hard-edged disc and rectangle,
    2-px stripes, a thin line and mild noise (make_fixtures.py's make_rgb)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, 3), np.float64)
    img[..., 0] = 30 + 200 * x / max(w - 1, 1)
    img[..., 1] = 220 - 180 * y / max(h - 1, 1)
    img[..., 2] = 128 + 90 * np.sin(2 * np.pi * (x + 0.5 * y) / max(w / 2.5, 1))
    cx, cy, r = rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h, 0.22 * min(w, h)
    img[(x - cx) ** 2 + (y - cy) ** 2 <= r * r] = rng.integers(0, 256, 3)
    x0, y0 = int(0.08 * w), int(0.6 * h)
    img[y0 : y0 + max(h // 5, 2), x0 : x0 + max(w // 4, 2)] = rng.integers(0, 256, 3)
    sx, sy = int(0.65 * w), int(0.06 * h)
    block = img[sy : sy + max(h // 6, 2), sx : sx + max(w // 4, 2)]
    stripes = np.arange(block.shape[1]) % 2 == 0
    block[:, stripes] = 240.0
    block[:, ~stripes] = 15.0
    img[np.abs(y - (0.9 * x + 0.05 * h)) < 0.5] = 10.0
    img += rng.normal(0.0, 4.0, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def ncnn_pipeline(ncnn, param: str, bin_: str, img: np.ndarray, scale: int, threads: int):
    """realcugan-ncnn-vulkan's process_cpu on one untiled image, ncnn CPU float32: (8-bit HWC
    result, the padded input, out0 as ncnn returned it)."""
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    net.opt.num_threads = threads
    if net.load_param(param) != 0 or net.load_model(bin_) != 0:
        raise SystemExit(f"ncnn failed to load {param} / {bin_}")
    h, w, _ = img.shape
    t, b, l, r = padding_for(h, w, scale)
    norm = img[..., :3].transpose(2, 0, 1).astype(np.float32) * (np.float32(1.0) / np.float32(255.0))
    padded = np.ascontiguousarray(np.pad(norm, ((0, 0), (t, b), (l, r)), mode="reflect"))
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(padded).clone())
    ret, out = ex.extract("out0")
    if ret != 0:
        raise SystemExit(f"ncnn extract failed ({ret})")
    out = np.array(out).astype(np.float32, copy=False)
    v = out[:, : h * scale, : w * scale] * np.float32(255.0) + np.float32(0.5)
    if scale == 4:
        iy, ix = t + np.arange(h * scale) // 4, l + np.arange(w * scale) // 4
        v = v + padded[:, iy][:, :, ix] * np.float32(255.0)
    return np.clip(np.trunc(v), 0, 255).astype(np.uint8).transpose(1, 2, 0), padded, out


class Upscaler:
    """The module plus realcugan-ncnn-vulkan's processing, on the torch device: uint8 HWC host
    image -> uint8 HWC host image, as our CLI's "upscale" time covers."""

    def __init__(self, net, scale: int, device, dtype, memory_format):
        self.net, self.scale, self.device, self.dtype, self.mf = net, scale, device, dtype, memory_format

    def prepare(self, img_dev_u8):
        import torch
        import torch.nn.functional as F

        h, w = img_dev_u8.shape[0], img_dev_u8.shape[1]
        t, b, l, r = padding_for(h, w, self.scale)
        if max(t, b) >= h or max(l, r) >= w:
            raise SystemExit(f"image {w}x{h} is too small for PyTorch's reflect padding of {t}/{b}/{l}/{r}")
        x = img_dev_u8[..., :3].permute(2, 0, 1).unsqueeze(0).to(torch.float32) * (np.float32(1.0) / np.float32(255.0))
        return F.pad(x, (l, r, t, b), mode="reflect")  # BORDER_REFLECT = numpy/PyTorch "reflect"

    def finish(self, out, padded_f32, h: int, w: int):
        import torch

        s = self.scale
        v = out[:, :, : h * s, : w * s].to(torch.float32) * 255.0 + 0.5
        if s == 4:
            t, _, l, _ = padding_for(h, w, s)
            res = padded_f32[:, :, t : t + h, l : l + w]
            v = v + res.repeat_interleave(4, dim=2).repeat_interleave(4, dim=3) * 255.0
        return v.trunc_().clamp_(0, 255).to(torch.uint8)[0].permute(1, 2, 0)

    def __call__(self, img_host_u8: np.ndarray) -> np.ndarray:
        import torch

        h, w = img_host_u8.shape[:2]
        x = torch.from_numpy(np.ascontiguousarray(img_host_u8)).to(self.device)
        padded = self.prepare(x)
        y = self.net(padded.to(self.dtype).contiguous(memory_format=self.mf))[0]
        res = self.finish(y, padded, h, w).cpu().numpy()
        return res


def import_ncnn(path: str | None):
    if path:
        if os.path.isfile(path):
            d = tempfile.mkdtemp(prefix="rv-ncnn-")
            if path.endswith((".zip", ".whl")):
                import zipfile

                zipfile.ZipFile(path).extractall(d)
            else:
                import tarfile

                with tarfile.open(path) as tf:
                    kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                    tf.extractall(d, **kw)
            # the archive holds either the package folder or a site folder with it
            hits = [root for root, dirs, _ in os.walk(d) if "ncnn" in dirs]
            path = hits[0] if hits else d
        sys.path.insert(0, path)
    try:
        import ncnn  # noqa: F401

        return ncnn, None
    except Exception as e:  # ImportError, or a wheel for another Python (a missing .so)
        return None, f"{type(e).__name__}: {e}"


def level_diff(a: np.ndarray, b: np.ndarray) -> dict:
    if a.shape != b.shape:
        raise SystemExit(f"check: shapes differ: {a.shape} vs {b.shape}")
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return {"max_level_diff": int(d.max()), "mean_level_diff": round(float(d.mean()), 5),
            "values_over_1_level": int((d > 1).sum()), "values": int(d.size)}


def parse_size(s: str) -> tuple[int, int]:
    w, h = (int(v) for v in s.lower().split("x"))
    return w, h


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")

    def common(p):
        p.add_argument("--ncnn-path", help="folder (or .tar.xz/.zip/.whl) to put first on sys.path for `import ncnn`")
        p.add_argument("--device", help="cuda (default when available) or cpu")
        p.add_argument("--dtype", choices=sorted(DTYPES), default="f16")

    def bench_args(p):
        common(p)
        p.add_argument("--model-dir", help="folder holding models-se/ models-pro/ models-nose/ (default: models/, "
                                           "else .device-carry/apps/models/)")
        p.add_argument("--model", default="models-se/up2x-no-denoise")
        p.add_argument("--size", default="1920x1080", help="timed image WxH (the net input is padded)")
        p.add_argument("--image", help="time this PNG instead of the seeded image of --size (needs pillow)")
        p.add_argument("--reps", type=int, default=10)
        p.add_argument("--warmup", type=int, default=3)
        p.add_argument("--check-size", default="128x128", help="image WxH of the check against ncnn")
        p.add_argument("--max-level-diff", type=int, default=1)
        p.add_argument("--skip-check", action="store_true", help="time without the check (record: skipped)")
        p.add_argument("--no-time", action="store_true", help="check only")
        p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default) and ncnn (2)")
        p.add_argument("--nchw", action="store_true", help="contiguous NCHW instead of channels_last")
        p.add_argument("--no-cudnn-benchmark", action="store_true")
        p.add_argument("--compile", action="store_true", help="torch.compile the module (off: eager is the anchor)")
        p.add_argument("--save-npy", help="write the timed image's 8-bit result (HWC .npy)")

    bench_args(sub.add_parser("bench", help="check against ncnn, then time (the default)"))
    common(sub.add_parser("selftest", help="every supported layer type through ncnn and the module"))
    argv = sys.argv[1:]
    if not argv or argv[0] not in ("bench", "selftest", "-h", "--help"):
        argv = ["bench"] + argv
    args = ap.parse_args(argv)
    if args.cmd == "selftest":
        return cmd_selftest(args)
    return cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
