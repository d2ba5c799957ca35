#!/usr/bin/env python3
"""Compile the kernel sources with NVRTC (no GPU needed), and optionally run them.

    scripts/nvrtc-check.py [--arch sm_90] [--nvrtc LIB] [--include DIR] [SOURCE...]
    scripts/nvrtc-check.py --run            # also launch every kernel family on the GPU
    scripts/nvrtc-check.py --run --bench    # and time the convolution kernels against cuDNN

Compile check: every kernels/src/*.hip goes to NVRTC as a string, with the headers of
kernels/src (prelude.h, and mma.h, which igemm_mma.hip includes) as in-memory headers under
their file names (as the backend and the HIP-on-CUDA test library hand them over) and
-I<dir of cuda_fp16.h>; the PTX must hold an `.entry` for every
`RV_EXPORT_<KIND>(symbol, ...)` line of the source. NVRTC comes from the pip wheels
nvidia-cuda-nvrtc-cu12 + nvidia-cuda-runtime-cu12 (headers), searched for on sys.path,
under /opt/rocm-vision/nvrtc-cu12 (pip install --target there), and in /usr/local/cuda;
or give --nvrtc and --include.

--run (needs an NVIDIA GPU, PyTorch and libcuda): loads the PTX through the CUDA driver API
(ctypes) and checks every kernel family against PyTorch on random data -- all dtypes,
strided and broadcast views, odd sizes, every igemm configuration with stride, asymmetric
padding, dilation and groups. This runs the kernels' logic on real hardware with warpSize
32; it proves nothing about wave64 or AMD code generation.

Exit status: 0 when everything compiled (and every check passed), 1 otherwise.
"""
import argparse
import ctypes
import glob
import os
import re
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_DIR = os.path.join(REPO, "kernels", "src")
EXPORT = re.compile(r"^RV_EXPORT_[A-Z0-9_]+\(\s*([a-z][a-z0-9_]*)\s*,(.*)\)\s*$", re.M)


def search_roots():
    roots = [p for p in sys.path if p and os.path.isdir(p)]
    roots += ["/opt/rocm-vision/nvrtc-cu12", "/usr/local/cuda", "/usr/local/cuda/targets/x86_64-linux"]
    return roots


def find_nvrtc():
    pats = ["nvidia/cuda_nvrtc/lib/libnvrtc.so*", "nvidia/cu13/lib/libnvrtc.so*", "lib64/libnvrtc.so*", "lib/libnvrtc.so*"]
    for root in search_roots():
        for pat in pats:
            for f in sorted(glob.glob(os.path.join(root, pat))):
                base = os.path.basename(f)
                if "builtins" not in base and ".alt." not in base:
                    return f
    return None


def find_include():
    pats = ["nvidia/cuda_runtime/include", "nvidia/cu13/include", "include"]
    for root in search_roots():
        for pat in pats:
            d = os.path.join(root, pat)
            if os.path.exists(os.path.join(d, "cuda_fp16.h")):
                return d
    return None


class Nvrtc:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"

    def compile(self, source, name, headers, options, cubin=False):
        """Returns (ok, ptx bytes -- or with cubin=True the machine code of a real
        --gpu-architecture=sm_XY, which the driver loads without compiling again --, log text)."""
        lib, prog = self.lib, ctypes.c_void_p()
        hnames = list(headers)
        hsrc = (ctypes.c_char_p * len(hnames))(*[headers[h].encode() for h in hnames])
        hn = (ctypes.c_char_p * len(hnames))(*[h.encode() for h in hnames])
        r = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), len(hnames), hsrc, hn)
        if r != 0:
            return False, b"", f"nvrtcCreateProgram: {lib.nvrtcGetErrorString(r).decode()}"
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        r = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        ptx = b""
        if r == 0 and cubin:
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            pbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, pbuf)
            ptx = pbuf.raw
        elif r == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            pbuf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, pbuf)
            ptx = pbuf.raw
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        if r != 0:
            log = f"{lib.nvrtcGetErrorString(r).decode()}\n{log}"
        return r == 0, ptx, log


