#!/usr/bin/env bash
# rocm-tier2.sh: the ROCm crates' tests inside every toolchain chroot, against one build.
# See --help.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build_rocm=6.4
run_rocms="6.4 7.2"
log_dir="$repo/target/tier2"
CRATES=(-p rocm-backend -p rocblas-sys -p miopen-sys -p rocm-loader --features rocm-backend/miopen)

usage() {
    cat <<EOF
Usage: scripts/rocm-tier2.sh [--build-in 6.4] [--run-in "6.4 7.2"] [--logs DIR]

Builds the tests of rocm-backend, rocblas-sys, miopen-sys and rocm-loader (cargo test, doc tests
included) once, inside the --build-in chroot, and runs them there; then runs the very same
test executables (paths from cargo's --message-format=json, nothing rebuilt) inside each
other chroot of --run-in. One binary, every runtime: the executables load each chroot's own
libamdhip64, hiprtc, rocBLAS and MIOpen at run time. ROCM_VISION_REQUIRE_ROCM=1 makes a
missing library a failure, not a skip.

Every run shares one ROCM_VISION_CROSS_CACHE directory, so that the kernel-cache test of a
later toolchain finds the entries of the earlier one and checks that none is served to it.
Logs per toolchain in --logs (default target/tier2); the SKIPPED lines of each are listed at
the end. Needs root and the chroots (scripts/rocm-chroot.sh --rocm V build).
EOF
}

while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --build-in) build_rocm=$2; shift 2 ;;
        --run-in) run_rocms=$2; shift 2 ;;
        --logs) log_dir=$2; shift 2 ;;
        *) echo "rocm-tier2: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

cargo_bin=$(command -v cargo)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
export ROCM_CHROOT_BINDS="$repo:$repo $cargo_home:$cargo_home $rustup_home:$rustup_home${ROCM_CHROOT_BINDS:+ $ROCM_CHROOT_BINDS}"
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
echo "rocm-tier2: build and run in the ROCm $build_rocm chroot" >&2
cd "$repo"
if ! in_chroot "$build_rocm" "$cargo_bin" test "${CRATES[@]}" >"$log_dir/tests-$build_rocm.log" 2>&1; then
    status=1
    tail -n 40 "$log_dir/tests-$build_rocm.log" >&2
fi
# The executables just built and run (a no-op build: the same environment).
if ! in_chroot "$build_rocm" "$cargo_bin" test "${CRATES[@]}" --no-run --message-format=json \
    >"$log_dir/artifacts.json" 2>"$log_dir/artifacts.log"; then
    tail -n 20 "$log_dir/artifacts.log" >&2
    echo "rocm-tier2: listing the test executables (cargo test --no-run) failed" >&2
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
echo "rocm-tier2: ROCm $build_rocm: $(grep -c '^test result: ok' "$log_dir/tests-$build_rocm.log" || true) test binaries ok, $(($(date +%s) - t0)) s; $n executables" >&2

for v in $run_rocms; do
    [[ $v == "$build_rocm" ]] && continue
    t1=$(date +%s)
    echo "rocm-tier2: the same $n executables in the ROCm $v chroot" >&2
    : >"$log_dir/tests-$v.log"
    while read -r dir exe; do
        echo "==== $exe (in $dir)" >>"$log_dir/tests-$v.log"
        # cargo test runs each test binary in its package's directory, with this variable set.
        if ! (cd "$dir" && in_chroot "$v" env CARGO_MANIFEST_DIR="$dir" "$exe") >>"$log_dir/tests-$v.log" 2>&1; then
            status=1
            echo "rocm-tier2: FAILED in ROCm $v: $exe" >&2
        fi
    done <"$log_dir/executables.txt"
    echo "rocm-tier2: ROCm $v: $(grep -c '^test result: ok' "$log_dir/tests-$v.log" || true) of $n test binaries ok, $(($(date +%s) - t1)) s" >&2
done

for v in $run_rocms; do
    echo "rocm-tier2: ROCm $v: $(grep -c '^SKIPPED ' "$log_dir/tests-$v.log" || true) test(s) skipped their checks:" >&2
    grep '^SKIPPED ' "$log_dir/tests-$v.log" | sed 's/^SKIPPED /  /' | cut -c1-160 >&2 || true
done
[[ $status -eq 0 ]] || { echo "rocm-tier2: FAILED (logs in $log_dir)" >&2; exit 1; }
echo "rocm-tier2: ok in ROCm $run_rocms, $(($(date +%s) - t0)) s" >&2
