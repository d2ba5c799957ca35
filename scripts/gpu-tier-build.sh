#!/usr/bin/env bash
# Builds, on the development machine, the binaries scripts/gpu-tier.sh runs on the GPU
# machine, and stages them (with the ROCm headers the HIP-on-CUDA library compiles
# against) in .device-carry/. The HIP bindings are pinned to the toolchain chroot's HIP
# (6.4.43484) through scripts/hipconfig: one set of layouts for the tier's binaries, while the
# HIP-on-CUDA library is built against both header sets (scripts/gpu-tier.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# HIP_PATH is passed into the chroot by the hipconfig wrapper, so it must be the path
# inside it; setting it also makes cubecl-hip-sys rerun its build script.
export PATH="$repo/scripts:$PATH" HIP_PATH=/usr
mkdir -p .device-carry/bin
# Staged xz-compressed (the device tool carries at most 64 MiB with the tree; the
# uncompressed binaries were 43 MiB of it); scripts/gpu-tier.sh unpacks them.
rm -f .device-carry/bin/test-* .device-carry/bin/bench-* .device-carry/bin/extra-*
# Both header sets (HIP 6.4 and 7.2): scripts/gpu-tier.sh builds the library against each.
rocm-backend/testing/hip-on-cuda/stage-headers.sh --rocm all >/dev/null

stage() { # stage PREFIX -- cargo args...: copy the executables cargo reports
    local prefix=$1; shift
    cargo "$@" --message-format=json-render-diagnostics |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] != ["bin"]:
        print(m["target"]["name"], m["executable"])' |
        while read -r name exe; do cp "$exe" ".device-carry/bin/$prefix-$name"; strip --strip-debug ".device-carry/bin/$prefix-$name"; xz -6 -T2 -f ".device-carry/bin/$prefix-$name"; echo "staged $prefix-$name (xz)"; done
}
stage test test --no-run -p rocm-backend --test gpu_alloc --test gpu_conv --test gpu_parity
stage test test --no-run -p rocm-vision --test gpu_tensor --test gpu_rounding --test gpu_group_stats
# Issue 13: the N-th device allocation failing at every index, and one device from several
# threads (both skip on a machine without a GPU, and fail under ROCM_VISION_REQUIRE_GPU=1).
stage test test --no-run -p rocm-vision --test gpu_faults --test concurrency --test errors --test device_identity
# Real-CUGAN's memory estimate against the allocator's peak (issue 12.6).
stage test test --no-run -p examples-sr --test gpu_memory
stage test test --no-run -p examples-sr --test gpu_tiling
# Issue 15: the f16 overflow guard on the device (skips without a GPU).
stage test test --no-run -p examples-sd --test f16_overflow
# Issue 15.2: the encoder against diffusers on the device, and its 1024² f16 peak (<= 1.6 GB).
stage test test --no-run -p examples-sd --test gpu_encoder
# Issue 30: banded == unbanded on the device (size-independent rounding; device, host, disk maps).
stage test test --no-run -p examples-sd --test gpu_banded
# MIOpen as a conv algorithm (issue 8), through the test library's cuDNN mapping.
stage test test --no-run -p rocm-backend --features miopen --test gpu_miopen
# Test binaries whose CPU cases do not belong on the GPU host are staged as extra-*:
# scripts/gpu-check.sh runs their gpu_* cases only. The VAE memory plan's CPU cases measure
# the heap of a 2-core machine (the 16-core host's gemm packing grows per thread).
stage extra test --no-run -p examples-sd --test memory_plan
# Every ncnn fixture through the GPU (its gpu_* case; the CPU case runs in CI).
stage extra test --no-run -p examples-sr --test fixtures
stage bench bench --no-run -p rocm-backend --bench gpu_conv
# Elementwise kernels against the device copy (issue 12).
stage bench bench --no-run -p rocm-backend --bench gpu_elementwise
# The NHWC implicit-GEMM kernels (issue 5): the MMA layer, every configuration, the gfx11 /
# gfx12 WMMA emulations, split-K and the fused epilogue against f64 references.
stage test test --no-run -p rocm-backend --test gpu_igemm
# The Real-CUGAN model the tier's gpu_memory and gpu_tiling tests load (REALCUGAN_MODELS =
# .device-carry/apps/models on the GPU machine): staged here too, so that the tier does not
# depend on scripts/gpu-apps-build.sh having run (2026-12-07 both tests skipped without it).
[[ -f models/models-se/up2x-no-denoise.param ]] || scripts/fetch-models.sh
mkdir -p .device-carry/apps/models/models-se
cp models/models-se/up2x-no-denoise.param models/models-se/up2x-no-denoise.bin .device-carry/apps/models/models-se/
echo "staged models-se/up2x-no-denoise for the Real-CUGAN GPU tests"
du -sh .device-carry