def compile_all(nvrtc, include, arch, files):
    # Every header of kernels/src, whichever a source includes: NVRTC ignores the others.
    headers = {os.path.basename(h): open(h).read() for h in sorted(glob.glob(os.path.join(SRC_DIR, "*.h")))}
    options = [f"--gpu-architecture={arch}", f"-I{include}", "--std=c++17"]
    # CUDA 13's fp16/bf16 headers include CCCL headers that live under include/cccl.
    if os.path.isdir(os.path.join(include, "cccl")):
        options.append(f"-I{os.path.join(include, 'cccl')}")
    ptxs, failures = {}, 0
    for path in files:
        name = os.path.basename(path)
        src = open(path).read()
        t0 = time.time()
        ok, ptx, log = nvrtc.compile(src, name, headers, options)
        secs = time.time() - t0
        if not ok:
            print(f"  {name:18s} COMPILE FAILED ({secs:.1f} s):\n{log}")
            failures += 1
            continue
        entries = set(re.findall(rb"\.entry\s+([A-Za-z0-9_]+)\s*\(", ptx))
        expected = [m.group(1) for m in EXPORT.finditer(src)]
        missing = [e for e in expected if e.encode() not in entries]
        print(f"  {name:18s} ok: {len(ptx):8d} bytes PTX, {len(expected) - len(missing):3d}/{len(expected):3d} entry points, {secs:.1f} s")
        if log:
            print("    log: " + log.replace("\n", "\n    "))
        if missing or not expected:
            print(f"    MISSING: {missing}")
            failures += 1
        ptxs[name] = ptx
    return ptxs, failures


# ----------------------------------------------------------------------------------------
# --run: launch on an NVIDIA GPU through the driver API, compare with PyTorch.

class Strided(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int64), ("contiguous", ctypes.c_int64),
                ("dims", ctypes.c_int64 * 6), ("strides", ctypes.c_int64 * 6)]


