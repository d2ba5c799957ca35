#!/usr/bin/env bash
# run-on-gpu.sh: run ON the NVIDIA GPU machine: build the hip-on-cuda test libraries and
# their test program into a temporary directory, run the test, and leave the logs in $OUT.
#
# Needs the ROCm headers staged in .device-carry/rocm-include (stage-headers.sh, run where
# the ROCm chroot is) and carried to the machine. Through the device tool:
#   run(command="rocm-backend/testing/hip-on-cuda/run-on-gpu.sh", carry=[".device-carry"],
#       kind="nvidia-h200", timeout_s=420)
#
# $OUT/machine.txt  GPU, driver, toolkit, compiler
# $OUT/build.log    what build.sh found and ran
# $OUT/test.log     test_hip_on_cuda's PASS/FAIL lines (also printed)
# Exit status: the test's (0 = every check passed), or the build's when it failed.
#
# HOC_KEEP=DIR keeps the built libraries in DIR (ROCM_PATH=DIR) instead of a temporary
# directory, for a later command of the same call (the backend's GPU tests).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${OUT:-$repo/target/hip-on-cuda}
mkdir -p "$out"
if [[ -n "${HOC_KEEP:-}" ]]; then
    build=$HOC_KEEP
    mkdir -p "$build"
else
    build=$(mktemp -d /tmp/hip-on-cuda.XXXXXX)
    trap 'rm -rf "$build"' EXIT
fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    command -v nvcc >/dev/null && nvcc --version | tail -2
    gcc --version | head -1
    echo "CUDA_HOME=${CUDA_HOME:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

echo "== build"
t0=$(date +%s)
"$here/build.sh" "$build" >"$out/build.log" 2>&1
brc=$?
grep '^build.sh:' "$out/build.log"
if [[ $brc -ne 0 ]]; then
    echo "== BUILD FAILED (exit $brc); last lines of build.log:"
    tail -40 "$out/build.log"
    exit $brc
fi
echo "build: $(($(date +%s) - t0)) s"

echo "== test"
t0=$(date +%s)
timeout 360 "$build/bin/test_hip_on_cuda" "$repo/kernels/src" --all-kernels 2>&1 | tee "$out/test.log"
trc=${PIPESTATUS[0]}
echo "test: $(($(date +%s) - t0)) s, exit $trc"
echo "== summary: $(grep -c '^PASS' "$out/test.log") PASS, $(grep -c '^FAIL' "$out/test.log") FAIL"
grep '^FAIL' "$out/test.log" || true
exit $trc
