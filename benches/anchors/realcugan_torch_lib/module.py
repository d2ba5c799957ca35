"""The .param graph as a torch.nn.Module (torch is imported when the module is built)."""
from __future__ import annotations

import re

import numpy as np

from .ncnn_files import NcnnLayer

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
