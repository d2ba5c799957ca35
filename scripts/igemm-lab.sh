#!/usr/bin/env bash
# One device call for the implicit-GEMM kernel loop (issue 28), run ON the GPU machine; needs
# only the repository (PyTorch, NVRTC and ncu are on the machine, no Rust binaries):
#   1. scripts/igemm-lab.py --check: every config against an f64 reference (poisoned output);
#   2. scripts/igemm-lab.py --bench: ours against cuDNN NHWC, same run, same tensors;
#   3. ncu on one launch of one kernel (IGEMM_LAB_NCU=SHAPE:CONFIG:DTYPE, empty skips it):
#      speed of light, warp stall reasons, memory and LDS, source counters; and the same
#      sections for the cuDNN kernel that follows it.
# Environment: IGEMM_LAB_ARGS (extra arguments to both runs, e.g. "-D RV_X=1 --configs ..."),
#   IGEMM_LAB_BENCH (arguments of the bench only), IGEMM_LAB_CHECK=0 skips step 1.
# Writes $OUT/igemm-lab.md and $OUT/ncu.txt. Device tool call:
#   run(command="scripts/igemm-lab.sh", timeout_s=600)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/igemm-lab}
mkdir -p "$OUT"
py=${IGEMM_LAB_PYTHON:-python3}
status=0
read -r -a extra <<<"${IGEMM_LAB_ARGS:-}"
read -r -a bench <<<"${IGEMM_LAB_BENCH:-}"
{
    echo "# igemm-lab $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
} | tee "$OUT/igemm-lab.md"
if [[ ${IGEMM_LAB_CHECK:-1} == 1 ]]; then
    timeout 200 "$py" scripts/igemm-lab.py --check "${extra[@]}" 2>&1 | tee -a "$OUT/igemm-lab.md"
    ((PIPESTATUS[0] == 0)) || status=1
fi
timeout "${IGEMM_LAB_BENCH_SECONDS:-300}" "$py" scripts/igemm-lab.py --bench "${extra[@]}" "${bench[@]}" 2>&1 | tee -a "$OUT/igemm-lab.md"
((PIPESTATUS[0] == 0)) || status=1
if [[ -n ${IGEMM_LAB_NCU-vae-512-512-1k:128x128_2x2:f16} ]] && command -v ncu >/dev/null; then
    one=${IGEMM_LAB_NCU-vae-512-512-1k:128x128_2x2:f16}
    timeout 240 ncu --clock-control none --nvtx --nvtx-include 'profile/' -c 4 \
        --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
        "$py" scripts/igemm-lab.py --ncu-one "$one" "${extra[@]}" >"$OUT/ncu.txt" 2>&1 || status=1
    grep -E "igemm|sm90|sm80|xmma|cutlass|Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Issue Slots|Stall|Bank|Warp Cycles|One or More|No Eligible|Eligible Warps|Block Limit|Dynamic Shared|Static Shared|L1/TEX Hit|L2 Hit|Executed Ipc" "$OUT/ncu.txt" | head -120 | tee -a "$OUT/igemm-lab.md"
fi
echo "igemm-lab: exit $status" | tee -a "$OUT/igemm-lab.md"
exit $status
