#!/usr/bin/env python3
"""The NHWC implicit-GEMM kernels of kernels/src/igemm_mma.hip on an NVIDIA GPU, without
the Rust build: compiled with NVRTC (as the HIP-on-CUDA library's hiprtc does), launched
through the CUDA driver API, checked against PyTorch and timed against cuDNN (NHWC,
benchmark mode, TF32 off) in the same process. The loop for tuning the kernel source:

    scripts/igemm-lab.py --check                 # every MMA/SIMT config vs an f64 reference
    scripts/igemm-lab.py --bench                 # VAE + Real-CUGAN 3x3 shapes, ours vs cuDNN
    scripts/igemm-lab.py --bench --configs mma_128x128_2x2 --shapes vae-512-512-1k
    scripts/igemm-lab.py --ncu-one vae-512-512-1k:mma_128x128_2x2:f16   # one launch, for ncu -k

Inputs are NHWC with cgp = C rounded up to the 16-byte vector (what igemm_pack_input
writes), weights [K][R][S][cgp] (igemm_pack_weight's layout), outputs NCHW through the
strided view (os_x = 1) -- or NHWC (os_c = 1) with --nhwc-out. Times are CUDA-event
medians of --reps launches, after warm-up; ratios are against cuDNN measured in the same
run on the same tensors. -D NAME[=VALUE] passes defines to NVRTC (kernel experiments);
--variant NAME=-DA=1,-DB=2 (repeatable) compiles the source once more with those defines
and checks / times it beside the others in the same process, on the same tensors:

    scripts/igemm-lab.py --bench --variant plain=-DRV_IG_FRAGS=0 --variant stages=-DRV_IG_NV_SMEM_KIB=96

The kernels take dynamic shared memory on NVIDIA: the launch passes the bytes the source's
formula gives (rv_igemm_nhwc::SMEM, repeated in smem_bytes below and in
kernels::IgemmNhwcConfig::shared_bytes) and raises the function's limit above 48 KiB.

Exit status: 0 when every check passed.
"""
import argparse
import ctypes
import importlib.util
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "kernels", "src", "igemm_mma.hip")
_spec = importlib.util.spec_from_file_location("nvrtc_check", os.path.join(REPO, "scripts", "nvrtc-check.py"))
nvc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nvc)

EXPORT = re.compile(r"^RV_EXPORT_IGEMM_(MMA|MMA_NV|SIMT|EMU11|EMU12)\((igemm_\w+?)_(f16|bf16|f32), \w+, (\d+), (\d+), (\d+), (\d+), (\d+)\)", re.M)

# (name, n, c, h, w, k, r, stride, pad): the VAE shapes (bench-gpu_conv's, output
# = input size) and Real-CUGAN 2x's 3x3 layers at a 1920x1080 input (UNet widths of the
# reference network; its convs are unpadded, the input is pre-padded).
SHAPES = [
    ("vae-512-512-1k", 1, 512, 1024, 1024, 512, 3, 1, 1),
    ("vae-512-256-1k", 1, 512, 1024, 1024, 256, 3, 1, 1),
    ("vae-256-256-1k", 1, 256, 1024, 1024, 256, 3, 1, 1),
    ("vae-256-128-1k", 1, 256, 1024, 1024, 128, 3, 1, 1),
    ("vae-128-128-1k", 1, 128, 1024, 1024, 128, 3, 1, 1),
    ("vae-512-512-2k", 1, 512, 2048, 2048, 512, 3, 1, 1),
    ("vae-256-256-2k", 1, 256, 2048, 2048, 256, 3, 1, 1),
    ("vae-128-128-2k", 1, 128, 2048, 2048, 128, 3, 1, 1),
    ("sr-32-64-1080p", 1, 32, 1084, 1924, 64, 3, 1, 0),
    ("sr-64-64-1080p", 1, 64, 1082, 1922, 64, 3, 1, 0),
    ("sr-64-128-540p", 1, 64, 544, 964, 128, 3, 1, 0),
    ("sr-128-64-540p", 1, 128, 542, 962, 64, 3, 1, 0),
    ("sr-128-128-540p", 1, 128, 542, 962, 128, 3, 1, 0),
    ("sr-128-256-270p", 1, 128, 274, 484, 256, 3, 1, 0),
    ("sr-256-128-270p", 1, 256, 272, 482, 128, 3, 1, 0),
    ("sr-64-64-s2-1080p", 1, 64, 1080, 1920, 64, 2, 2, 0),
    ("sr-128-128-s2-540p", 1, 128, 540, 960, 128, 2, 2, 0),
]
CHECK_CASES = [
    # n, c, h, w, k, r, stride, pad, groups
    (2, 40, 19, 23, 72, 3, 1, 1, 1),
    (1, 64, 33, 30, 200, 3, 1, 0, 1),
    (1, 48, 20, 22, 96, 2, 2, 0, 1),
    (2, 16, 17, 13, 48, 3, 2, 1, 2),
    (1, 3, 25, 27, 32, 3, 1, 1, 1),
    (1, 256, 12, 40, 256, 3, 1, 1, 1),
]


