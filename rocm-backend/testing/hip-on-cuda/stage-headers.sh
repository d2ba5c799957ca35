#!/usr/bin/env bash
# stage-headers.sh: copy the real ROCm headers that hip-on-cuda compiles against out of the
# ROCm toolchain chroot (scripts/rocm-chroot.sh) into .device-carry/rocm-include/ at the
# repository root.
#
# Why: the test libraries are built on the GPU machine, which has no ROCm. Compiling them
# against ROCm's own hip/, rocblas/ and miopen/ headers (HIP 6.4.43484) makes the compiler
# reject any signature that differs from ROCm's. .device-carry/ is git-ignored, so it
# travels to the GPU machine only when the device tool's `carry` names it.
#
# Copied: the three header trees the four libraries and the test include, whole
# (hip/ with amd_detail/, rocblas/ with internal/, miopen/); nothing else (hip_runtime_api.h,
# hiprtc.h, rocblas.h and miopen.h include only files inside these trees, apart from the C
# library). A plain C compile of all four headers is checked afterwards when gcc exists.
#
# Usage: rocm-backend/testing/hip-on-cuda/stage-headers.sh [--rocm 6.4|7.2|all]
#   6.4 (default): the ROCm 6.4 chroot's headers into .device-carry/rocm-include/
#   7.2:           the ROCm 7.2 chroot's (scripts/rocm-chroot.sh --rocm 7.2) into
#                  .device-carry/rocm-include-7.2/; build.sh takes them with
#                  HOC_ROCM_INCLUDE=.device-carry/rocm-include-7.2
#   all:           both. The GPU tier builds the library once per header set
#                  (scripts/gpu-tier.sh) and runs the same test binaries against each.
# Environment: ROCM_CHROOT (the chroot of the one version asked for; default as
# scripts/rocm-chroot.sh: /opt/rocm-vision/chroot, /opt/rocm-vision/chroot-rocm7).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
rocm=6.4
[[ ${1:-} == --rocm ]] && { rocm=${2:?--rocm needs 6.4, 7.2 or all}; shift 2; }
case $rocm in
    all) "$0" --rocm 6.4 && exec "$0" --rocm 7.2 ;;
    6.4) chroot="${ROCM_CHROOT:-/opt/rocm-vision/chroot}"; dest="$repo/.device-carry/rocm-include" ;;
    7.2) chroot="${ROCM_CHROOT:-/opt/rocm-vision/chroot-rocm7}"; dest="$repo/.device-carry/rocm-include-7.2" ;;
    *) echo "stage-headers: unknown --rocm $rocm (6.4, 7.2 or all)" >&2; exit 2 ;;
esac
src="$chroot/usr/include"

for f in hip/hip_runtime_api.h hip/hiprtc.h hip/hip_version.h rocblas/rocblas.h miopen/miopen.h; do
    [[ -f "$src/$f" ]] || {
        echo "stage-headers: $src/$f not found; build the chroot first (scripts/rocm-chroot.sh --rocm $rocm build)" >&2
        exit 1
    }
done

rm -rf "$dest"
mkdir -p "$dest"
cp -a "$src/hip" "$src/rocblas" "$src/miopen" "$dest/"

hip_version=$(awk '/#define HIP_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$dest/hip/hip_version.h")
{
    echo "ROCm headers for hip-on-cuda, staged by rocm-backend/testing/hip-on-cuda/stage-headers.sh"
    echo "from: $src"
    echo "HIP version: $hip_version"
    echo "staged: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$dest/STAGED.txt"

if command -v gcc >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cat >"$tmp/check.c" <<'EOF'
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#include <rocblas/rocblas.h>
typedef struct miopenTensorArgument_t miopenTensorArgument_t;
#include <miopen/miopen.h>
int main(void) { return 0; }
EOF
    gcc -std=c11 -fsyntax-only -D__HIP_PLATFORM_AMD__ -I"$dest" "$tmp/check.c"
fi
echo "stage-headers: HIP $hip_version headers in $dest ($(du -sh "$dest" | cut -f1))"
