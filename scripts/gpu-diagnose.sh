#!/usr/bin/env bash
# Where the time goes around the convolutions (issue 12), run ON the GPU machine in one
# call, with the binaries of scripts/gpu-tier-build.sh and scripts/gpu-apps-build.sh:
#   0. the GPU-tier test binaries named in GPU_DIAG_TESTS;
#   1. the elementwise kernels against the device copy (bench-gpu_elementwise, and
#      bench-gpu_elementwise-baseline when an older build of it is staged beside it);
#   2. Real-CUGAN 2x on two 960x540 images in one process, f32 then f16, with the
#      HIP-on-CUDA library's call statistics (HOC_STATS=1: calls and host time of every
#      runtime, hiprtc and rocBLAS entry point) and the process's user and system time;
#   3. the SD VAE decode at 1024² f16 (3 decodes) with the same statistics;
#   2c. with GPU_DIAG_TRACE=1, a timeline of Real-CUGAN f16 (HOC_TRACE, hoc-trace-report.py);
#   4. Nsight Compute on the elementwise benchmark's first binary adds (bandwidth,
#      occupancy, launch statistics), when ncu is there.
# Writes $OUT/diagnose.md (the summary, also printed) and $OUT/diagnose-logs.tgz.
# Device tool call:
#   run(command="scripts/gpu-diagnose.sh", carry=[".device-carry"], kind="nvidia-h200", timeout_s=600)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/gpu-diagnose}
work=/tmp/rv-diag
logs=$work/logs
lib=/tmp/hip-on-cuda
carry=$repo/.device-carry/apps
mkdir -p "$OUT" "$logs" "$work/sr/in" "$work/vae"
start=$(date +%s)
# Steps start only before this deadline and are cut at it (the device tool allows 600 s).
deadline=$((start + ${GPU_DIAG_SECONDS:-540}))
status=0
summary=$OUT/diagnose.md
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# step NAME SECONDS CMD...: stdout and stderr to $logs/NAME.log, exit status and seconds noted.
step() {
    local name=$1 max=$2
    shift 2
    local t0 rc left=$((deadline - $(date +%s)))
    if ((left < 10)); then
        say "- $name: not started (deadline)"
        status=1
        return 125
    fi
    ((max < left)) || max=$left
    t0=$(date +%s%N)
    timeout -k 5 "$max" bash -c '"$@"' _ "$@" >"$logs/$name.log" 2>&1
    rc=$?
    say "- $name: exit $rc in $(((($(date +%s%N) - t0) / 1000000)))ms"
    ((rc == 0)) || status=1
    return $rc
}

say "# gpu-diagnose $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$summary"
say "carry: $(head -2 "$carry/MANIFEST.txt" 2>/dev/null | tail -1)"
step hoc-build 150 rocm-backend/testing/hip-on-cuda/build.sh "$lib"
export ROCM_PATH=$lib ROCM_VISION_KERNEL_CACHE=/tmp/rv-kernel-cache

for b in sd-vae-decode realcugan rocm-vision-info; do
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        "$carry/bin/$b.xz" "$work/$b" && chmod +x "$work/$b"
done