class Epilogue(ctypes.Structure):
    _fields_ = [("act", ctypes.c_int32), ("alpha", ctypes.c_float), ("scale", ctypes.c_float), ("reserved", ctypes.c_int32)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--ncu-one", help="SHAPE:CONFIG:DTYPE: one warm-up and one launch (for ncu -c 1 -k regex:igemm)")
    ap.add_argument("--configs", help="comma-separated config names (default: all)")
    ap.add_argument("--shapes", help="comma-separated shape names or prefixes (default: all)")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--nhwc-out", action="store_true", help="write the output NHWC (os_c = 1)")
    ap.add_argument("-D", action="append", default=[], dest="defines")
    ap.add_argument("--variant", action="append", default=[], help="NAME=-DA=1,-DB=2: another build of the source, compared in the same run")
    ap.add_argument("--arch", default=None, help="NVRTC --gpu-architecture (default: the GPU's sm_XY)")
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    major, minor = torch.cuda.get_device_capability()
    arch = a.arch or f"sm_{major}{minor}"
    lib, inc = nvc.find_nvrtc(), nvc.find_include()
    if not lib or not inc:
        print("igemm-lab: NVRTC or cuda_fp16.h not found", file=sys.stderr)
        return 2
    nvrtc = nvc.Nvrtc(lib)
    src = open(SRC).read()
    headers = {h: open(os.path.join(REPO, "kernels", "src", h)).read() for h in ("prelude.h", "mma.h")}
    cuda = ctypes.CDLL("libcuda.so.1")
    variants = [("base", [])] + [(v.split("=", 1)[0], [d[2:] if d.startswith("-D") else d for d in v.split("=", 1)[1].split(",") if d])
                                 for v in a.variant]
    if a.ncu_one:  # only the variant profiled
        want_v = (a.ncu_one.split(":")[3:] or ["base"])[0]
        variants = [v for v in variants if v[0] == want_v]

    def build(v):
        defs = a.defines + v[1]
        opts = [f"--gpu-architecture={arch}", f"-I{inc}", "--std=c++17"] + [f"-D{d}" for d in defs]
        if os.path.isdir(os.path.join(inc, "cccl")):
            opts.append(f"-I{os.path.join(inc, 'cccl')}")
        return defs, nvrtc.compile(src, "igemm_mma.hip", headers, opts, cubin=True)

    # NVRTC runs outside the GIL: the variants compile in parallel.
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(variants), os.cpu_count() or 1))) as pool:
        built = list(pool.map(build, variants))
    modules = {}
    for (vname, _), (defs, (ok, cubin, log)) in zip(variants, built):
        if not ok:
            print(f"variant {vname}: compile failed\n{log}")
            return 1
        mod = ctypes.c_void_p()
        r = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(cubin))
        if r != 0:
            print(f"variant {vname}: cuModuleLoadData: {r}")
            return 1
        kib = next((int(d.split("=", 1)[1]) for d in defs if d.startswith("RV_IG_NV_SMEM_KIB=")), None)
        modules[vname] = {"mod": mod, "defs": defs, "smem_kib": kib}
    print(f"igemm-lab: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"NVRTC {nvrtc.version} {arch}; variants: " + "; ".join(f"{v} [{' '.join('-D' + d for d in m['defs'])}]" for v, m in modules.items()),
          flush=True)
    funcs = {}

    def smem_bytes(cfg, kib, elem):
        """rv_igemm_nhwc::SMEM * 16: the pipeline's stages or the epilogue's slice, the larger."""
        stage = (cfg["bm"] + cfg["bn"]) * 4
        stages = cfg["stages"] if kib is None else max(2, min(8, kib * 1024 // (stage * 16)))
        sw = min(max(16, 4096 // cfg["bm"]), cfg["bn"])
        epi = (sw * (cfg["bm"] + 4) + 3) // 4
        return max(stages * stage, epi) * 16, stages

    def fn(vname, sym, smem=0):
        key = (vname, sym)
        if key not in funcs:
            f = ctypes.c_void_p()
            if cuda.cuModuleGetFunction(ctypes.byref(f), modules[vname]["mod"], sym.encode()) != 0:
                raise KeyError(sym)
            if smem > 48 * 1024:
                r = cuda.cuFuncSetAttribute(f, 8, ctypes.c_int(smem))  # MAX_DYNAMIC_SHARED_SIZE_BYTES
                if r != 0:
                    raise RuntimeError(f"cuFuncSetAttribute({sym}, {smem}): {r}")
            regs = ctypes.c_int()
            cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, f)  # CU_FUNC_ATTRIBUTE_NUM_REGS
            local = ctypes.c_int()
            cuda.cuFuncGetAttribute(ctypes.byref(local), 3, f)  # LOCAL_SIZE_BYTES
            funcs[key] = (f, f"{regs.value} regs, {smem} B shared, {local.value} B local")
        return funcs[key][0]

    def launch(vname, sym, grid, block, args, smem=0):
        holders = [ctypes.c_void_p(x.data_ptr()) if isinstance(x, torch.Tensor) else ctypes.c_void_p(0) if x is None else x
                   for x in args]
        params = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        r = cuda.cuLaunchKernel(fn(vname, sym, smem), *[ctypes.c_uint(x) for x in grid], *[ctypes.c_uint(x) for x in block],
                                ctypes.c_uint(smem), stream, params, ctypes.c_void_p(0))
        if r != 0:
            raise RuntimeError(f"cuLaunchKernel({sym}, smem {smem}): {r}")

    configs = {}
    for m in EXPORT.finditer(src):
        kind, base, dt, bm, bn, ta, tb, stages = m.groups()
        name = base.split("_", 1)[1]  # mma_128x128_2x2, emu11_64x64_2x2, simt_...
        configs.setdefault(name, {"kind": kind, "bm": int(bm), "bn": int(bn), "a": int(ta), "b": int(tb), "stages": int(stages),
                                  "dtypes": []})
        configs[name]["dtypes"].append(dt)
    if a.configs:
        configs = {k: v for k, v in configs.items() if k in a.configs.split(",") or k.split("_", 1)[1] in a.configs.split(",")}
    TD = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    i32, i64 = ctypes.c_int32, ctypes.c_int64

    def prepare(n, c, h, w, k, r, stride, pad, groups, dt):
        """NHWC input with cgp slots per group, packed weights, and the geometry."""
        vec = 16 // torch.empty(0, dtype=TD[dt]).element_size()
        cg = c // groups
        cgp = (cg + vec - 1) // vec * vec
        x = torch.randn(n, c, h, w, device=dev, dtype=torch.float32)
        wt = torch.randn(k, cg, r, r, device=dev, dtype=torch.float32) / (cg * r * r) ** 0.5
        x, wt = x.to(TD[dt]), wt.to(TD[dt])
        xn = torch.zeros(n, h, w, groups, cgp, device=dev, dtype=TD[dt])
        xn[..., :cg] = x.view(n, groups, cg, h, w).permute(0, 3, 4, 1, 2)
        wp = torch.zeros(k, r, r, cgp, device=dev, dtype=TD[dt])
        wp[..., :cg] = wt.permute(0, 2, 3, 1)
        p = (h + 2 * pad - r) // stride + 1
        q = (w + 2 * pad - r) // stride + 1
        g = nvc.Conv2d(n=n, c=c, h=h, w=w, k=k, r=r, s=r, p=p, q=q, stride_h=stride, stride_w=stride, pad_h=pad,
                       pad_w=pad, dil_h=1, dil_w=1, groups=groups)
        return x, wt, xn.contiguous(), wp.contiguous(), g, cgp

    def run_ours(vname, cfg_name, dt, g, cgp, xn, wp, bias, res, out, splits=1, partial=None):
        cfg = configs[cfg_name]
        sym = f"igemm_{cfg_name}_{dt}"
        threads = 256 if cfg["kind"] == "SIMT" else cfg["a"] * cfg["b"] * 32
        M = g.n * g.p * g.q
        kg = g.k // g.groups
        grid = ((M + cfg["bm"] - 1) // cfg["bm"], (kg + cfg["bn"] - 1) // cfg["bn"], g.groups * splits)
        if a.nhwc_out:
            os_ = (g.p * g.q * g.k, 1, g.q * g.k, g.k)
        else:
            os_ = (g.k * g.p * g.q, g.p * g.q, g.q, 1)
        ep = Epilogue(act=0, alpha=0.0, scale=1.0, reserved=0)
        smem, _ = smem_bytes(cfg, modules[vname]["smem_kib"], 4 if dt == "f32" else 2)
        if splits == 1:
            launch(vname, sym, grid, (threads, 1, 1),
                   [g, i32(cgp), i32(1), ep, *[i64(v) for v in os_], xn, wp, bias, res, None, out], smem)
        else:
            launch(vname, sym, grid, (threads, 1, 1),
                   [g, i32(cgp), i32(splits), ep, *[i64(v) for v in os_], xn, wp, None, None, partial, None], smem)
            launch(vname, f"igemm_splitk_{dt}", (min(4096, (g.k * ((M + 3) // 4) + 255) // 256), 1, 1), (256, 1, 1),
                   [g, i32(splits), ep, *[i64(v) for v in os_], partial, bias, res, out])
        return sym

    def out_tensor(g, dt):
        if a.nhwc_out:
            return torch.empty(g.n, g.p, g.q, g.k, device=dev, dtype=TD[dt]).permute(0, 3, 1, 2)
        return torch.empty(g.n, g.k, g.p, g.q, device=dev, dtype=TD[dt])

    failures = []
    checked = 0
    if a.check:
        for dt in a.dtypes.split(",") + ["f32"]:
            for case in CHECK_CASES:
                n, c, h, w, k, r, stride, pad, groups = case
                x, wt, xn, wp, g, cgp = prepare(n, c, h, w, k, r, stride, pad, groups, dt)
                bias = torch.randn(k, device=dev).to(TD[dt])
                want0 = F.conv2d(x.double(), wt.double(), None, stride, pad, 1, groups)
                res = torch.randn(want0.shape, device=dev).to(TD[dt])
                if a.nhwc_out:
                    res = res.contiguous(memory_format=torch.channels_last)
                M = n * want0.shape[2] * want0.shape[3]
                for vname in modules:
                    for cfg_name, cfg in configs.items():
                        if dt not in cfg["dtypes"]:
                            continue
                        for with_ep, splits in ((False, 1), (True, 1), (True, 3)):
                            out = out_tensor(g, dt)
                            out.fill_(float("nan"))
                            partial = torch.full((splits, k, M), float("nan"), device=dev) if splits > 1 else None
                            want = want0 + (bias.double().view(1, -1, 1, 1) + res.double() if with_ep else 0)
                            sym = run_ours(vname, cfg_name, dt, g, cgp, xn, wp, bias if with_ep else None,
                                           res if with_ep else None, out, splits, partial)
                            torch.cuda.synchronize()
                            err = (out.double() - want).abs().max().item()
                            scale = want.abs().max().item()
                            tol = {"f16": 4e-3, "bf16": 2e-2, "f32": 2e-5}[dt] * scale
                            if not err <= tol:
                                failures.append(f"{vname} {sym} {case} epilogue={with_ep} splits={splits}: max error {err:.3g} (scale {scale:.3g})")
                            checked += 1
        print(f"--check: {len(failures)} failures in {checked} runs ({len(modules)} variants x {len(configs)} configs x "
              f"{len(CHECK_CASES)} cases x 3 dtypes x (plain, epilogue, split-K 3 with epilogue))")
        for f in failures:
            print("  FAIL " + f)

    def timed(f, reps):
        f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        ts.sort()
        return ts[len(ts) // 2]

    shapes = SHAPES
    if a.shapes:
        want = a.shapes.split(",")
        shapes = [s for s in SHAPES if any(s[0] == x or s[0].startswith(x) for x in want)]

    if a.ncu_one:
        sname, cfg_name, dt, *rest = a.ncu_one.split(":")
        vname = rest[0] if rest else "base"
        s = next(s for s in SHAPES if s[0] == sname)
        _, n, c, h, w, k, r, stride, pad = s
        x, wt, xn, wp, g, cgp = prepare(n, c, h, w, k, r, stride, pad, 1, dt)
        out = out_tensor(g, dt)
        for _ in range(2):
            sym = run_ours(vname, cfg_name, dt, g, cgp, xn, wp, None, None, out)
        torch.cuda.synchronize()
        xc = x.contiguous(memory_format=torch.channels_last)
        wc = wt.contiguous(memory_format=torch.channels_last)
        for _ in range(3):
            F.conv2d(xc, wc, None, stride, pad)
        torch.cuda.synchronize()
        # The profiled pair (ncu --nvtx --nvtx-include profile/): ours, then cuDNN's choice.
        torch.cuda.nvtx.range_push("profile")
        run_ours(vname, cfg_name, dt, g, cgp, xn, wp, None, None, out)
        F.conv2d(xc, wc, None, stride, pad)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(f"--ncu-one: {vname} {sym} {funcs[(vname, sym)][1]}, then cuDNN NHWC, inside the NVTX range 'profile'")

    if a.bench:
        vnames = list(modules)
        print("| shape | dtype | cuDNN NHWC ms | " + " | ".join(f"{v}: best | ms | / cuDNN" for v in vnames) + " | all (variant config ms) |")
        print("| --- | --- | ---: | " + " | ".join("--- | ---: | ---:" for _ in vnames) + " | --- |")
        ratios = {v: [] for v in vnames}
        for sh in shapes:
            sname, n, c, h, w, k, r, stride, pad = sh
            for dt in a.dtypes.split(","):
                x, wt, xn, wp, g, cgp = prepare(n, c, h, w, k, r, stride, pad, 1, dt)
                flop = 2.0 * n * g.p * g.q * k * c * r * r
                xc = x.contiguous(memory_format=torch.channels_last)
                wc = wt.contiguous(memory_format=torch.channels_last)
                ref = F.conv2d(xc.float(), wc.float(), None, stride, pad)
                t_cudnn = timed(lambda: F.conv2d(xc, wc, None, stride, pad), a.reps)
                out = out_tensor(g, dt)
                res = {}
                for vname in vnames:
                    for cfg_name, cfg in configs.items():
                        if dt not in cfg["dtypes"] or cfg["kind"].startswith("EMU"):  # emulations: checked, not timed
                            continue
                        out.fill_(float("nan"))
                        sym = run_ours(vname, cfg_name, dt, g, cgp, xn, wp, None, None, out)
                        torch.cuda.synchronize()
                        err = (out.float() - ref).abs().max().item()
                        if not err <= 2e-2 * ref.abs().max().item():
                            failures.append(f"{vname} {sym} {sname}: max error {err:.3g}")
                            continue
                        res[(vname, cfg_name)] = timed(lambda: run_ours(vname, cfg_name, dt, g, cgp, xn, wp, None, None, out), a.reps)
                if not res:
                    continue
                cells = []
                for vname in vnames:
                    mine = {c2: t for (v2, c2), t in res.items() if v2 == vname}
                    if not mine:
                        cells.append("- | - | -")
                        continue
                    best = min(mine, key=mine.get)
                    ratios[vname].append(mine[best] / t_cudnn)
                    cells.append(f"{best} | {mine[best]:.3f} ({flop / mine[best] / 1e9:.0f} TF/s) | {mine[best] / t_cudnn:.2f}x")
                allc = ", ".join(f"{v2} {c2} {t:.3f}" for (v2, c2), t in sorted(res.items(), key=lambda kv: kv[1])[:6])
                print(f"| {sname} | {dt} | {t_cudnn:.3f} ({flop / t_cudnn / 1e9:.0f} TF/s) | " + " | ".join(cells) + f" | {allc} |",
                      flush=True)
                del x, wt, xn, wp, xc, wc, ref, out
                torch.cuda.empty_cache()
        import math
        for vname in vnames:
            rs = ratios[vname]
            if rs:
                gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
                print(f"{vname}: geometric mean / cuDNN NHWC {gm:.2f}x over {len(rs)} (shape, dtype); worst {max(rs):.2f}x")
        for key in sorted(funcs):
            print(f"  {key[0]} {key[1]}: {funcs[key][1]}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
