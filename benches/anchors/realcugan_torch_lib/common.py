"""Constants and output helpers shared by the parts of realcugan_torch.py."""
from __future__ import annotations

import json
import os
import sys

# The folder of realcugan_torch.py (this package sits beside it), and the repository root.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
