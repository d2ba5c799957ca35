#!/usr/bin/env python3
"""The machine code of one kernel's main loop, on a machine without a GPU: compiles
kernels/src/igemm_mma.hip (or another module) with NVRTC for sm_90, disassembles the
cubin with nvdisasm, finds the loop that holds the kernel's HMMA (or FFMA) instructions and
prints its instruction mix -- the count to drive down when a kernel is issue-bound (ncu:
"Issue Slots Busy" high, tensor pipe low).

NVRTC and nvdisasm come from NVIDIA's PyPI wheels (see scripts/nvrtc-preflight.py):
    pip download --no-deps -d /tmp/nvdis "nvidia-cuda-nvdisasm==13.2.78"; unzip it
    scripts/nvrtc-sass.py --cuda /tmp/nvrtc/x/nvidia/cu13 --nvdisasm /tmp/nvdis/x/nvidia/cu13/bin/nvdisasm \\
        igemm_mma_128x128_2x2_f16 [-D RV_IG_FRAGS=0] [--print]
"""
import argparse
import collections
import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel")
    ap.add_argument("--module", default="igemm_mma.hip")
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--nvdisasm", required=True)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-D", action="append", default=[], dest="defines")
    ap.add_argument("--print", action="store_true", help="print the loop's instructions")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("nvc", os.path.join(REPO, "scripts", "nvrtc-check.py"))
    nvc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nvc)
    for b in sorted(os.listdir(os.path.join(a.cuda, "lib"))):
        if b.startswith("libnvrtc-builtins.so") and ".alt." not in b:
            ctypes.CDLL(os.path.join(a.cuda, "lib", b), mode=ctypes.RTLD_GLOBAL)
    nvrtc = nvc.Nvrtc(os.path.join(a.cuda, "lib", "libnvrtc.so.13"))
    src_dir = os.path.join(REPO, "kernels", "src")
    headers = {h: open(os.path.join(src_dir, h)).read() for h in os.listdir(src_dir) if h.endswith(".h")}
    inc = os.path.join(a.cuda, "include")
    opts = [f"--gpu-architecture={a.arch}", f"-I{inc}", f"-I{inc}/cccl", "--std=c++17"] + [f"-D{d}" for d in a.defines]
    ok, cubin, log = nvrtc.compile(open(os.path.join(src_dir, a.module)).read(), a.module, headers, opts, cubin=True)
    if not ok:
        print(log)
        return 1
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([a.nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout
    lines = sass.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(f".text.{a.kernel}:")), None)
    if start is None:
        print(f"{a.kernel}: not in the cubin")
        return 1
    end = next((i for i in range(start + 1, len(lines)) if ".section" in lines[i]), len(lines))
    body = lines[start:end]
    labels = {m.group(1): i for i, l in enumerate(body) for m in [re.match(r"^(\.L_x_\d+):", l)] if m}
    math = re.compile(r"\b(HMMA|FFMA)\b")
    # The innermost backward branch whose range holds the most math instructions.
    best = None
    for i, l in enumerate(body):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", l)
        if m and labels.get(m.group(1), i) < i:
            j = labels[m.group(1)]
            n = sum(1 for x in body[j:i + 1] if math.search(x))
            if n and (best is None or n > best[2] or (n == best[2] and i - j < best[1] - best[0])):
                best = (j, i, n)
    if best is None:
        print(f"{a.kernel}: no loop with HMMA/FFMA")
        return 1
    j, i, _ = best
    ops = collections.Counter()
    for l in body[j:i + 1]:
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", l)
        if m:
            ops[m.group(1)] += 1
            if a.print:
                print(re.sub(r"/\*[0-9a-f]+\*/", "", l).strip())
    total = sum(ops.values())
    print(f"{a.kernel} {' '.join('-D' + d for d in a.defines)}: main loop {total} instructions: "
          + ", ".join(f"{k} {v}" for k, v in ops.most_common(14)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