# The GPU-tier binaries come xz-compressed (scripts/gpu-tier-build.sh).
for z in .device-carry/bin/*.xz; do
    [[ -f $z ]] || continue
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "${z%.xz}" &&
        chmod +x "${z%.xz}" && rm -f "$z"
done

# timed CMD...: CMD, then its wall, user and system seconds (bash's time: /usr/bin/time may
# not be on the machine).
timed() {
    local TIMEFORMAT='real %R s, user %U s, sys %S s'
    time "$@"
}
export -f timed

# Every kernel module compiled once, in parallel, before anything needs one.
if [[ -x $work/rocm-vision-info ]]; then
    step warm-cache 150 "$work/rocm-vision-info" --device rocm --warm-cache
    grep -E "compil|ready" "$logs/warm-cache.log" >>"$summary"
fi

# 0. GPU-tier test binaries named in GPU_DIAG_TESTS (e.g. "test-gpu_parity test-gpu_tensor").
export ROCM_VISION_REQUIRE_GPU=1 REALCUGAN_MODELS=$carry/models
for t in ${GPU_DIAG_TESTS:-}; do
    step "$t" 240 ".device-carry/bin/$t" --test-threads=1
    grep -E "^test result|panicked|FAILED" "$logs/$t.log" | tail -3 >>"$summary"
done

# 1. elementwise kernels against the copy (and a baseline build of the benchmark, if staged;
#    GPU_DIAG_ELEMENTWISE=0 skips it)
[[ ${GPU_DIAG_ELEMENTWISE:-1} == 1 ]] && for b in bench-gpu_elementwise-baseline bench-gpu_elementwise; do
    [[ -x .device-carry/bin/$b ]] || continue
    say "### $b"
    step "$b" 120 ".device-carry/bin/$b" --reps 10
    grep -E '^\|' "$logs/$b.log" >>"$summary"
done

# 2. Real-CUGAN, two images per process: the second is warm.
python3 benches/anchors/realcugan_ncnn.py make-image "$work/sr/in/a.png" --size "${GPU_DIAG_SR_SIZE:-960x540}" >/dev/null &&
    cp "$work/sr/in/a.png" "$work/sr/in/b.png"
for dt in f32 f16; do
    HOC_STATS=1 step "sr-$dt" 150 timed "$work/realcugan" -i "$work/sr/in" -o "$work/sr/out-$dt" -s 2 -n 0 \
        --model se --model-dir "$carry/models" --device rocm --dtype "$dt" --tile whole --vram-budget 24GiB --force --profile
    say '```'
    grep -E "upscale|peak|profile|^real " "$logs/sr-$dt.log" | head -12 >>"$summary"
    grep -E "hip-on-cuda stats" "$logs/sr-$dt.log" | head -14 >>"$summary"
    say '```'
done

# 2b. The same with --tile auto under the default 2 GiB budget (GPU_DIAG_SR_AUTO=1): the
#     tiled run's wall against its kernel time (ncu-sr-auto below).
if [[ ${GPU_DIAG_SR_AUTO:-0} == 1 ]]; then
    HOC_STATS=1 step sr-f16-auto 150 timed "$work/realcugan" -i "$work/sr/in" -o "$work/sr/out-auto" -s 2 -n 0 \
        --model se --model-dir "$carry/models" --device rocm --dtype f16 --tile auto --force --profile
    say '```'
    grep -E "upscale|peak|profile|^real " "$logs/sr-f16-auto.log" | head -12 >>"$summary"
    grep -E "hip-on-cuda stats" "$logs/sr-f16-auto.log" | head -14 >>"$summary"
    say '```'
fi

# 2c. A timeline of Real-CUGAN f16 (GPU_DIAG_TRACE=1): the hip-on-cuda trace (HOC_TRACE,
#     events around every stream operation) and scripts/hoc-trace-report.py's GPU-idle gaps
#     and what the host did in them, for the whole image and for --tile auto.
if [[ ${GPU_DIAG_TRACE:-0} == 1 ]]; then
    for mode in whole auto; do
        budget=(--vram-budget 24GiB)
        [[ $mode == auto ]] && budget=()
        HOC_TRACE=$work/trace-sr-$mode.csv step "trace-sr-$mode" 150 "$work/realcugan" -i "$work/sr/in" \
            -o "$work/sr/out-trace-$mode" -s 2 -n 0 --model se --model-dir "$carry/models" --device rocm --dtype f16 \
            --tile "$mode" "${budget[@]}" --force --profile
        grep -E "upscale|profile" "$logs/trace-sr-$mode.log" | head -6 >>"$summary"
        python3 scripts/hoc-trace-report.py "$work/trace-sr-$mode.csv" --gaps 25 >"$logs/trace-sr-$mode-report.md" 2>&1
        say "### timeline, Real-CUGAN f16 --tile $mode: the last segment (the warm image)"
        python3 scripts/hoc-trace-report.py "$work/trace-sr-$mode.csv" --gaps 25 --segments last >>"$summary" 2>&1
        xz -c "$work/trace-sr-$mode.csv" >"$OUT/trace-sr-$mode.csv.xz" 2>/dev/null || true
    done
fi

# 3. SD VAE decode 1024² f16 (GPU_DIAG_VAE=0 skips it).
[[ ${GPU_DIAG_VAE:-1} == 1 ]] && step vae-make 120 python3 benches/anchors/vae_decode_torch.py make --dir "$work/vae" --latents 8,128
if [[ ${GPU_DIAG_VAE:-1} == 1 && -f $work/vae/sd_vae_random.safetensors ]]; then
    step vae-warm 150 "$work/sd-vae-decode" --vae "$work/vae/sd_vae_random.safetensors" --model sd \
        --latents "$work/vae/latent_8.npy" --device rocm --dtype f16 --out "$work/vae/w.png" --force
    HOC_STATS=1 step vae-f16-1k 120 timed "$work/sd-vae-decode" --vae "$work/vae/sd_vae_random.safetensors" \
        --model sd --latents "$work/vae/latent_128.npy" --device rocm --dtype f16 --repeat 3 --vram-budget 1.6GB \
        --out "$work/vae/o.png" --force
    say '```'
    grep -E "decode|peak|^real " "$logs/vae-f16-1k.log" | head -12 >>"$summary"
    grep -E "hip-on-cuda stats" "$logs/vae-f16-1k.log" | head -14 >>"$summary"
    say '```'
fi

# 4. Per-kernel time (ncu) of one VAE decode at 1024² f16 and one Real-CUGAN 960x540 f16
#    image (GPU_DIAG_NCU_APPS=0 skips it).
if command -v ncu >/dev/null && [[ ${GPU_DIAG_NCU_APPS:-1} == 1 ]]; then
    ncu_sum() { # NAME CMD...: the per-kernel summary (whole log in the tarball)
        local name=$1
        shift
        step "$name" 200 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel "$@"
        grep -E "^\s+[a-z_0-9]+ \(|Invocations|gpu__time_duration.sum" "$logs/$name.log" | head -120 >>"$summary"
    }
    [[ ${GPU_DIAG_NCU_VAE:-1} == 1 && ${GPU_DIAG_VAE:-1} == 1 ]] && ncu_sum ncu-vae "$work/sd-vae-decode" --vae "$work/vae/sd_vae_random.safetensors" --model sd \
        --latents "$work/vae/latent_128.npy" --device rocm --dtype f16 --vram-budget 1.6GB --out "$work/vae/n.png" --force
    rm -rf "$work/sr/one" && mkdir -p "$work/sr/one" && cp "$work/sr/in/a.png" "$work/sr/one/"
    ncu_sum ncu-sr "$work/realcugan" -i "$work/sr/one" -o "$work/sr/out-ncu" -s 2 -n 0 --model se \
        --model-dir "$carry/models" --device rocm --dtype f16 --tile whole --vram-budget 24GiB --force --profile
    [[ ${GPU_DIAG_SR_AUTO:-0} == 1 ]] && ncu_sum ncu-sr-auto "$work/realcugan" -i "$work/sr/one" -o "$work/sr/out-ncu-auto" \
        -s 2 -n 0 --model se --model-dir "$carry/models" --device rocm --dtype f16 --tile auto --force --profile
fi

# 4b. A timeline of Real-CUGAN's two images (nsys: CUDA API calls, synchronisations and gaps
#     between kernels), when nsys is there and GPU_DIAG_NSYS=1.
if command -v nsys >/dev/null && [[ ${GPU_DIAG_NSYS:-0} == 1 ]]; then
    step nsys-sr 200 nsys profile -o "$work/nsys-sr" --force-overwrite true --stats=true -t cuda \
        "$work/realcugan" -i "$work/sr/in" -o "$work/sr/out-nsys" -s 2 -n 0 --model se --model-dir "$carry/models" \
        --device rocm --dtype f16 --tile whole --vram-budget 24GiB --force --profile
    say '```'
    grep -E "cuda(StreamSynchronize|DeviceSynchronize|Memcpy|LaunchKernel|Malloc|Free|EventSynchronize)|cu(StreamSynchronize|CtxSynchronize|Memcpy|LaunchKernel|MemAlloc|MemFree|EventSynchronize)" \
        "$logs/nsys-sr.log" | head -30 >>"$summary"
    say '```'
    cp "$work/nsys-sr.nsys-rep" "$OUT/" 2>/dev/null || true
fi

# 5. ncu on the first binary adds of the elementwise benchmark (GPU_DIAG_NCU_BINARY=0 skips it).
if command -v ncu >/dev/null && [[ ${GPU_DIAG_NCU_BINARY:-1} == 1 ]]; then
    step ncu-binary 150 ncu --clock-control none --kernel-name regex:'binary_add' --launch-count 3 \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
        .device-carry/bin/bench-gpu_elementwise --reps 1 --mib 64
    say '```'
    grep -E "binary_add|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Grid Size|Block Size|Elapsed Cycles" \
        "$logs/ncu-binary.log" | head -40 >>"$summary"
    say '```'
fi

say "total: $(($(date +%s) - start)) s, exit $status"
tar -C "$logs" -czf "$OUT/diagnose-logs.tgz" .
exit $status
