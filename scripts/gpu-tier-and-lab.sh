#!/usr/bin/env bash
# One device call for a kernel change (issues 27-29): the GPU-tier tests against the
# HIP-on-CUDA library of each staged header set (scripts/gpu-check.sh without the apps and
# the timeline), then the implicit-GEMM lab (scripts/igemm-lab.sh: every configuration
# against an f64 reference, then against cuDNN NHWC) in the time that is left.
# Needs the binaries of scripts/gpu-tier-build.sh (carried in .device-carry).
# Environment: GPU_SESSION_SECONDS (the whole call's budget, default 540),
#   GPU_SESSION_TIER_SECONDS (the tests' share, default 300), IGEMM_LAB_* as igemm-lab.sh.
# Device tool call:
#   run(command="scripts/gpu-tier-and-lab.sh", carry=[".device-carry"], timeout_s=600)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
total=${GPU_SESSION_SECONDS:-540}
status=0
GPU_CHECK_APPS=0 GPU_CHECK_DIAGNOSE=0 OUT=$OUT timeout "${GPU_SESSION_TIER_SECONDS:-300}" scripts/gpu-check.sh \
    >"$OUT/gpu-check.log" 2>&1 || status=1
echo "gpu-tier-and-lab: tests exit $status after $(($(date +%s) - t0)) s"
grep -E "test result|FAILED|panicked|SKIPPED|^== " "$OUT/gpu-check.log" | tail -40
left=$((total - ($(date +%s) - t0) - 10))
if ((left < 60)); then
    echo "gpu-tier-and-lab: $left s left, no lab run"
    exit 1
fi
echo "gpu-tier-and-lab: the lab gets $left s"
OUT=$OUT/lab IGEMM_LAB_NCU=${IGEMM_LAB_NCU-} IGEMM_LAB_SECONDS=$left scripts/igemm-lab.sh | tail -60
((PIPESTATUS[0] == 0)) || status=1
echo "gpu-tier-and-lab: exit $status"
exit $status
