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
import os
import sys

# The parts live in the package beside this file; put its folder on sys.path even when Python
# was started without the script's folder there (-P / PYTHONSAFEPATH).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from realcugan_torch_lib.bench import cmd_bench  # noqa: E402
from realcugan_torch_lib.common import DTYPES  # noqa: E402
from realcugan_torch_lib.selftest import cmd_selftest  # noqa: E402


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
