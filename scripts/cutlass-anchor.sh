#!/usr/bin/env bash
# The CUTLASS anchor of issue 28, run ON the GPU machine (NVIDIA H100/H200, CUDA 13 nvcc, no
# network), from the repository root:
#
#   run(command="scripts/cutlass-anchor.sh", carry=[".device-carry"], timeout_s=600)
#
# 1. unpacks CUTLASS's headers from .device-carry/anchors/cutlass-include.tar.xz (staged here
#    by scripts/cutlass-anchor-build.sh: nvidia-cutlass 4.2.0.0 from PyPI, CUTLASS 4.2.0) into
#    /tmp/cutlass-anchor/include-<tarball sha>;
# 2. compiles benches/anchors/cutlass_conv/cutlass_conv.cu (which includes the other files of
#    that folder) with the machine's nvcc (-arch=sm_90 -O3 -std=c++17): seven translation units
#    in parallel (the main program and one per kernel configuration, 2 dtypes x 3 tiles), then
#    links; the binary is cached in /tmp/cutlass-anchor/bin-<hash of every file of the source
#    folder, tarball, nvcc version and flags>;
# 3. runs it on every shape (17 VAE and Real-CUGAN shapes x f16, bf16 x 3 configurations)
#    within CUTLASS_ANCHOR_SECONDS (default 300) counted from the start of this script: the
#    program gets --budget-s (the time left minus 20 s, after which it starts no further
#    configuration and marks the rest "skipped") and a hard timeout at the time left.
#
# Writes ${OUT:-target/cutlass-anchor}/cutlass.jsonl (one JSON line per shape x dtype x
# configuration, see benches/anchors/README.md) and .../cutlass.log (the build log, the
# progress and the best-per-shape table, which also go to stderr).
# Arguments are passed on to the program, e.g. scripts/cutlass-anchor.sh --shapes vae-512-512-1k
# --dtypes f16 --reps 10 (or CUTLASS_ANCHOR_ARGS). CUTLASS_ANCHOR_ARCH (default sm_90) and
# CUTLASS_ANCHOR_NVCC (default: nvcc on PATH, then $CUDA_HOME/bin, /usr/local/cuda/bin) choose
# the target and compiler.
# Exit status: the program's (0 all checks ok, 1 a check failed, 3 the time budget cut the
# list short), 124 when the hard timeout killed it, 2 when the build failed.
set -uo pipefail
start=$SECONDS
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/cutlass-anchor}
mkdir -p "$OUT"
log=$OUT/cutlass.log
: >"$log"
say() { echo "cutlass-anchor: $*" | tee -a "$log" >&2; }

seconds=${CUTLASS_ANCHOR_SECONDS:-300}
arch=${CUTLASS_ANCHOR_ARCH:-sm_90}
src_dir=benches/anchors/cutlass_conv
src=$src_dir/cutlass_conv.cu  # the one file compiled; it includes the rest of $src_dir
tarball=.device-carry/anchors/cutlass-include.tar.xz
work=/tmp/cutlass-anchor
mkdir -p "$work"

if [[ ! -f $tarball ]]; then
    say "$tarball missing: run scripts/cutlass-anchor-build.sh on the development machine and carry .device-carry"
    exit 2
fi
nvcc=${CUTLASS_ANCHOR_NVCC:-}
if [[ -z $nvcc ]]; then
    for cand in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
        if [[ -n $cand && -x $cand ]]; then nvcc=$cand; break; fi
    done
fi
if [[ -z $nvcc ]]; then
    say "no nvcc found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin); set CUTLASS_ANCHOR_NVCC"
    exit 2
fi
nvcc_version=$("$nvcc" --version | tail -1)
say "nvcc: $nvcc ($nvcc_version)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,memory.total \
    --format=csv,noheader 2>/dev/null | sed 's/^/cutlass-anchor: gpu: /' | tee -a "$log" >&2

# 1. Headers.
tar_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
inc=$work/include-${tar_sha:0:16}
if [[ ! -f $inc/include/cutlass/conv/device/implicit_gemm_convolution.h ]]; then
    rm -rf "$inc.tmp" && mkdir -p "$inc.tmp"
    if ! xz -dc "$tarball" | tar -C "$inc.tmp" -xf -; then
        say "unpacking $tarball failed"
        exit 2
    fi
    rm -rf "$inc" && mv "$inc.tmp" "$inc"
