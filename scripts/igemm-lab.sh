#!/usr/bin/env bash
# One device call for the implicit-GEMM kernel loop (issue 28), run ON the GPU machine; needs
# only the repository (PyTorch, NVRTC and ncu are on the machine, no Rust binaries):
#   1+2. scripts/igemm-lab.py --check --bench: every config (of every variant) against an f64
#        reference (poisoned output), then ours against cuDNN NHWC, same run, same tensors;
#   3. ncu on one launch of one kernel per IGEMM_LAB_NCU entry:
#      speed of light, warp stall reasons, memory and LDS, source counters; and the same
#      sections for the cuDNN kernel that follows it.
# Environment: IGEMM_LAB_ARGS (extra arguments to every run, e.g. "--variant plain=-DRV_IG_FRAGS=0"),
#   IGEMM_LAB_BENCH (arguments of the check+bench run only), IGEMM_LAB_CHECK=0 skips step 1,
#   IGEMM_LAB_NCU (space-separated SHAPE:CONFIG:DTYPE[:VARIANT], one ncu run each; empty: none).
# Writes $OUT/igemm-lab.md and $OUT/ncu-*.txt. Device tool call:
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
# Check and bench in one process: each variant is compiled once (in parallel).
modes=(--bench)
[[ ${IGEMM_LAB_CHECK:-1} == 1 ]] && modes=(--check --bench)
timeout "${IGEMM_LAB_SECONDS:-420}" "$py" scripts/igemm-lab.py "${modes[@]}" "${extra[@]}" "${bench[@]}" 2>&1 | tee -a "$OUT/igemm-lab.md"
((PIPESTATUS[0] == 0)) || status=1
# IGEMM_LAB_NCU: space-separated SHAPE:CONFIG:DTYPE[:VARIANT] (empty: none).
read -r -a ncu_runs <<<"${IGEMM_LAB_NCU-vae-512-512-1k:mma_128x128_2x2:f16}"
if ((${#ncu_runs[@]})) && command -v ncu >/dev/null; then
    for one in "${ncu_runs[@]}"; do
        tag=${one//:/_}
        timeout 200 ncu --clock-control none --nvtx --nvtx-include 'profile/' -c 4 \
            --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
            --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
            "$py" scripts/igemm-lab.py --ncu-one "$one" "${extra[@]}" >"$OUT/ncu-$tag.txt" 2>&1 || status=1
        echo "## ncu $one" | tee -a "$OUT/igemm-lab.md"
        grep -E "igemm|sm90|sm80|xmma|cutlass|Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Issue Slots|Stall|Bank|Warp Cycles|One or More|No Eligible|Eligible Warps|Block Limit|Dynamic Shared|Static Shared|L1/TEX Hit|L2 Hit|Executed Ipc|--ncu-one" "$OUT/ncu-$tag.txt" | head -90 | tee -a "$OUT/igemm-lab.md"
    done
fi
echo "igemm-lab: exit $status" | tee -a "$OUT/igemm-lab.md"
exit $status