class Conv2d(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in
                ["n", "c", "h", "w", "k", "r", "s", "p", "q", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups"]]


def run_checks(ptxs, bench=False):
    import torch
    import torch.nn.functional as F

    assert ctypes.sizeof(Strided) == 112 and ctypes.sizeof(Conv2d) == 64
    torch.manual_seed(0)
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # creates and makes current the primary context
    cuda = ctypes.CDLL("libcuda.so.1")
    modules, funcs = {}, {}
    for name, ptx in ptxs.items():
        mod = ctypes.c_void_p()
        r = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx))
        if r != 0:
            raise RuntimeError(f"cuModuleLoadData({name}) failed: {r}")
        modules[name] = mod

    def fn(sym):
        if sym not in funcs:
            for mod in modules.values():
                f = ctypes.c_void_p()
                if cuda.cuModuleGetFunction(ctypes.byref(f), mod, sym.encode()) == 0:
                    funcs[sym] = f
                    break
            else:
                raise KeyError(sym)
        return funcs[sym]

    launched = set()

    def launch(sym, grid, block, *args):
        holders = []
        for a in args:
            if isinstance(a, torch.Tensor):
                holders.append(ctypes.c_void_p(a.data_ptr()))
            elif a is None:
                holders.append(ctypes.c_void_p(0))
            else:
                holders.append(a)
        params = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        r = cuda.cuLaunchKernel(fn(sym), *[ctypes.c_uint(x) for x in grid], *[ctypes.c_uint(x) for x in block],
                                ctypes.c_uint(0), ctypes.c_void_p(0), params, ctypes.c_void_p(0))
        if r != 0:
            raise RuntimeError(f"cuLaunchKernel({sym}) failed: {r}")
        r = cuda.cuCtxSynchronize()
        if r != 0:
            raise RuntimeError(f"{sym} failed while running: CUDA error {r}")
        launched.add(sym)

    i64, i32, f64 = ctypes.c_int64, ctypes.c_int32, ctypes.c_double
    FL = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
    ALL = dict(FL, u8=torch.uint8, u32=torch.int32, i64=torch.int64)  # u32 stored in int32 tensors (values < 2^31)
    BITS = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}
    tol = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2, "f64": 1e-12}
    failures = []

    def check(label, got, want, rtol):
        got64, want64 = got.double(), want.double()
        scale = max(want64.abs().max().item() if want64.numel() else 0.0, 1e-30)
        err = (got64 - want64).abs()
        err = torch.where(torch.isnan(got64) & torch.isnan(want64), torch.zeros_like(err), err)
        bad = err.max().item() if err.numel() else 0.0
        if not (bad <= rtol * scale) or (torch.isnan(err).any().item()):
            failures.append(f"{label}: max error {bad:.3g} (scale {scale:.3g}, rtol {rtol})")

    def view(t):
        l = Strided()
        l.rank = t.dim()
        for i in range(t.dim()):
            l.dims[i] = t.shape[i]
            l.strides[i] = t.stride(i)
        l.contiguous = int(t.is_contiguous())
        return l

    def grid1(n, block=256):
        return (min(max((n + block - 1) // block, 1), 65535),)

    # Unary and affine, through a transposed (non-contiguous) view.
    ops = {
        "neg": lambda x: -x, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "abs": torch.abs,
        "relu": torch.relu, "silu": F.silu, "gelu": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_erf": lambda x: F.gelu(x), "sigmoid": torch.sigmoid, "tanh": torch.tanh, "sin": torch.sin,
        "cos": torch.cos, "recip": lambda x: 1 / x, "sqr": lambda x: x * x, "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    }
    for dt, tdt in FL.items():
        base = torch.randn(37, 53, device=dev, dtype=torch.float64) * 2
        for op, ref in ops.items():
            x64 = base.abs() + 0.1 if op in ("log", "sqrt", "recip") else base
            x = x64.to(tdt).t()  # [53, 37] view with strides (1, 53)
            out = torch.empty(x.shape, device=dev, dtype=tdt)
            launch(f"unary_{op}_{dt}", grid1(x.numel()), (256,), i64(x.numel()), view(x), x, out, f64(0.1))
            check(f"unary_{op}_{dt}", out, ref(x.double()), tol[dt] * (4 if op in ("exp", "sqr") else 1))
        x = base.to(tdt).t()
        out = torch.empty(x.shape, device=dev, dtype=tdt)
        launch(f"affine_{dt}", grid1(x.numel()), (256,), i64(x.numel()), view(x), x, out, f64(1.5), f64(-0.25))
        check(f"affine_{dt}", out, x.double() * 1.5 - 0.25, tol[dt])

    # Binary with broadcasting on both sides.
    bops = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": None, "maximum": torch.maximum, "minimum": torch.minimum}
    for dt, tdt in ALL.items():
        a = (torch.rand(4, 1, 5, device=dev) * 20 + 1).to(tdt)
        b = (torch.rand(3, 5, device=dev) * 20 + 1).to(tdt)
        av, bv = a.expand(4, 3, 5), b.expand(4, 3, 5)
        for op, ref in bops.items():
            out = torch.empty(4, 3, 5, device=dev, dtype=tdt)
            launch(f"binary_{op}_{dt}", grid1(out.numel()), (256,), i64(out.numel()), view(av), view(bv), a, b, out)
            if op == "div":
                want = torch.div(av, bv, rounding_mode="trunc") if not tdt.is_floating_point else av.double() / bv.double()
            else:
                want = ref(av.double(), bv.double()) if tdt.is_floating_point else ref(av, bv)
            check(f"binary_{op}_{dt}", out, want, tol.get(dt, 0.0))

    # Cast: small integers convert exactly between every pair; then rounding of floats.
    ints = torch.randint(0, 120, (3, 41), device=dev)
    for s, sdt in ALL.items():
        for d, ddt in ALL.items():
            if s == d:
                continue
            x = ints.to(sdt).t()
            out = torch.empty(x.shape, device=dev, dtype=ddt)
            launch(f"cast_{s}_{d}", grid1(x.numel()), (256,), i64(x.numel()), view(x), x, out)
            check(f"cast_{s}_{d}", out, x.to(torch.int64), 0.0)
    r = torch.randn(1000, device=dev, dtype=torch.float64) * 100
    for s, d in [("f32", "f16"), ("f32", "bf16"), ("f64", "f32"), ("f16", "bf16"), ("bf16", "f16"), ("f32", "i64"), ("f64", "i64")]:
        x = r.to(FL[s])
        ddt = ALL[d]
        out = torch.empty(x.shape, device=dev, dtype=ddt)
        launch(f"cast_{s}_{d}", grid1(x.numel()), (256,), i64(x.numel()), view(x), x, out)
        want = x.to(ddt) if ddt.is_floating_point else x.double().trunc().to(ddt)
        check(f"cast_{s}_{d} rounding", out, want, 0.0)

    # Fill.
    vals = {"f32": (ctypes.c_float(2.5), 2.5), "f64": (ctypes.c_double(-3.25), -3.25), "u8": (ctypes.c_uint8(7), 7),
            "u32": (ctypes.c_uint32(123456), 123456), "i64": (ctypes.c_int64(-(2 ** 40)), -(2 ** 40))}
    for dt in ("f16", "bf16"):
        bits = torch.tensor([1.5], dtype=FL[dt]).view(torch.int16).item() & 0xFFFF
        vals[dt] = (ctypes.c_uint16(bits), 1.5)
    for dt, (cval, want) in vals.items():
        out = torch.zeros(1001, device=dev, dtype=ALL[dt])
        launch(f"fill_{dt}", grid1(1001), (256,), i64(1001), out, cval)
        check(f"fill_{dt}", out, torch.full((1001,), want, dtype=torch.float64, device=dev), 0.0)

    # Data movement, per element size.
    for size, tdt in {1: torch.uint8, 2: torch.float16, 4: torch.float32, 8: torch.int64}.items():
        b = BITS[size]
        x = (torch.rand(3, 4, 5, 6, device=dev) * 100).to(tdt).permute(2, 0, 3, 1)
        out = torch.empty(x.shape, device=dev, dtype=tdt)
        launch(f"copy_strided_{b}", grid1(x.numel()), (256,), i64(x.numel()), view(x), x, out)
        check(f"copy_strided_{b}", out, x, 0.0)
        src = (torch.rand(7, 13, device=dev) * 100).to(tdt)
        dst = torch.zeros(7, 20, device=dev, dtype=tdt)
        launch(f"copy2d_{b}", grid1(7 * 9), (256,), i64(7), i64(9), i64(13), i64(20), src[:, 2:], dst[:, 5:])
        want = torch.zeros_like(dst)
        want[:, 5:14] = src[:, 2:11]
        check(f"copy2d_{b}", dst, want, 0.0)
        x = (torch.rand(3, 45, 70, device=dev) * 100).to(tdt)
        out = torch.empty(3, 70, 45, device=dev, dtype=tdt)
        launch(f"transpose2d_{b}", ((70 + 31) // 32, (45 + 31) // 32, 3), (32, 8), i64(3), i32(45), i32(70), x, out)
        check(f"transpose2d_{b}", out, x.transpose(1, 2), 0.0)
        x = (torch.rand(2, 3, 9, 11, device=dev) * 100).to(torch.float32)
        for mode, tmode in [("zero", "constant"), ("reflect", "reflect"), ("replicate", "replicate")]:
            pads = (3, 1, 2, 4)  # left, right, top, bottom
            want = F.pad(x, pads, mode=tmode).to(tdt)
            xs = x.to(tdt)
            out = torch.empty(want.shape, device=dev, dtype=tdt)
            launch(f"pad2d_{mode}_{b}", grid1(out.numel()), (256,), i64(6), i32(9), i32(11), i32(2), i32(3),
                   i32(out.shape[2]), i32(out.shape[3]), xs, out)
            check(f"pad2d_{mode}_{b}", out, want, 0.0)
        # im2col per element size (the float dtypes are covered again with the convolutions).
        img = (torch.rand(3, 9, 11, device=dev) * 100).to(tdt)
        g0 = Conv2d(n=1, c=3, h=9, w=11, k=1, r=3, s=3, p=5, q=6, stride_h=2, stride_w=2, pad_h=1, pad_w=1,
                    dil_h=1, dil_w=1, groups=1)
        col = torch.empty(27, 30, device=dev, dtype=tdt)
        launch(f"im2col_{b}", (1, 27), (256,), g0, i64(0), i64(30), img, col)
        want = F.unfold(img.double().unsqueeze(0), (3, 3), padding=1, stride=2)[0]
        check(f"im2col_{b}", col, want, 0.0)
        for oh, ow in [(18, 22), (13, 16)]:
            xs = x.to(tdt)
            out = torch.empty(2, 3, oh, ow, device=dev, dtype=tdt)
            launch(f"upsample_nearest2d_{b}", grid1(out.numel()), (256,), i64(6), i32(9), i32(11), i32(oh), i32(ow), xs, out)
            ys = (torch.arange(oh, device=dev) * 9) // oh
            xs_ = (torch.arange(ow, device=dev) * 11) // ow
            check(f"upsample_nearest2d_{b} {oh}x{ow}", out, xs[:, :, ys][:, :, :, xs_], 0.0)

    # Reductions, softmax.
    for dt, tdt in FL.items():
        x = torch.randn(7, 300, device=dev, dtype=torch.float64).to(tdt)
        x[3, 17] = 50  # a clear maximum
        for op, ref in {"sum": lambda t, d: t.sum(d), "max": lambda t, d: t.amax(d), "min": lambda t, d: t.amin(d)}.items():
            out = torch.empty(7, device=dev, dtype=tdt)
            launch(f"reduce_{op}_lastdim_{dt}", (7,), (256,), i64(7), i64(300), x, out)
            check(f"reduce_{op}_lastdim_{dt}", out, ref(x.double(), 1), tol[dt] * (10 if op == "sum" else 1))
            x3 = x.reshape(7, 30, 10)
            out = torch.empty(7, 10, device=dev, dtype=tdt)
            launch(f"reduce_{op}_strided_{dt}", grid1(70), (256,), i64(7), i64(30), i64(10), x3, out)
            check(f"reduce_{op}_strided_{dt}", out, ref(x3.double(), 1), tol[dt] * (10 if op == "sum" else 1))
        for op, ref in {"argmax": torch.argmax, "argmin": torch.argmin}.items():
            out = torch.empty(7, device=dev, dtype=torch.int32)
            launch(f"reduce_{op}_lastdim_{dt}", (7,), (256,), i64(7), i64(300), x, out)
            check(f"reduce_{op}_lastdim_{dt}", out, ref(x.double(), 1), 0.0)
            x3 = x.reshape(7, 30, 10)
            out = torch.empty(7, 10, device=dev, dtype=torch.int32)
            launch(f"reduce_{op}_strided_{dt}", grid1(70), (256,), i64(7), i64(30), i64(10), x3, out)
            check(f"reduce_{op}_strided_{dt}", out, ref(x3.double(), 1), 0.0)
        for op, ref in {"softmax": torch.softmax, "log_softmax": torch.log_softmax}.items():
            out = torch.empty_like(x)
            launch(f"{op}_lastdim_{dt}", (7,), (128,), i64(7), i64(300), x, out)
            check(f"{op}_lastdim_{dt}", out, ref(x.double(), 1), tol[dt] * 2)

    # Normalisation.
    for dt, tdt in FL.items():
        n, c, h, w, groups, chunks = 2, 12, 13, 17, 3, 5
        x = (torch.randn(n, c, h, w, device=dev, dtype=torch.float64) * 3 + 1).to(tdt)
        gamma = torch.randn(c, device=dev, dtype=torch.float64).to(tdt)
        beta = torch.randn(c, device=dev, dtype=torch.float64).to(tdt)
        partial = torch.empty(n * groups * chunks * 3, device=dev, dtype=torch.float32)
        for affine in (True, False):
            for silu in (0, 1):
                out = torch.empty_like(x)
                launch(f"group_norm_stats_{dt}", (chunks, groups, n), (256,), i32(n), i32(c), i64(h * w), i32(groups), i32(chunks), x, partial)
                launch(f"group_norm_apply_{dt}", (chunks, groups, n), (256,), i32(n), i32(c), i64(h * w), i32(groups), i32(chunks),
                       partial, f64(1e-5), gamma if affine else None, beta if affine else None, x, out, i32(silu))
                want = F.group_norm(x.double(), groups, gamma.double() if affine else None, beta.double() if affine else None, 1e-5)
                if silu:
                    want = F.silu(want)
                check(f"group_norm_{dt} affine={affine} silu={silu}", out, want, max(tol[dt], 1e-5) * 2)
        rows, cols = 9, 333
        x = (torch.randn(rows, cols, device=dev, dtype=torch.float64) * 2 + 3).to(tdt)
        gamma = torch.randn(cols, device=dev, dtype=torch.float64).to(tdt)
        beta = torch.randn(cols, device=dev, dtype=torch.float64).to(tdt)
        out = torch.empty_like(x)
        launch(f"layer_norm_{dt}", (rows,), (256,), i64(rows), i64(cols), f64(1e-5), gamma, beta, x, out)
        check(f"layer_norm_{dt}", out, F.layer_norm(x.double(), (cols,), gamma.double(), beta.double(), 1e-5), max(tol[dt], 1e-5) * 2)
        launch(f"layer_norm_{dt}", (rows,), (64,), i64(rows), i64(cols), f64(1e-5), None, None, x, out)
        check(f"layer_norm_{dt} no affine", out, F.layer_norm(x.double(), (cols,), None, None, 1e-5), max(tol[dt], 1e-5) * 2)
        launch(f"rms_norm_{dt}", (rows,), (256,), i64(rows), i64(cols), f64(1e-6), gamma, None, x, out)
        want = x.double() * torch.rsqrt((x.double() ** 2).mean(1, keepdim=True) + 1e-6) * gamma.double()
        check(f"rms_norm_{dt}", out, want, max(tol[dt], 1e-5) * 2)

    # Convolutions. Geometry: input [n, c, h, w]; padding (top, left) plus implied ends.
    def geom(n, c, h, w, k, r, s, stride, pad, dil, groups, transposed=False, out_pad=(0, 0), end_pad=None):
        g = Conv2d()
        end_pad = end_pad or pad
        if transposed:
            p = (h - 1) * stride[0] - pad[0] - end_pad[0] + dil[0] * (r - 1) + out_pad[0] + 1
            q = (w - 1) * stride[1] - pad[1] - end_pad[1] + dil[1] * (s - 1) + out_pad[1] + 1
        else:
            p = (h + pad[0] + end_pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
            q = (w + pad[1] + end_pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
        for name, v in dict(n=n, c=c, h=h, w=w, k=k, r=r, s=s, p=p, q=q, stride_h=stride[0], stride_w=stride[1],
                            pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1], groups=groups).items():
            setattr(g, name, v)
        return g

    def conv_ref(x, wt, b, g, end_pad):
        xp = F.pad(x, (g.pad_w, end_pad[1], g.pad_h, end_pad[0]))
        return F.conv2d(xp, wt, b, (g.stride_h, g.stride_w), 0, (g.dil_h, g.dil_w), g.groups)

    fwd_cases = [
        # n, c, h, w, k, r, s, stride, pad(begin), dil, groups, end_pad
        (2, 8, 19, 23, 12, 3, 3, (1, 1), (1, 1), (1, 1), 1, (1, 1)),
        (1, 6, 17, 20, 9, 3, 2, (2, 3), (2, 0), (1, 2), 3, (0, 1)),
        (2, 16, 11, 13, 40, 1, 1, (1, 1), (0, 0), (1, 1), 1, (0, 0)),
        (1, 4, 33, 31, 3, 5, 5, (1, 2), (3, 2), (2, 1), 1, (1, 2)),
        (3, 20, 9, 10, 150, 3, 3, (1, 1), (1, 1), (1, 1), 2, (1, 1)),
    ]
    tconv_cases = [
        # n, c(in), h, w, k(out), r, s, stride, pad, dil, groups, out_pad
        (2, 8, 9, 11, 6, 3, 3, (2, 2), (1, 1), (1, 1), 1, (1, 1)),
        (1, 6, 7, 8, 9, 4, 4, (2, 3), (1, 0), (1, 2), 3, (0, 2)),
        (2, 12, 5, 6, 20, 2, 2, (2, 2), (0, 0), (1, 1), 1, (0, 0)),
        (1, 4, 10, 9, 3, 3, 3, (1, 1), (2, 1), (2, 1), 1, (0, 0)),
    ]
    for dt, tdt in FL.items():
        rt = max(tol[dt], 1e-5) * 8
        for case in fwd_cases:
            n, c, h, w, k, r, s, stride, pad, dil, groups, end_pad = case
            g = geom(n, c, h, w, k, r, s, stride, pad, dil, groups, end_pad=end_pad)
            x = torch.randn(n, c, h, w, device=dev, dtype=torch.float64).to(tdt)
            wt = torch.randn(k, c // groups, r, s, device=dev, dtype=torch.float64).to(tdt)
            b = torch.randn(k, device=dev, dtype=torch.float64).to(tdt)
            want = conv_ref(x.double(), wt.double(), b.double(), g, end_pad)
            assert want.shape[2:] == (g.p, g.q), (want.shape, g.p, g.q)
            out = torch.empty(want.shape, device=dev, dtype=tdt)
            launch(f"conv2d_direct_{dt}", grid1(out.numel()), (256,), g, x, wt, b, out)
            check(f"conv2d_direct_{dt} {case}", out, want, rt)
            if dt != "f64":
                for cfg, (bm, bn) in {"64x64x16_4x4": (64, 64), "128x128x8_8x8": (128, 128), "128x16x16_4x2": (128, 16)}.items():
                    for bias in (b, None):
                        out.fill_(float("nan"))
                        kg = k // groups
                        launch(f"igemm_fwd_{cfg}_{dt}", ((n * g.p * g.q + bm - 1) // bm, (kg + bn - 1) // bn, groups), (256,),
                               g, x, wt, bias, out)
                        ref = want if bias is not None else want - b.double().view(1, -1, 1, 1)
                        check(f"igemm_fwd_{cfg}_{dt} {case} bias={bias is not None}", out, ref, rt)
            # im2col / col2im on image 1 (or 0), whole range and a chunk.
            if groups == 1:
                img = x[n - 1]
                cols = F.unfold(F.pad(img.double().unsqueeze(0), (g.pad_w, end_pad[1], g.pad_h, end_pad[0])),
                                (r, s), dilation=dil, stride=stride)[0]
                bsuf = BITS[torch.empty(0, dtype=tdt).element_size()]
                pq = g.p * g.q
                col = torch.empty(c * r * s, pq, device=dev, dtype=tdt)
                launch(f"im2col_{bsuf}", ((pq + 255) // 256, min(c * r * s, 65535)), (256,), g, i64(0), i64(pq), img, col)
                check(f"im2col_{bsuf} {case}", col, cols, 0.0)
                chunk = torch.empty(c * r * s, 7, device=dev, dtype=tdt)
                launch(f"im2col_{bsuf}", (1, min(c * r * s, 65535)), (256,), g, i64(5), i64(7), img, chunk)
                check(f"im2col_{bsuf} chunk {case}", chunk, cols[:, 5:12], 0.0)
                if end_pad == pad:
                    colr = torch.randn(c * r * s, pq, device=dev, dtype=torch.float64).to(tdt)
                    im = torch.empty(c, h, w, device=dev, dtype=tdt)
                    launch(f"col2im_{dt}", grid1(im.numel()), (256,), g, colr, im)
                    want_im = F.fold(colr.double().unsqueeze(0), (h, w), (r, s), dilation=dil, padding=pad, stride=stride)[0]
                    check(f"col2im_{dt} {case}", im, want_im, rt)
        for case in tconv_cases:
            n, c, h, w, k, r, s, stride, pad, dil, groups, out_pad = case
            g = geom(n, c, h, w, k, r, s, stride, pad, dil, groups, transposed=True, out_pad=out_pad)
            x = torch.randn(n, c, h, w, device=dev, dtype=torch.float64).to(tdt)
            wt = torch.randn(c, k // groups, r, s, device=dev, dtype=torch.float64).to(tdt)
            b = torch.randn(k, device=dev, dtype=torch.float64).to(tdt)
            want = F.conv_transpose2d(x.double(), wt.double(), b.double(), stride, pad, out_pad, groups, dil)
            assert want.shape[2:] == (g.p, g.q), (want.shape, g.p, g.q)
            out = torch.empty(want.shape, device=dev, dtype=tdt)
            launch(f"conv_transpose2d_direct_{dt}", grid1(out.numel()), (256,), g, x, wt, b, out)
            check(f"conv_transpose2d_direct_{dt} {case}", out, want, rt)
            if dt != "f64":
                for cfg, (bm, bn) in {"64x64x16_4x4": (64, 64), "128x128x8_8x8": (128, 128), "128x16x16_4x2": (128, 16)}.items():
                    out.fill_(float("nan"))
                    kg = k // groups
                    launch(f"igemm_tconv_{cfg}_{dt}", ((n * g.p * g.q + bm - 1) // bm, (kg + bn - 1) // bn, groups), (256,),
                           g, x, wt, b, out)
                    check(f"igemm_tconv_{cfg}_{dt} {case}", out, want, rt)

    # The checker itself must see a difference.
    n_before = len(failures)
    check("canary", torch.ones(3, device=dev), torch.ones(3, device=dev) * 1.001, 1e-4)
    if len(failures) != n_before + 1:
        failures.append("the comparison function accepted a wrong result")
    else:
        failures.pop()

    all_entries = set()
    for name in ptxs:
        all_entries |= {m.group(1) for m in EXPORT.finditer(open(os.path.join(SRC_DIR, name)).read())}
    not_run = sorted(all_entries - launched)
    print(f"--run: launched {len(launched)} of {len(all_entries)} entry points; {len(failures)} failed checks")
    if not_run:
        print("  not launched: " + " ".join(not_run))
    for f in failures:
        print("  FAIL " + f)
    if bench:
        run_bench(launch, Conv2d, dev)
    return len(failures) + len(not_run)


def run_bench(launch, Conv2d, dev):
    """Times the convolution kernels against PyTorch (cuDNN) on a few SD-VAE shapes."""
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def timed(fn, reps=10):
        fn()
        torch.cuda.synchronize()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(reps):
            fn()
        t1.record()
        torch.cuda.synchronize()
        return t0.elapsed_time(t1) / reps

    shapes = [(1, 512, 128, 128, 512), (1, 256, 256, 256, 256), (1, 128, 512, 512, 128), (1, 128, 512, 512, 3)]
    print("--bench: 3x3 stride-1 pad-1 convolutions, ms per call (TFLOP/s); launches include a context sync")
    for dt, tdt in {"f16": torch.float16, "f32": torch.float32}.items():
        for n, c, h, w, k in shapes:
            g = Conv2d(n=n, c=c, h=h, w=w, k=k, r=3, s=3, p=h, q=w, stride_h=1, stride_w=1, pad_h=1, pad_w=1,
                       dil_h=1, dil_w=1, groups=1)
            x = torch.randn(n, c, h, w, device=dev, dtype=tdt)
            wt = torch.randn(k, c, 3, 3, device=dev, dtype=tdt) * 0.05
            out = torch.empty(n, k, h, w, device=dev, dtype=tdt)
            flop = 2.0 * n * k * h * w * c * 9
            res = {"cudnn": timed(lambda: F.conv2d(x, wt, None, 1, 1))}
            for cfg, (bm, bn) in {"64x64x16_4x4": (64, 64), "128x128x8_8x8": (128, 128), "128x16x16_4x2": (128, 16)}.items():
                grid = ((n * h * w + bm - 1) // bm, (k + bn - 1) // bn, 1)
                res[cfg] = timed(lambda: launch(f"igemm_fwd_{cfg}_{dt}", grid, (256,), g, x, wt, None, out), reps=3)
            line = ", ".join(f"{name} {ms:.2f} ({flop / ms / 1e9:.1f})" for name, ms in res.items())
            print(f"  {dt} {n}x{c}x{h}x{w} -> {k}: {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="*", help="kernel sources (default: kernels/src/*.hip)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvrtc", help="path to libnvrtc.so")
    ap.add_argument("--include", help="directory with cuda_fp16.h / cuda_bf16.h")
    ap.add_argument("--run", action="store_true", help="also launch and check every kernel on an NVIDIA GPU (PyTorch)")
    ap.add_argument("--bench", action="store_true", help="with --run: time the convolution kernels against cuDNN")
    a = ap.parse_args()
    lib = a.nvrtc or find_nvrtc()
    inc = a.include or find_include()
    if not lib or not inc:
        print("nvrtc-check: NVRTC or the CUDA headers not found; install them with\n"
              "  pip install --target /opt/rocm-vision/nvrtc-cu12 nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12\n"
              "or pass --nvrtc and --include", file=sys.stderr)
        return 2
    files = a.sources or sorted(glob.glob(os.path.join(SRC_DIR, "*.hip")))
    nvrtc = Nvrtc(lib)
    print(f"NVRTC {nvrtc.version} ({lib}), headers {inc}, --gpu-architecture={a.arch}")
    ptxs, failures = compile_all(nvrtc, inc, a.arch, files)
    if a.run and not failures:
        failures += run_checks(ptxs, a.bench)
    print("nvrtc-check: " + ("ok" if not failures else f"FAILED ({failures})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
