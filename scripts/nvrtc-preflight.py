#!/usr/bin/env python3
"""Compiles every kernel module for an NVIDIA architecture with NVRTC, on a machine
without a GPU, before device time is spent on the GPU tier.

The GPU tier's hiprtc (rocm-backend/testing/hip-on-cuda/src/hiprtc.c) compiles the same
sources the same way: the module with the headers of kernels/src (`prelude.h`, `mma.h`) as
in-memory headers,
`--gpu-architecture=sm_90 --std=c++17 -I<CUDA include> -I<CUDA include>/cccl`. This script
adds `--ptxas-options=-v`, reports every function that spills, and fails on any compile
error.

NVRTC comes from NVIDIA's PyPI wheels (no CUDA toolkit needed):
    pip download --no-deps -d /tmp/nvrtc "nvidia-cuda-nvrtc==13.0.*" \
        "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*"
    (cd /tmp/nvrtc && for w in *.whl; do unzip -qo "$w" -d x; done)
    scripts/nvrtc-preflight.py --cuda /tmp/nvrtc/x/nvidia/cu13 [--arch sm_90] [module ...]
"""
import argparse
import ctypes
import pathlib
import re
import sys
import time

repo = pathlib.Path(__file__).resolve().parent.parent
kernels = repo / "kernels" / "src"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", required=True, help="folder with lib/libnvrtc.so.13 and include/cuda_fp16.h")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--define", action="append", default=[], help="extra -D (e.g. RV_HIP_ON_CUDA_TEST=1)")
    ap.add_argument("--stack", action="store_true", help="name every kernel with a stack frame")
    ap.add_argument("--regs", metavar="REGEX", help="print the registers of every kernel whose name matches")
    ap.add_argument("modules", nargs="*", help="module file stems (default: every .hip)")
    a = ap.parse_args()
    cuda = pathlib.Path(a.cuda)
    # Loaded first so that NVRTC's own dlopen of its builtins finds it by soname.
    for builtins in sorted((cuda / "lib").glob("libnvrtc-builtins.so.*")):
        if ".alt." not in builtins.name:
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(cuda / "lib" / "libnvrtc.so.13"))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    # Every header of kernels/src, whichever a module includes: NVRTC ignores the others.
    headers = sorted(kernels.glob("*.h"))
    files = sorted(kernels.glob("*.hip"))
    if a.modules:
        files = [f for f in files if f.stem in a.modules]
    opts = [f"--gpu-architecture={a.arch}", "--std=c++17", f"-I{cuda / 'include'}",
            f"-I{cuda / 'include' / 'cccl'}", "--ptxas-options=-v", "-DRV_HIP_ON_CUDA_TEST=1"]
    opts += [f"-D{d}" for d in a.define]
    failed = 0
    for f in files:
        prog = ctypes.c_void_p()
        hdrs = (ctypes.c_char_p * len(headers))(*[h.read_bytes() for h in headers])
        names = (ctypes.c_char_p * len(headers))(*[h.name.encode() for h in headers])
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), f.read_bytes(), f.name.encode(), len(headers), hdrs, names)
        assert rc == 0, rc
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        t = time.time()
        rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
        dt = time.time() - t
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if rc != 0:
            failed += 1
            print(f"FAIL {f.name}: {lib.nvrtcGetErrorString(rc).decode()} ({dt:.1f} s)\n{log}")
            continue
        # ptxas -v: "Compiling entry function 'NAME' for 'sm_90'" then
        # "Used N registers, ... spill stores ... spill loads"
        kernels_seen = spills = stacks = 0
        name = None
        for line in log.splitlines():
            m = re.search(r"Compiling entry function '([^']+)'", line)
            if m:
                name = m.group(1)
                kernels_seen += 1
            m = re.search(r"Used (\d+) registers", line)
            if m and a.regs and name and re.search(a.regs, name):
                print(f"  {name}: {m.group(1)} registers")
            m = re.search(r"(\d+) bytes stack frame", line)
            if m and int(m.group(1)):
                # A stack frame without spills is usually a by-value struct indexed at run
                # time (copied to local memory by every thread): worth knowing, not fatal.
                stacks += 1
                if a.stack:
                    print(f"  STACK {f.name} {name}: {line.strip()}")
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and (int(m.group(1)) or int(m.group(2))):
                spills += 1
                print(f"  SPILL {f.name} {name}: {line.strip()}")
        cubin = ctypes.c_size_t()
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(cubin))
        print(f"ok   {f.name}: {kernels_seen} kernels, cubin {cubin.value} bytes, {spills} spilling, {stacks} with a stack frame, {dt:.1f} s")
        if "warning" in log:
            print("\n".join(l for l in log.splitlines() if "warning" in l)[:4000])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