fi
package=$(sed -n 's/^package *\([^ ]*\).*/\1/p' .device-carry/anchors/CUTLASS-MANIFEST.txt 2>/dev/null)
package=${package:-unknown}
say "headers: $inc/include (tarball sha256 $tar_sha, $package)"

# 2. Build (cached by source, headers, compiler and flags).
flags=(-arch="$arch" -O3 -std=c++17 --threads 0 --expt-relaxed-constexpr -DNDEBUG
    -Xcudafe --diag_suppress=esa_on_defaulted_function_ignored -I"$inc/include"
    "-DCUTLASS_ANCHOR_PACKAGE=\"$package\"")
# Every file of the source folder (names and contents), not just $src: its headers are code.
src_sha=$(find "$src_dir" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
key=$( { echo "$src_sha"; echo "$tar_sha"; echo "$nvcc_version"; echo "${flags[*]}"; } |
    sha256sum | cut -c1-16)
bindir=$work/bin-$key
bin=$bindir/cutlass_conv
if [[ -x $bin ]]; then
    say "binary cached: $bin"
else
    rm -rf "$bindir.tmp" && mkdir -p "$bindir.tmp"
    t0=$SECONDS
    pids=()
    for tu in 100 0 1 2 3 4 5; do
        "$nvcc" "${flags[@]}" -Xptxas -v -DANCHOR_TU=$tu -c "$src" -o "$bindir.tmp/tu$tu.o" \
            >"$bindir.tmp/tu$tu.log" 2>&1 &
        pids+=($!)
    done
    failed=0
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed=1; done
    for tu in 100 0 1 2 3 4 5; do
        if [[ ! -f $bindir.tmp/tu$tu.o ]]; then
            say "compiling unit $tu failed:"
            tail -40 "$bindir.tmp/tu$tu.log" | tee -a "$log" >&2
        fi
    done
    if (( failed )) || ! "$nvcc" -arch="$arch" "$bindir.tmp"/tu*.o -o "$bindir.tmp/cutlass_conv" \
        >>"$bindir.tmp/link.log" 2>&1; then
        [[ -f $bindir.tmp/link.log ]] && cat "$bindir.tmp/link.log" | tee -a "$log" >&2
        say "build failed"
        exit 2
    fi
    grep -h "registers\|spill" "$bindir.tmp"/tu[0-5].log | sed 's/^ *//' | sort | uniq -c |
        sed 's/^/cutlass-anchor: ptxas: /' | tee -a "$log" >&2
    rm -rf "$bindir" && mv "$bindir.tmp" "$bindir"
    say "built $bin in $((SECONDS - t0)) s"
fi

# 3. Run.
left=$((seconds - (SECONDS - start)))
if (( left < 30 )); then
    say "only $left s left of CUTLASS_ANCHOR_SECONDS=$seconds after the build; not running"
    exit 3
fi
budget=$((left - 20))
# shellcheck disable=SC2086 # CUTLASS_ANCHOR_ARGS is a word list on purpose
args=(--budget-s "$budget" ${CUTLASS_ANCHOR_ARGS:-} "$@")
say "running: $bin ${args[*]} (hard limit $left s)"
timeout --signal=TERM --kill-after=10 "$left" "$bin" "${args[@]}" \
    >"$OUT/cutlass.jsonl" 2> >(tee -a "$log" >&2)
rc=$?
sleep 0.2  # let tee drain
lines=$(wc -l <"$OUT/cutlass.jsonl")
case $rc in
    0) say "all checks ok: $lines JSON lines in $OUT/cutlass.jsonl" ;;
    1) say "SOME CHECK FAILED or a CUDA error (exit 1): $lines JSON lines in $OUT/cutlass.jsonl" ;;
    3) say "time budget reached, some shapes skipped (exit 3): $lines JSON lines in $OUT/cutlass.jsonl" ;;
    124 | 137) say "killed by the $left s limit (exit $rc): $lines JSON lines in $OUT/cutlass.jsonl, no summary" ;;
    *) say "exit $rc: $lines JSON lines in $OUT/cutlass.jsonl" ;;
esac
say "total $((SECONDS - start)) s"
exit $rc
