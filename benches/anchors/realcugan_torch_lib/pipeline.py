"""realcugan-ncnn-vulkan's pre/post-processing, ncnn itself, and small helpers of the commands."""
from __future__ import annotations

import os
import re
import sys
import tempfile

import numpy as np

from .common import PREPADDING, ROUND_MULTIPLE

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
