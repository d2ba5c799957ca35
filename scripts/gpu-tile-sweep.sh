#!/usr/bin/env bash
# Real-CUGAN 2x at 1920x1080 in tiles of several sizes under the CLI's default 2 GiB
# budget, f16 and f32, on the GPU machine (issue 12: which tile `--tile auto` should take):
# for each `-t N` (and `-t 0` = auto, and the whole image without a budget) the warm
# image's upscale time, the allocator's peak, the tiling the CLI chose, and whether the
# output equals the whole image's byte for byte. Needs .device-carry/apps
# (scripts/gpu-apps-build.sh) and the HIP-on-CUDA library (built here when missing).
# Writes $OUT/tile-sweep.md (also printed).
# Device tool call:
#   run(command="scripts/gpu-tile-sweep.sh", carry=[".device-carry"], kind="nvidia-h200", timeout_s=300)
# SWEEP_BIN=NAME runs .device-carry/apps/bin/NAME.xz instead of realcugan.xz (an older build
# staged beside it, for a same-run comparison); SWEEP_TILES, SWEEP_DTYPES, SWEEP_SIZE choose
# the cases.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/gpu-tile-sweep}
work=/tmp/rv-sweep
lib=/tmp/hip-on-cuda
carry=$repo/.device-carry/apps
mkdir -p "$OUT" "$work/in"
summary=$OUT/tile-sweep.md
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

[[ -f $lib/lib/libamdhip64.so ]] || rocm-backend/testing/hip-on-cuda/build.sh "$lib" >"$work/hoc-build.log" 2>&1
export ROCM_PATH=$lib ROCM_VISION_KERNEL_CACHE=/tmp/rv-kernel-cache
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$carry/bin/${SWEEP_BIN:-realcugan}.xz" "$work/realcugan" && chmod +x "$work/realcugan"
# SWEEP_IMAGES copies of one image (default 2): the first is cold, the rest are warm and the
# table gives their median times.
images=${SWEEP_IMAGES:-2}
rm -f "$work"/in/*.png
python3 benches/anchors/realcugan_ncnn.py make-image "$work/in/a.png" --size "${SWEEP_SIZE:-1920x1080}" >/dev/null
for ((i = 1; i < images; i++)); do cp "$work/in/a.png" "$work/in/w$i.png"; done
# median SECONDS_FIELD LOG: the median over the warm images' lines, in ms.
median() {
    grep "/w[0-9]*.png" "$2" | sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | sort -n |
        awk '{v[NR] = $1} END {if (NR) printf "%.1f", 1000 * (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}

say "# Real-CUGAN 2x ${SWEEP_SIZE:-1920x1080} by tile size, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "carry: $(sed -n 2p "$carry/MANIFEST.txt"), binary ${SWEEP_BIN:-realcugan}"
say ""
say "| dtype | -t | tiling | upscale ms (median of $((images - 1)) warm) | network ms | peak | = whole |"
say "| --- | ---: | --- | ---: | ---: | --- | --- |"
for dt in ${SWEEP_DTYPES:-f16 f32}; do
    for t in whole ${SWEEP_TILES:-0 960 640 544 480 400 320}; do
        out=$work/out-$dt-$t
        args=(--tile "$t" --vram-budget 2GiB)
        [[ $t == whole ]] && args=(--tile whole --vram-budget 24GiB)
        timeout 120 "$work/realcugan" -i "$work/in" -o "$out" -s 2 -n 0 --model se --model-dir "$carry/models" \
            --device rocm --dtype "$dt" --force "${args[@]}" >"$work/$dt-$t.log" 2>&1
        rc=$?
        line=$(grep "/w[0-9]*.png" "$work/$dt-$t.log" | tail -1)
        tiling=$(sed -n 's/.*models-se\/up2x-no-denoise, \([^:]*\):.*/\1/p' <<<"$line" | cut -c1-60)
        up=$(median "(upscale" "$work/$dt-$t.log")
        net=$(median "network" "$work/$dt-$t.log")
        peak=$(sed -n 's/.*peak device memory \([^,)]*\).*/\1/p' <<<"$line")
        same=-
        if [[ $t != whole && -f $out/w1.png && -f $work/out-$dt-whole/w1.png ]]; then
            cmp -s "$out/w1.png" "$work/out-$dt-whole/w1.png" && same=yes || same=NO
        fi
        if ((rc != 0)); then
            say "| $dt | $t | exit $rc: $(grep -m1 -i "error" "$work/$dt-$t.log" | cut -c1-300) | | | | |"
        else
            say "| $dt | $t | $tiling | $up | $net | $peak | $same |"
        fi
    done
done
# The CLI's own lines (input, network and output time of each image) for the record.
grep -h "/w1.png" "$work"/*.log >"$OUT/tile-sweep-lines.txt" 2>/dev/null || true
