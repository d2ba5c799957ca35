#!/usr/bin/env bash
# Stages, on the development machine, what scripts/cutlass-anchor.sh needs on the GPU machine
# (the CUTLASS anchor of issue 28, benches/anchors/cutlass_conv/): CUTLASS's header tree,
# taken unmodified from the pinned nvidia-cutlass wheel on PyPI, compressed into the ignored
# folder that travels with the device call (carry=[".device-carry"]):
#
#   .device-carry/anchors/cutlass-include.tar.xz   include/{cutlass,cute}/... and LICENSE.txt
#                                                  (~1 MiB; the tree is 27 MiB unpacked)
#   .device-carry/anchors/CUTLASS-MANIFEST.txt     package, wheel name and sha256,
#                                                  CUTLASS version, tarball sha256
#
# The wheel (nvidia-cutlass 4.2.0.0, py3-none-any, CUTLASS 4.2.0) is the one whose sha256 is
# pinned below; a download with any other digest stops the script. Only
# cutlass_library/source/include/ and the licence are taken from it; the Python parts of the
# package are not used. The tarball is reproducible (sorted names, fixed mtime and owner).
#
#   scripts/cutlass-anchor-build.sh
#   CUTLASS_ANCHOR_LOCAL_NVCC=/path/to/nvcc scripts/cutlass-anchor-build.sh
#       also compiles benches/anchors/cutlass_conv/cutlass_conv.cu here (sm_90, the split build of
#       scripts/cutlass-anchor.sh, two units at a time) and links it: a compile check, no run.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

CUTLASS_PACKAGE=nvidia-cutlass
CUTLASS_PACKAGE_VERSION=4.2.0.0
CUTLASS_VERSION=4.2.0
WHEEL=nvidia_cutlass-4.2.0.0-py3-none-any.whl
WHEEL_SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6

cache=target/cutlass-anchor-cache
stage=.device-carry/anchors
mkdir -p "$cache" "$stage"

# 1. The wheel, pinned by version and digest.
if [[ -f $cache/$WHEEL ]] && echo "$WHEEL_SHA256  $cache/$WHEEL" | sha256sum -c --status; then
    echo "cutlass-anchor-build: $WHEEL already in $cache"
else
    rm -f "$cache/$WHEEL"
    python3 -m pip download --no-deps --only-binary=:all: --dest "$cache" \
        "$CUTLASS_PACKAGE==$CUTLASS_PACKAGE_VERSION"
fi
if ! echo "$WHEEL_SHA256  $cache/$WHEEL" | sha256sum -c --status; then
    echo "cutlass-anchor-build: sha256 of $cache/$WHEEL is $(sha256sum "$cache/$WHEEL" | cut -d' ' -f1)," \
        "expected $WHEEL_SHA256: refusing to stage it" >&2
    exit 1
fi
echo "cutlass-anchor-build: $WHEEL sha256 $WHEEL_SHA256 (verified)"

# 2. The include tree and the licence only.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$cache/$WHEEL" "$tmp/x" <<'EOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith("cutlass_library/source/include/")
             or (n.startswith("nvidia_cutlass-") and n.endswith("/licenses/LICENSE.txt"))]
    z.extractall(dest, names)
print(f"cutlass-anchor-build: extracted {len(names)} entries")
EOF
mkdir -p "$tmp/tree"
mv "$tmp/x/cutlass_library/source/include" "$tmp/tree/include"
cp "$tmp"/x/nvidia_cutlass-*.dist-info/licenses/LICENSE.txt "$tmp/tree/LICENSE.txt"
hdr=$tmp/tree/include/cutlass/conv/device/implicit_gemm_convolution.h
[[ -f $hdr ]] || { echo "cutlass-anchor-build: $hdr missing from the wheel" >&2; exit 1; }
got=$(sed -n 's/^#define CUTLASS_MAJOR \([0-9]*\).*/\1/p; s/^#define CUTLASS_MINOR \([0-9]*\).*/\1/p; s/^#define CUTLASS_PATCH \([0-9]*\).*/\1/p' \
    "$tmp/tree/include/cutlass/version.h" | paste -sd.)
[[ $got == "$CUTLASS_VERSION" ]] || { echo "cutlass-anchor-build: version.h says $got, expected $CUTLASS_VERSION" >&2; exit 1; }

# 3. Reproducible tar.xz.
tarball=$stage/cutlass-include.tar.xz
tar -C "$tmp/tree" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - include LICENSE.txt |
    xz -6 -T2 -c >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
tar_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
cat >"$stage/CUTLASS-MANIFEST.txt" <<EOF
package         $CUTLASS_PACKAGE==$CUTLASS_PACKAGE_VERSION (PyPI)
wheel           $WHEEL
wheel sha256    $WHEEL_SHA256
cutlass         $CUTLASS_VERSION (include/cutlass/version.h)
contents        cutlass_library/source/include/ of the wheel as include/, unmodified; LICENSE.txt
tarball         cutlass-include.tar.xz
tarball sha256  $tar_sha
unpacked bytes  $(du -sb "$tmp/tree" | cut -f1)
EOF
echo "cutlass-anchor-build: staged $tarball: $(stat -c %s "$tarball") bytes" \
    "($(du -h "$tarball" | cut -f1)), sha256 $tar_sha"
echo "cutlass-anchor-build: .device-carry is now $(du -sh .device-carry | cut -f1) (the device tool carries 64 MiB at most)"
if (( $(du -sm .device-carry | cut -f1) > 60 )); then
    echo "cutlass-anchor-build: WARNING: .device-carry is over 60 MiB" >&2
fi

# 4. Optional local compile check (no GPU needed; needs nvcc with the CUDA headers).
if [[ -n ${CUTLASS_ANCHOR_LOCAL_NVCC:-} ]]; then
    nvcc=$CUTLASS_ANCHOR_LOCAL_NVCC
    obj=$tmp/obj
    mkdir -p "$obj"
    flags=(-arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr -DNDEBUG
        -Xcudafe --diag_suppress=esa_on_defaulted_function_ignored -I"$tmp/tree/include"
        "-DCUTLASS_ANCHOR_PACKAGE=\"$CUTLASS_PACKAGE==$CUTLASS_PACKAGE_VERSION\"")
    echo "cutlass-anchor-build: compile check with $("$nvcc" --version | tail -1)"
    start=$SECONDS
    for tu in 100 0 1 2 3 4 5; do
        "$nvcc" "${flags[@]}" -Xptxas -v -DANCHOR_TU=$tu -c benches/anchors/cutlass_conv/cutlass_conv.cu \
            -o "$obj/tu$tu.o" >"$obj/tu$tu.log" 2>&1 &
        if (( tu != 100 && tu % 2 == 1 )); then wait; fi
    done
    wait
    for tu in 100 0 1 2 3 4 5; do
        [[ -f $obj/tu$tu.o ]] || { cat "$obj/tu$tu.log" >&2; echo "cutlass-anchor-build: unit $tu failed" >&2; exit 1; }
    done
    grep -h "registers\|spill" "$obj"/tu[0-5].log | sed 's/^ *//' | sort | uniq -c || true
    nvcc_dir=$(dirname "$(readlink -f "$nvcc")")
    "$nvcc" -arch=sm_90 "$obj"/tu*.o -o "$obj/cutlass_conv" -L"$nvcc_dir/../lib"
    "$obj/cutlass_conv" --list
    echo "cutlass-anchor-build: compile check ok in $((SECONDS - start)) s"
fi
