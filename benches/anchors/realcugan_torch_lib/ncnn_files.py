"""ncnn's .param / .bin files, read as ncnn reads them."""
from __future__ import annotations

import struct

import numpy as np

from .common import TAG_FP16, TAG_FP32, TAG_FP32_RAW, TAG_INT8, log

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
