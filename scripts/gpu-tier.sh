#!/usr/bin/env bash
# The GPU tier, run ON the NVIDIA GPU machine in one call (docs/architecture.md, "Verification: three tiers"):
#   1. builds the HIP-on-CUDA test library (rocm-backend/testing/hip-on-cuda) once per staged
#      ROCm header set (HIP 6.4 and 7.2) and runs its own C test against each;
#   2. runs the GPU-tier test binaries built on the development machine by
#      scripts/gpu-tier-build.sh (carried in .device-carry/bin) against each build, with
#      ROCM_VISION_REQUIRE_GPU=1 so that a missing device fails instead of skipping;
#   3. runs the GPU conv benchmark and, in the same call, cuDNN through PyTorch;
#   4. writes $OUT/{machine.txt, hoc-test.log, tests.log, parity.md, elementwise.log, ours.jsonl,
#      cudnn.jsonl, gpu-tier.md} (eight files: the device tool's limit).
# GPU_TIER_TESTS_ONLY=1 stops after the tests; GPU_TIER_TESTS='test-gpu_igemm ...' runs only
# those test binaries. The cuDNN anchor runs in two parts so that a short call still gets
# the half-precision anchors: CUDNN_ARGS (default: every dtype and layout) before our
# bench, then CUDNN_LATE_ARGS (default: none) after it, each with its own timeout.
# Device tool call:
#   run(command="scripts/gpu-tier.sh", carry=[".device-carry"], kind="nvidia-h200", timeout_s=600)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
out=${OUT:-$repo/target/gpu-tier}
mkdir -p "$out"
lib=/tmp/hip-on-cuda
status=0

# The HIP-on-CUDA library is built once per staged header set (issue 27: HIP 6.4's and 7.2's,
# stage-headers.sh --rocm all): each build must compile against those headers' signatures,
# and reports their HIP_VERSION from hipRuntimeGetVersion, so the one set of test binaries
# runs once against a "HIP 6.4" and once against a "HIP 7.2" runtime. GPU_TIER_HEADER_SETS
# picks (default: every set staged). The benchmarks and the parity table come from the first.
sets=${GPU_TIER_HEADER_SETS:-}
if [[ -z $sets ]]; then
    [[ -d .device-carry/rocm-include ]] && sets="6.4"
    [[ -d .device-carry/rocm-include-7.2 ]] && sets="$sets 7.2"
