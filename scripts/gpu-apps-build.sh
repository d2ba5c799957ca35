#!/usr/bin/env bash
# Builds, on the development machine, what scripts/gpu-apps.sh needs on the GPU machine
# (the application figures of issues 6 and 7: SD VAE decode and Real-CUGAN on the H200),
# and stages it, compressed, in .device-carry/apps/ (an ignored folder that travels with
# the device call as part of carry=[".device-carry"]):
#
#   bin/sd-vae-decode.xz, bin/sd-vae-encode.xz, bin/realcugan.xz, bin/rocm-vision-info.xz
#                                            release builds, stripped, HIP bindings pinned
#                                            to the chroot's HIP 6.4.43484 as
#                                            scripts/gpu-tier-build.sh pins them
#   models/models-se/up2x-no-denoise.{param,bin}
#                                            the only Real-CUGAN model the run needs
#                                            (from models/, scripts/fetch-models.sh)
#   py/diffusers.tar.xz                      diffusers 0.42.1 (the wheel, unpacked, unmodified):
#                                            the PyTorch reference AutoencoderKL; the GPU
#                                            machine has torch, numpy, huggingface-hub,
#                                            safetensors, regex, requests, filelock, pillow
#   py/ncnn.tar.xz                           ncnn 1.0.20261020 cp312 manylinux wheel, unpacked
#                                            (the engine of realcugan-ncnn-vulkan); the GPU
#                                            machine has numpy, tqdm, requests, portalocker
#   gl/*.deb                                 Debian's Vulkan loader and libglvnd (the GPU
#                                            machine has NVIDIA's ICD but no loader), unpacked
#                                            there under /tmp, never into /
#   MANIFEST.txt                             versions, sources and sha256 of all of the above
#
# The GPU machine's python3 is 3.12 (/opt/torch/.venv, torch 2.11.0+cu130), hence cp312.
# Everything large is xz-compressed: .device-carry as a whole must stay well under the
# device tool's 64 MiB (it also holds the GPU-tier test binaries and the ROCm headers).
#
#   scripts/gpu-apps-build.sh                 # build + stage
#   GPU_APPS_SKIP_BUILD=1 scripts/gpu-apps-build.sh   # stage the binaries already built
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
stage=.device-carry/apps
cache=target/gpu-apps-cache
DIFFUSERS_VERSION=0.42.1
NCNN_VERSION=1.0.20261020
DEBS="libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2"
mkdir -p "$cache"

# 1. The two CLIs, release, with the HIP bindings pinned as for the GPU-tier binaries.
# HIP_PATH is passed into the chroot by the hipconfig wrapper, so it must be the path
# inside it; setting it also makes cubecl-hip-sys rerun its build script.
export PATH="$repo/scripts:$PATH" HIP_PATH=/usr
hip=$(hipconfig --version)
echo "hipconfig --version: $hip (the HIP the bindings are generated for)"
if [[ ${GPU_APPS_SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release -p examples-sd -p examples-sr -p rocm-vision --bin sd-vae-decode --bin sd-vae-encode --bin realcugan \
        --bin rocm-vision-info
fi
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/py" "$stage/gl" "$stage/models/models-se"
for b in sd-vae-decode sd-vae-encode realcugan rocm-vision-info; do
    strip -o "$cache/$b" "${CARGO_TARGET_DIR:-target}/release/$b"
    xz -6 -T2 -c "$cache/$b" >"$stage/bin/$b.xz"
done

# 2. The Real-CUGAN model of the 2x se no-denoise run, in the layout --model-dir expects.
if [[ ! -f models/models-se/up2x-no-denoise.param ]]; then
    scripts/fetch-models.sh
fi
# up4x-no-denoise (the 4x model, on the RGBA input) as well, for the GPU fixture
# cases (tests/fixtures.rs; 2.7 MB: more would pass the device tool's 64 MiB).
for m in up2x-no-denoise up4x-no-denoise; do
    cp "models/models-se/$m.param" "models/models-se/$m.bin" "$stage/models/models-se/"
done

# 3. Python packages the GPU machine lacks, as unpacked wheels (py3.12, x86-64 manylinux).
pipdl() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -d "$cache/wheels" "$1"
}
pipdl "diffusers==$DIFFUSERS_VERSION"
pipdl "ncnn==$NCNN_VERSION"
for pkg in diffusers ncnn; do
    whl=$(ls "$cache"/wheels/"$pkg"-*.whl | head -1)
    rm -rf "$cache/unpacked-$pkg"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$cache/unpacked-$pkg"
    tar -C "$cache/unpacked-$pkg" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - . |
        xz -9 -T2 >"$stage/py/$pkg.tar.xz"
done

# 4. The Vulkan loader and libglvnd for ncnn's Vulkan path (Debian bookworm, amd64).
mkdir -p "$cache/debs"
# shellcheck disable=SC2086
if ! (cd "$cache/debs" && apt-get download $DEBS >/dev/null 2>&1); then
    apt-get update >/dev/null
    # shellcheck disable=SC2086
    (cd "$cache/debs" && apt-get download $DEBS)
fi
for d in $DEBS; do
    cp "$(ls "$cache"/debs/"$d"_*.deb | sort -V | tail -1)" "$stage/gl/"
done

# 5. Manifest.
{
    echo "# .device-carry/apps: staged by scripts/gpu-apps-build.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# git: $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!.device-carry' || echo ' + uncommitted changes')"
    echo "# binaries: cargo build --release (rustc $(rustc --version | cut -d' ' -f2)), HIP bindings for hipconfig $hip, stripped, xz"
    echo "# diffusers $DIFFUSERS_VERSION and ncnn $NCNN_VERSION from PyPI wheels (unpacked, tar.xz):"
    for w in "$cache"/wheels/*.whl; do echo "#   $(basename "$w") sha256 $(sha256sum "$w" | cut -d' ' -f1)"; done
    echo "# Debian packages: $(cd "$stage/gl" && ls | tr '\n' ' ')"
    echo "# models: models-se/up2x-no-denoise and up4x-no-denoise from models/ (see models/SOURCE.txt)"
    echo "# uncompressed: sd-vae-decode $(stat -c %s "$cache/sd-vae-decode") B, realcugan $(stat -c %s "$cache/realcugan") B"
    (cd "$stage" && find . -type f ! -name MANIFEST.txt | sort | xargs sha256sum)
} >"$stage/MANIFEST.txt"
cat "$stage/MANIFEST.txt"
du -sh "$stage"
du -sh .device-carry
