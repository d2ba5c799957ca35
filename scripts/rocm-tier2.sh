#!/usr/bin/env bash
# rocm-tier2.sh: the ROCm crates' tests inside every toolchain chroot, against one host build.
# See --help.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
run_rocms="6.4 7.2"
log_dir="$repo/target/tier2"
CRATES=(-p rocm-backend -p rocblas-sys -p miopen-sys -p rocm-loader --features rocm-backend/miopen)

usage() {
    cat <<EOF
Usage: scripts/rocm-tier2.sh [--run-in "6.4 7.2"] [--logs DIR]

Builds the test executables of rocm-backend, rocblas-sys, miopen-sys and rocm-loader once, on
the host (cargo test --no-run; the paths from --message-format=json), and runs the very same
executables inside each chroot of --run-in: one binary, every runtime. They load each
chroot's own libamdhip64, hiprtc, rocBLAS and MIOpen at run time; ROCM_VISION_REQUIRE_ROCM=1
makes a missing library a failure, not a skip.

Why on the host: a binary linked inside a chroot needs its newer glibc (GLIBC_2.39 here) and
cannot run on the host, yet cargo, sharing target/ with host builds, would later take it
as up to date for a host run of the same tests; a host binary runs in both chroots. Doc
tests of these crates compile only (no_run) and run in tier 1.

Every run shares one ROCM_VISION_CROSS_CACHE directory, so that the kernel-cache test of a
later toolchain finds the entries of the earlier one and checks that none is served to it.
Logs per toolchain in --logs (default target/tier2); the SKIPPED lines of each are listed at
the end. Needs root and the chroots (scripts/rocm-chroot.sh --rocm V build).
EOF
}

while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --run-in) run_rocms=$2; shift 2 ;;
        --logs) log_dir=$2; shift 2 ;;
        *) echo "rocm-tier2: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

export ROCM_CHROOT_BINDS="$repo:$repo${ROCM_CHROOT_BINDS:+ $ROCM_CHROOT_BINDS}"
mkdir -p "$log_dir"
cross="$log_dir/cross-cache"
rm -rf "$cross"
mkdir -p "$cross"
status=0

in_chroot() { # VERSION CMD...
    local v=$1
    shift
    # AMD_COMGR_CACHE=0: comgr (under hiprtc) keeps its own cache of compiled code in the
    # chroot's ~/.cache/comgr, which served a whole rerun's "hiprtc compiles every module" in
    # 2 s: off, so that every run compiles for real.
    ROCM_CHROOT_ROCM=$v "$here/rocm-chroot.sh" run -- env ROCM_VISION_REQUIRE_ROCM=1 ROCM_VISION_CROSS_CACHE="$cross" \
        AMD_COMGR_CACHE=0 "$@"
}

t0=$(date +%s)
cd "$repo"
echo "rocm-tier2: building the test executables on the host" >&2
if ! cargo test "${CRATES[@]}" --no-run --message-format=json >"$log_dir/artifacts.json" 2>"$log_dir/build.log"; then
    tail -n 30 "$log_dir/build.log" >&2
    echo "rocm-tier2: cargo test --no-run failed" >&2
    exit 1
fi
python3 - "$log_dir/artifacts.json" >"$log_dir/executables.txt" <<'PYEOF'
import json, os, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        print(os.path.dirname(m["manifest_path"]), m["executable"])
PYEOF
n=$(wc -l <"$log_dir/executables.txt")
[[ $n -gt 0 ]] || { echo "rocm-tier2: no test executables found in cargo's output" >&2; exit 1; }
echo "rocm-tier2: $n executables, built in $(($(date +%s) - t0)) s" >&2

for v in $run_rocms; do
    t1=$(date +%s)
    echo "rocm-tier2: the $n executables in the ROCm $v chroot" >&2
    : >"$log_dir/tests-$v.log"
    while read -r dir exe; do
        echo "==== $exe (in $dir)" >>"$log_dir/tests-$v.log"
        # cargo test runs each test binary in its package's directory, with this variable set.
        if ! (cd "$dir" && in_chroot "$v" env CARGO_MANIFEST_DIR="$dir" "$exe") >>"$log_dir/tests-$v.log" 2>&1; then
            status=1
            echo "rocm-tier2: FAILED in ROCm $v: $exe" >&2
        fi
    done <"$log_dir/executables.txt"
    echo "rocm-tier2: ROCm $v: $(grep -c '^test result: ok' "$log_dir/tests-$v.log" || true) of $n test binaries ok, $(grep '^test result' "$log_dir/tests-$v.log" | awk '{s += $4} END {print s + 0}') tests passed, $(($(date +%s) - t1)) s" >&2
done

for v in $run_rocms; do
    # Parallel tests can print a SKIPPED line after another test's "test ... " prefix: found
    # anywhere on a line.
    echo "rocm-tier2: ROCm $v: $(grep -o 'SKIPPED [A-Za-z0-9_]*: .*' "$log_dir/tests-$v.log" | grep -c . || true) test(s) skipped their checks:" >&2
    grep -o 'SKIPPED [A-Za-z0-9_]*: .*' "$log_dir/tests-$v.log" | sed 's/^SKIPPED /  /' | cut -c1-160 >&2 || true
done
[[ $status -eq 0 ]] || { echo "rocm-tier2: FAILED (logs in $log_dir)" >&2; exit 1; }
echo "rocm-tier2: ok in ROCm $run_rocms, $(($(date +%s) - t0)) s" >&2