fi
[[ -n $sets ]] || { echo "no ROCm headers staged in .device-carry (rocm-backend/testing/hip-on-cuda/stage-headers.sh --rocm all)"; exit 1; }
first=${sets%% *}
first=${first# }
include_of() { [[ $1 == 6.4 ]] && echo "$repo/.device-carry/rocm-include" || echo "$repo/.device-carry/rocm-include-$1"; }
lib_of() { [[ $1 == "$first" ]] && echo /tmp/hip-on-cuda || echo "/tmp/hip-on-cuda-$1"; }

: >"$out/hoc-test.log"
for set in $sets; do
    echo "== building the HIP-on-CUDA library against the HIP $set headers and running its C test"
    echo "==== header set $set ($(include_of "$set"))" >>"$out/hoc-test.log"
    HOC_ROCM_INCLUDE=$(include_of "$set") HOC_KEEP=$(lib_of "$set") OUT=/tmp/hoc-out-$set \
        rocm-backend/testing/hip-on-cuda/run-on-gpu.sh >>"$out/hoc-test.log" 2>&1 || status=1
    tail -3 "$out/hoc-test.log"
done
cp "/tmp/hoc-out-$first/machine.txt" "$out/machine.txt" 2>/dev/null

# gpu_parity writes the op x dtype parity table (issue 8) to $out/parity.md.
export ROCM_VISION_REQUIRE_GPU=1 ROCM_VISION_KERNEL_CACHE=/tmp/rv-kernel-cache RUST_BACKTRACE=1 \
    REALCUGAN_MODELS=$repo/.device-carry/apps/models SD_FIXTURES=$repo/examples-sd/fixtures
# The binaries come xz-compressed (scripts/gpu-tier-build.sh); unpack them beside.
if [[ -f .device-carry/apps/bin/rocm-vision-info.xz ]]; then
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        .device-carry/apps/bin/rocm-vision-info.xz /tmp/rocm-vision-info && chmod +x /tmp/rocm-vision-info
fi
for z in .device-carry/bin/*.xz; do
    [[ -f $z ]] || continue
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "${z%.xz}" &&
        chmod +x "${z%.xz}" && rm -f "$z"
done
: >"$out/tests.log"
for set in $sets; do
    export ROCM_PATH
    ROCM_PATH=$(lib_of "$set")
    if [[ $set == "$first" ]]; then
        export ROCM_VISION_PARITY_TABLE=$out/parity.md
    else
        export ROCM_VISION_PARITY_TABLE=/tmp/parity-$set.md
    fi
    # Every kernel module compiled once, in parallel, before the tests (they would compile
    # each on first use, one after another): rocm-vision-info from the apps payload, when staged.
    if [[ -x /tmp/rocm-vision-info ]]; then
        echo "== kernel cache (HIP $set headers)"
        /tmp/rocm-vision-info --device rocm --warm-cache 2>&1 | tail -3 | tee -a "$out/machine.txt" || status=1
    fi
    echo "== GPU-tier tests against the library built with the HIP $set headers" | tee -a "$out/tests.log"
    for t in .device-carry/bin/test-*; do
        [[ -x $t ]] || continue
        if [[ -n ${GPU_TIER_TESTS:-} && " $GPU_TIER_TESTS " != *" $(basename "$t") "* ]]; then continue; fi
        echo "---- [HIP $set] $t" | tee -a "$out/tests.log"
        # --nocapture: the tests print what they measured (ratios, runs per algorithm).
        if ! "$t" --test-threads=1 --nocapture >>"$out/tests.log" 2>&1; then
            status=1
            echo "FAILED: [HIP $set] $t" | tee -a "$out/tests.log"
        fi
        grep -E "^test result|panicked|FAILED" "$out/tests.log" | tail -2
    done
done
export ROCM_PATH
ROCM_PATH=$(lib_of "$first")

# Elementwise kernels against the device copy (issue 12): GB/s and the ratio, 256 MiB tensors.
if [[ -x .device-carry/bin/bench-gpu_elementwise && ${GPU_TIER_ELEMENTWISE:-1} == 1 ]]; then
    echo "== elementwise kernels vs device copy"
    # JSON lines and the table in one file: the device tool returns at most eight.
    timeout "${GPU_TIER_ELEMENTWISE_SECONDS:-120}" .device-carry/bin/bench-gpu_elementwise --reps 20 \
        >"$out/elementwise.log" 2>&1 || status=1
    grep -E '^\||contiguous cases' "$out/elementwise.log"
fi

if [[ ${GPU_TIER_TESTS_ONLY:-0} == 1 ]]; then
    grep -E "^test result|panicked|FAILED" "$out/tests.log"
    exit $status
fi
echo "== cuDNN (PyTorch), then the GPU conv benchmark (ours)"
# cuDNN first: its time is fixed and known; ours gets what is left of the call (its JSON
# lines are written as they are measured, so a timeout keeps what was measured).
# shellcheck disable=SC2086
timeout "${CUDNN_SECONDS:-120}" python3 benches/anchors/cudnn_conv.py --reps 10 ${CUDNN_ARGS:-} >"$out/cudnn.jsonl" 2>>"$out/tests.log" || status=1
if [[ -x .device-carry/bin/bench-gpu_conv ]]; then
    timeout "${GPU_TIER_BENCH_SECONDS:-260}" .device-carry/bin/bench-gpu_conv --reps 5 >"$out/ours.jsonl" 2>>"$out/tests.log" || status=1
fi
if [[ -n ${CUDNN_LATE_ARGS:-} ]]; then
    # shellcheck disable=SC2086
    timeout "${CUDNN_LATE_SECONDS:-120}" python3 benches/anchors/cudnn_conv.py --reps 10 $CUDNN_LATE_ARGS >>"$out/cudnn.jsonl" 2>>"$out/tests.log" || status=1
fi
python3 scripts/gpu-tier-report.py "$out" >"$out/gpu-tier.md" || status=1
cat "$out/gpu-tier.md"
exit $status
