#!/usr/bin/env bash
# Build and run the HIP/hiprtc smoke programs inside the ROCm chroot (no GPU needed):
#   hiprtc_smoke    what hipInit/hipGetDeviceCount/hipMalloc return without a GPU, and a
#                   small fp16/bf16/shuffle kernel through hiprtc for gfx1100/gfx1201/gfx942
#   hiprtc_kernels  every kernels/src/*.hip through hiprtc for the archs given (default
#                   gfx1100 gfx1201), the headers as in-memory files, every entry point
#                   checked in the code object
# Usage: scripts/rocm-smoke/run.sh [ARCH...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
archs=("$@")
[[ ${#archs[@]} -gt 0 ]] || archs=(gfx1100 gfx1201)
arch_opts=""
for a in "${archs[@]}"; do arch_opts+=" --arch $a"; done
build=$(mktemp -d /tmp/rocm-smoke.XXXXXX)
trap 'rm -rf "$build"' EXIT
ROCM_CHROOT_BINDS="$repo:$repo $build:$build" "$repo/scripts/rocm-chroot.sh" run -- sh -c "
    set -e
    cd '$repo'
    gcc -O2 -Wall -Wextra -Werror -D__HIP_PLATFORM_AMD__ -o '$build/hiprtc_smoke' scripts/rocm-smoke/hiprtc_smoke.c -lamdhip64 -lhiprtc
    gcc -O2 -Wall -Wextra -Werror -D__HIP_PLATFORM_AMD__ -o '$build/hiprtc_kernels' scripts/rocm-smoke/hiprtc_kernels.c -lhiprtc
    echo '== hiprtc_smoke'
    '$build/hiprtc_smoke'
    echo '== hiprtc_kernels'
    '$build/hiprtc_kernels' --header kernels/src/prelude.h --header kernels/src/mma.h $arch_opts kernels/src/*.hip
"
