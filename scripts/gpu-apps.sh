#!/usr/bin/env bash
# The application figures of the GPU tier, run ON the NVIDIA H200 machine (called by
# scripts/gpu-tier.sh once the HIP-on-CUDA library is built at /tmp/hip-on-cuda; builds it
# itself, without its test, when it is not there):
#
#   issue 6, SD VAE decode (full-size SD decoder [128, 256, 512, 512], seeded random weights):
#     * PyTorch + cuDNN (diffusers AutoencoderKL.decode, benches/anchors/vae_decode_torch.py):
#       f16 and f32 (TF32 off) at latent 128² (1024² image) and 256² (2048²): median of 5
#       decodes after 2 warm-ups (CUDA events), torch.cuda.max_memory_allocated/reserved;
#     * ours, sd-vae-decode --device rocm on the same weights and latents: a 64² warm-up decode
#       per dtype first (it JIT-compiles the kernels with NVRTC, tens of seconds when the
#       kernel cache /tmp/rv-kernel-cache is cold), then 1024² f16 (--vram-budget 1.6GB),
#       2048² f16 (6GB), 2048² f32 (12GB), 1024² f32 (3.2GB), each with --repeat (the time is
#       the median of decodes 2..N, each ending with a device synchronize) and the allocator's
#       peak as the CLI prints it; a run that fails within its budget is run once more without
#       one, and the table says so;
#     * our images against PyTorch's of the same latents (8-bit levels).
#   issue 7, Real-CUGAN 2x (models-se/up2x-no-denoise) on a deterministic 1920x1080 image:
#     * ours, realcugan --device rocm on a folder of two copies of the image (the second
#       image's upscale time is the warm figure): f32 whole image, f16 whole image, and the
#       default f32 and f16 --tile auto within the default 2GiB budget;
#     * ncnn through Vulkan (benches/anchors/realcugan_ncnn.py, realcugan-ncnn-vulkan's
#       options, whole image): with Debian's Vulkan loader unpacked under the work folder
#       and NVIDIA's ICD; when ncnn finds no Vulkan GPU, the table says so;
#     * our f32 result against ncnn-Vulkan's (8-bit levels).
#   nvidia-smi's memory.used is sampled every 50 ms around each of our runs and ncnn's
#   (whole process: CUDA context, cuBLAS/cuDNN, caches: "peak-ish").
#
# Needs .device-carry/apps (scripts/gpu-apps-build.sh, carried as part of .device-carry),
# python3 with torch, numpy, pillow, safetensors, huggingface-hub (the H200 image has them;
# diffusers and ncnn come unpacked from .device-carry/apps/py).
#
# Writes $OUT/apps/apps.md (the summary tables; also printed) and $OUT/apps/apps-logs.tgz
# (every step's .out/.err, the .jsonl records, nvidia-smi samples, steps.tsv) -- two files
# only, since the device tool returns at most 8 files from $OUT and gpu-tier.sh writes six.
# OUT defaults to target/gpu-apps. Every step has its own timeout, and all of them together
# stop starting new work after GPU_APPS_SECONDS (default 140; the summary is still written).
# A failed step is reported and the script goes on; exit status 1 if any of our steps failed
# (ncnn is a third-party anchor: its failure, e.g. no Vulkan, is reported, not fatal).
# GPU_APPS_VAE_BUDGETS="1.6GB 6GB 12GB 3.2GB" sets the --vram-budget of the 1024² f16, 2048²
# f16, 2048² f32 and 1024² f32 decodes ("-" for none).
# GPU_APPS_TORCH_CONFIGS (default f16:L1,f32:L1,f16:L2,f32:L2 with L1/L2 the 1024²/2048² latent
# sizes, written as "1k"/"2k") chooses PyTorch's decodes; GPU_APPS_TORCH_LAST=1 runs PyTorch after
# our decodes (when device time is short, our peaks come first). A SIGTERM (the device tool's
# time limit) starts no further step but still writes the comparisons and the summary.
#
# GPU_APPS_TUNE=SECONDS adds the tools' --tune runs (Real-CUGAN f16 whole image, the 1024² f16
# decode) with a fresh tuning store, beside the untuned ones.
# GPU_APPS_SMOKE=1 runs the same steps on the CPU with a tiny VAE config and small images
# (a check of this script, the staging and the parsing on a machine without a GPU);
# GPU_APPS_PYTHON / GPU_APPS_PYTHON_SR choose the python of the VAE / Real-CUGAN steps.
#
# Standalone device tool call:
#   run(command="scripts/gpu-apps.sh", carry=[".device-carry"], kind="nvidia-h200", timeout_s=300)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
OUT=${OUT:-$repo/target/gpu-apps}
out=$OUT/apps
work=${GPU_APPS_WORK:-/tmp/rv-apps}
logs=$work/logs
carry=$repo/.device-carry/apps
smoke=${GPU_APPS_SMOKE:-0}
py=${GPU_APPS_PYTHON:-python3}
py_sr=${GPU_APPS_PYTHON_SR:-$py}
start=$(date +%s)
deadline=$((start + ${GPU_APPS_SECONDS:-140}))
lib=/tmp/hip-on-cuda
status=0
mkdir -p "$out" "$work"
rm -rf "$logs" "$work/vae" "$work/sr"
mkdir -p "$logs" "$work/vae/ref" "$work/sr/in"
: >"$logs/steps.tsv"

if [[ $smoke == 1 ]]; then
    device=cpu
    torch_device=cpu
    vae_model=(--config "$repo/examples-sd/fixtures/sd_config.json")
    torch_config=(--config "$repo/examples-sd/fixtures/sd_config.json")
    lat_warm=8 lat_1k=16 lat_2k=24
    sr_size=96x64
    torch_reps=(--reps 2 --warmup 1)
    ncnn_runs=1
else
    device=rocm
    torch_device=cuda
    vae_model=(--model sd)
    torch_config=()
    lat_warm=8 lat_1k=128 lat_2k=256
    sr_size=1920x1080
    torch_reps=(--reps 5 --warmup 2)
    ncnn_runs=3
fi

echo "lat_warm=$lat_warm lat_1k=$lat_1k lat_2k=$lat_2k sr_size=$sr_size" >"$logs/sizes.txt"

# step NAME MAX_SECONDS CMD...: CMD with stdout to $logs/NAME.out and stderr to NAME.err,
# under a timeout of MAX_SECONDS or what is left before the deadline, whichever is less;
# one line in steps.tsv (name, exit status, seconds, limit). 124/137 = timed out; 125 =
# not started (deadline). A failure sets status=1 and returns the exit status.
step() {
    local name=$1 max=$2
    shift 2
    local now left lim t0 rc ms dt
    now=$(date +%s)
    left=$((deadline - now))
    if ((left < 5)); then
        printf '%s\t125\t0\t0\n' "$name" >>"$logs/steps.tsv"
        echo "== $name: not started (past the ${GPU_APPS_SECONDS:-140} s deadline)"
        status=1
        return 125
    fi
    lim=$((max < left ? max : left))
    t0=$(date +%s%N)
    timeout -k 5 "$lim" "$@" >"$logs/$name.out" 2>"$logs/$name.err"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    dt=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$lim" >>"$logs/steps.tsv"
    echo "== $name: exit $rc in ${dt} s (limit $lim s)"
    if ((rc != 0)); then
        status=1
        tail -4 "$logs/$name.err" | sed 's/^/   | /'
    fi
    return $rc
}

# A step that always runs (cheap: comparisons, the report), with its own small timeout.
always() {
    local saved=$deadline
    deadline=$(($(date +%s) + 3600))
    step "$@"
    local rc=$?
    deadline=$saved
    return $rc
}

# nvidia-smi memory.used (MiB) every 50 ms into $logs/NAME.smi while NAME runs.
smi_pid=
smi_start() {
    smi_pid=
    command -v nvidia-smi >/dev/null || return 0
    # Line-buffered, so that what it sampled is in the file when it is stopped.
    local buf=()
    command -v stdbuf >/dev/null && buf=(stdbuf -oL)
    "${buf[@]}" nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 >"$logs/$1.smi" 2>/dev/null &
    smi_pid=$!
    sleep 0.3
}
smi_stop() {
    [[ -n $smi_pid ]] || return 0
    sleep 0.1
    kill -INT "$smi_pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$smi_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$smi_pid" 2>/dev/null
    wait "$smi_pid" 2>/dev/null
    smi_pid=
}
trap 'smi_stop' EXIT
trap 'deadline=0; echo "== SIGTERM: no further steps; writing the summary"' TERM

# --- 0. the machine, the payload ----------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  smoke: $smoke  device: $device"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    echo "python: $(command -v "$py") $("$py" --version 2>&1)"
    "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1
    echo "ROCM_PATH=$lib ROCM_VISION_KERNEL_CACHE=${ROCM_VISION_KERNEL_CACHE:-/tmp/rv-kernel-cache}"
    echo "kernel cache entries before: $(ls "${ROCM_VISION_KERNEL_CACHE:-/tmp/rv-kernel-cache}" 2>/dev/null | wc -l)"
    head -3 "$carry/MANIFEST.txt" 2>/dev/null
} >"$logs/machine.txt" 2>&1
cat "$logs/machine.txt"

if [[ $device == rocm && ! -f $lib/lib/libamdhip64.so ]]; then
    step hoc-build 150 rocm-backend/testing/hip-on-cuda/build.sh "$lib"
fi
export ROCM_PATH=$lib ROCM_VISION_KERNEL_CACHE=${ROCM_VISION_KERNEL_CACHE:-/tmp/rv-kernel-cache}

unpack() {
    set -e
    cd "$carry"
    grep -v '^#' MANIFEST.txt | sha256sum -c --quiet
    rm -rf "$work/bin" "$work/site" "$work/gl"
    mkdir -p "$work/bin" "$work/site" "$work/gl"
    # python's lzma and tarfile rather than xz(1), which a base image may lack.
    for b in sd-vae-decode sd-vae-encode realcugan; do
        "$py" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "bin/$b.xz" "$work/bin/$b"
        chmod +x "$work/bin/$b"
    done
    for t in py/*.tar.xz; do
        "$py" -c 'import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)' "$t" "$work/site"
    done
    for d in gl/*.deb; do dpkg-deb -x "$d" "$work/gl"; done
    ls -la "$work/bin" "$work/gl/usr/lib/x86_64-linux-gnu"
}
export -f unpack
export carry work py
step unpack 40 bash -c unpack
sd=$work/bin/sd-vae-decode
rcugan=$work/bin/realcugan

# GPU_APPS_SECTIONS (default "vae sr") chooses the parts: vae (issue 6), sr (issue 7),
# anysize (issue 30: the banded exact decode at 2048²-8192² within 16 GB).
sections=" ${GPU_APPS_SECTIONS:-vae sr} "
has() { [[ $sections == *" $1 "* ]]; }
lat_4k=$((lat_2k * 2)) lat_8k=$((lat_2k * 4))

# --- 1. issue 6: SD VAE decode ---------------------------------------------------------------
vae=$work/vae
lats="$lat_warm,$lat_1k,$lat_2k"
make_enc=()
has anysize && lats="$lats,$lat_4k,$lat_8k" make_enc=(--encoder)
step vae-make 60 "$py" benches/anchors/vae_decode_torch.py make --dir "$vae" \
    --latents "$lats" "${torch_config[@]}" "${make_enc[@]}"
cp "$logs/vae-make.out" "$logs/vae-make.jsonl" 2>/dev/null

torch_configs=${GPU_APPS_TORCH_CONFIGS:-f16:1k,f32:1k,f16:2k,f32:2k}
torch_configs=${torch_configs//1k/$lat_1k}
torch_configs=${torch_configs//2k/$lat_2k}
torch_vae() {
    step vae-torch 100 env PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
        "$py" benches/anchors/vae_decode_torch.py bench --dir "$vae" --device "$torch_device" "${torch_config[@]}" \
        --configs "$torch_configs" "${torch_reps[@]}" --save-images "$vae/ref"
    cp "$logs/vae-torch.out" "$logs/vae-torch.jsonl" 2>/dev/null
}
has vae && [[ ${GPU_APPS_TORCH_LAST:-0} != 1 ]] && torch_vae

# ours NAME DTYPE LATENT BUDGET REPEAT MAX_SECONDS: one sd-vae-decode run (its budget, then,
# if that failed but did not time out, without one: NAME-nobudget).
ours_vae() {
    local name=$1 dtype=$2 lat=$3 budget=$4 repeat=$5 max=$6 rc
    local args=(--vae "$vae/sd_vae_random.safetensors" "${vae_model[@]}" --latents "$vae/latent_$lat.npy"
        --device "$device" --dtype "$dtype" --repeat "$repeat" --force)
    smi_start "$name"
    step "$name" "$max" "$sd" "${args[@]}" --out "$vae/$name.png" ${budget:+--vram-budget "$budget"}
    rc=$?
    smi_stop
    if [[ $rc != 0 && $rc != 124 && $rc != 137 && $rc != 125 && -n $budget ]]; then
        smi_start "$name-nobudget"
        step "$name-nobudget" "$max" "$sd" "${args[@]}" --out "$vae/$name.png"
        smi_stop
    fi
}
# ours_vae with --tune (GPU_APPS_TUNE seconds).
ours_vae_tuned() {
    local name=$1 dtype=$2 lat=$3 budget=$4 repeat=$5 max=$6
    smi_start "$name"
    step "$name" "$max" "$sd" --vae "$vae/sd_vae_random.safetensors" "${vae_model[@]}" --latents "$vae/latent_$lat.npy" \
        --device "$device" --dtype "$dtype" --repeat "$repeat" --force --out "$vae/$name.png" \
        ${budget:+--vram-budget "$budget"} --tune "$GPU_APPS_TUNE"
    smi_stop
}
read -r b16_1k b16_2k b32_2k b32_1k <<<"${GPU_APPS_VAE_BUDGETS:-1.6GB 6GB 12GB 3.2GB}"
nob() { [[ $1 == - ]] || echo "$1"; }
if has vae && [[ -f $vae/sd_vae_random.safetensors ]]; then
    ours_vae vae-ours-warmup-f16 f16 "$lat_warm" "" 1 150
    ours_vae vae-ours-f16-1k f16 "$lat_1k" "$(nob "$b16_1k")" 4 45
    ours_vae vae-ours-f16-2k f16 "$lat_2k" "$(nob "$b16_2k")" 3 60
    if [[ -n ${GPU_APPS_TUNE:-} ]]; then
        # Decode 1 tunes (a fresh store), decodes 2..4 run the winners: their median
        # against vae-ours-f16-1k's is the tuned-vs-untuned figure.
        ROCM_VISION_TUNING=$work/tuning.tsv ours_vae_tuned vae-ours-f16-1k-tuned f16 "$lat_1k" \
            "$(nob "$b16_1k")" 4 $((GPU_APPS_TUNE + 45))
        grep -A40 '^tuning:' "$logs/vae-ours-f16-1k-tuned.err" | tail -40
    fi
    ours_vae vae-ours-warmup-f32 f32 "$lat_warm" "" 1 90
    ours_vae vae-ours-f32-2k f32 "$lat_2k" "$(nob "$b32_2k")" 3 60
fi
has vae && [[ ${GPU_APPS_TORCH_LAST:-0} == 1 ]] && torch_vae

# --- 2. issue 7: Real-CUGAN 2x ---------------------------------------------------------------
sr=$work/sr
models=$carry/models
has sr && step sr-image 30 "$py_sr" benches/anchors/realcugan_ncnn.py make-image "$sr/in/frame_a.png" --size "$sr_size" &&
    cp "$sr/in/frame_a.png" "$sr/in/frame_b.png"

ours_sr() { # NAME MAX_SECONDS ARGS...
    local name=$1 max=$2
    shift 2
    smi_start "$name"
    step "$name" "$max" "$rcugan" -i "$sr/in" -o "$sr/$name" -s 2 -n 0 --model se --model-dir "$models" \
        --device "$device" --force "$@"
    smi_stop
}
if [[ -f $sr/in/frame_b.png ]]; then
    ours_sr sr-ours-f32-whole 60 --dtype f32 --tile whole --vram-budget 24GiB

    # ncnn through Vulkan: Debian's loader from the payload, NVIDIA's ICD from the driver.
    icd=
    for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
        /etc/vulkan/icd.d/nvidia_icd.json /usr/local/share/vulkan/icd.d/nvidia_icd.json; do
        [[ -f $f ]] && icd=$f && break
    done
    if [[ -z $icd ]]; then
        glx=$(ldconfig -p 2>/dev/null | awk '/libGLX_nvidia.so.0/ {print $NF; exit}')
        [[ -z $glx && -f /usr/local/nvidia/lib64/libGLX_nvidia.so.0 ]] && glx=/usr/local/nvidia/lib64/libGLX_nvidia.so.0
        if [[ -n $glx ]]; then
            icd=$work/gl/nvidia_icd.json
            printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' "$glx" >"$icd"
        fi
    fi
    echo "Vulkan ICD: ${icd:-none found: no nvidia_icd.json and no libGLX_nvidia.so.0}" | tee "$logs/vulkan.txt"
    vk_env=(LD_LIBRARY_PATH="$work/gl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    [[ -n $icd ]] && vk_env+=(VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd")
    sr_path=$work/site
    [[ $smoke == 1 ]] && sr_path= # the carried ncnn is for the H200's python 3.12
    smi_start sr-ncnn-vulkan
    saved_status=$status
    step sr-ncnn-vulkan 60 env "${vk_env[@]}" PYTHONPATH="$sr_path${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
        "$py_sr" benches/anchors/realcugan_ncnn.py run --param "$models/models-se/up2x-no-denoise.param" \
        --bin "$models/models-se/up2x-no-denoise.bin" --image "$sr/in/frame_a.png" --scale 2 \
        --runs "$ncnn_runs" --save-npy "$sr/ncnn_vulkan.npy"
    status=$saved_status # an anchor that cannot run here is reported, not a failure of ours
    smi_stop
    cp "$logs/sr-ncnn-vulkan.out" "$logs/sr-ncnn-vulkan.jsonl" 2>/dev/null

    ours_sr sr-ours-f16-whole 60 --dtype f16 --tile whole --vram-budget 24GiB
    # GPU_APPS_TUNE=SECONDS (issue 28's --tune): the same run tuning on its first image (a
    # fresh store), the second image on the winners; the report goes to stderr.
    if [[ -n ${GPU_APPS_TUNE:-} ]]; then
        ROCM_VISION_TUNING=$work/tuning.tsv ours_sr sr-ours-f16-whole-tuned $((GPU_APPS_TUNE + 60)) \
            --dtype f16 --tile whole --vram-budget 24GiB --tune "$GPU_APPS_TUNE"
        grep -A40 '^tuning:' "$logs/sr-ours-f16-whole-tuned.err" | tail -40
    fi
    ours_sr sr-ours-f32-auto 60 --dtype f32
    ours_sr sr-ours-f16-auto 60 --dtype f16
fi

# Least important last: our 1024² f32 (PyTorch's f32 1024² is in its table anyway).
has vae && [[ -f $vae/sd_vae_random.safetensors ]] && ours_vae vae-ours-f32-1k f32 "$lat_1k" "$(nob "$b32_1k")" 4 45

# --- 2b. issue 30: the banded exact decode (any size in a fixed budget) -------------------------
# Each run: its --plan line first (the plan's device and host bytes), then the decode; the
# CLI prints the allocator's peak and, banded, the process's peak RSS (host maps). "si" runs
# use --size-independent-rounding, under which banded and whole must be the same PNG.
if has anysize && [[ -f $vae/sd_vae_random.safetensors ]]; then
    # GPU_APPS_ANY="any-warmup any-4k-banded ..." runs only the listed runs (default: all);
    # GPU_APPS_TRACE="any-4k-banded ..." runs those under HOC_TRACE and appends the trace's
    # report (scripts/hoc-trace-report.py: GPU busy/idle, time by kernel and copy) to anysize.md.
    wanted() { [[ -z ${GPU_APPS_ANY:-} || " $GPU_APPS_ANY " == *" $1 "* ]]; }
    any() { # NAME LATENT MAX_SECONDS ARGS...
        local name=$1 lat=$2 max=$3 trace=()
        shift 3
        wanted "$name" || return 0
        [[ " ${GPU_APPS_TRACE:-} " == *" $name "* ]] && trace=(HOC_TRACE="$logs/$name.trace.csv")
        step "$name-plan" 30 "$sd" --plan --latents "$vae/latent_$lat.npy" "${vae_model[@]}" --device "$device" "$@"
        smi_start "$name"
        # Every conv plan on stderr (conv_engine::dispatch at debug): the table counts the
        # algorithms each run took (a band that falls back to direct convolution is slow).
        step "$name" "$max" env "${trace[@]}" NO_COLOR=1 RUST_LOG=conv_engine::dispatch=debug "$sd" \
            --vae "$vae/sd_vae_random.safetensors" "${vae_model[@]}" --latents "$vae/latent_$lat.npy" \
            --device "$device" --force --out "$vae/$name.png" "$@"
        smi_stop
        if ((${#trace[@]})) && [[ -f $logs/$name.trace.csv ]]; then
            always "$name-trace" 60 "$py" scripts/hoc-trace-report.py "$logs/$name.trace.csv" \
                --split-bytes 1000000000000000 --gaps 6 --segments all
        fi
    }
    whole_budget=${GPU_APPS_WHOLE_BUDGET:-72GB}
    any any-warmup "$lat_warm" 150 --dtype f16
    any any-2k-si-whole "$lat_2k" 60 --dtype f16 --size-independent-rounding --vram-budget "$whole_budget"
    any any-2k-si-banded "$lat_2k" 60 --dtype f16 --size-independent-rounding --banded --vram-budget 3GB
    any any-4k-whole "$lat_4k" 90 --dtype f16 --vram-budget "$whole_budget" --repeat 2
    any any-4k-banded "$lat_4k" 120 --dtype f16 --vram-budget 16GB --repeat 2
    any any-4k-si-whole "$lat_4k" 90 --dtype f16 --size-independent-rounding --vram-budget "$whole_budget"
    any any-4k-si-banded "$lat_4k" 120 --dtype f16 --size-independent-rounding --vram-budget 16GB
    any any-8k-banded "$lat_8k" 240 --dtype f16 --vram-budget 16GB
    # The encoder: 4096² whole and banded (size-independent: the same latents), 8192² banded.
    enc() { # NAME SIZE MAX_SECONDS ARGS...
        local name=$1 size=$2 max=$3
        shift 3
        wanted "$name" || return 0
        step "$name-plan" 30 "$work/bin/sd-vae-encode" --plan --size "$size" "${vae_model[@]}" --device "$device" "$@"
        smi_start "$name"
        step "$name" "$max" "$work/bin/sd-vae-encode" --vae "$vae/sd_encoder_random.safetensors" "${vae_model[@]}" \
            --image "$vae/image_$size.png" --device "$device" --force --mean --out "$vae/$name.npy" "$@"
        smi_stop
    }
    s4=$((lat_4k * 8))x$((lat_4k * 8)) s8=$((lat_8k * 8))x$((lat_8k * 8))
    for sz in "$s4" "$s8"; do
        wanted any-enc-4k-si-whole || wanted any-enc-4k-si-banded || wanted any-enc-8k-banded || continue
        step "image-$sz" 60 "$py" benches/anchors/realcugan_ncnn.py make-image "$vae/image_$sz.png" --size "$sz"
    done
    enc any-enc-4k-si-whole "$s4" 90 --dtype f16 --size-independent-rounding --vram-budget "$whole_budget"
    enc any-enc-4k-si-banded "$s4" 120 --dtype f16 --size-independent-rounding --banded --vram-budget 16GB
    enc any-enc-8k-banded "$s8" 240 --dtype f16 --vram-budget 16GB
    a=$vae/any-enc-4k-si-banded.npy b=$vae/any-enc-4k-si-whole.npy
    if [[ -f $a && -f $b ]]; then
        if cmp -s "$a" "$b"; then r=identical; else r=DIFFERENT; fi
        echo "any-enc-4k-si banded vs whole latents: $r" | tee -a "$logs/anysize.txt"
    fi
    for pair in 2k-si 4k-si 4k; do
        a=$vae/any-$pair-banded.png b=$vae/any-$pair-whole.png
        if [[ -f $a && -f $b ]]; then
            if cmp -s "$a" "$b"; then r=identical; else r=DIFFERENT; fi
            echo "any-$pair banded vs whole PNG: $r" | tee -a "$logs/anysize.txt"
        fi
    done
fi

# --- 3. comparisons (always; numpy + pillow only) --------------------------------------------
: >"$logs/compare.jsonl"
cmp_vae() { # OURS_PNG LABEL REF...
    local png=$1 label=$2 refs=()
    shift 2
    [[ -f $png ]] || return 0
    for r in "$@"; do [[ -f $r ]] && refs+=(--ref "$r"); done
    ((${#refs[@]})) || return 0
    always "cmp-$label" 30 "$py" benches/anchors/vae_decode_torch.py compare --ours "$png" --label "$label" "${refs[@]}" &&
        cat "$logs/cmp-$label.out" >>"$logs/compare.jsonl"
}
cmp_vae "$vae/vae-ours-f16-1k.png" "f16-$lat_1k" "$vae/ref/torch_f32_$lat_1k.npy" "$vae/ref/torch_f16_$lat_1k.npy"
cmp_vae "$vae/vae-ours-f16-2k.png" "f16-$lat_2k" "$vae/ref/torch_f32_$lat_2k.npy" "$vae/ref/torch_f16_$lat_2k.npy"
cmp_vae "$vae/vae-ours-f32-2k.png" "f32-$lat_2k" "$vae/ref/torch_f32_$lat_2k.npy"
cmp_vae "$vae/vae-ours-f32-1k.png" "f32-$lat_1k" "$vae/ref/torch_f32_$lat_1k.npy"
cmp_vae "$vae/any-4k-banded.png" "any-4k-banded-vs-whole" "$vae/any-4k-whole.png"
for v in f32-whole f16-whole f32-auto f16-auto; do
    if [[ -f $sr/sr-ours-$v/frame_a.png && -f $sr/ncnn_vulkan.npy ]]; then
        always "cmp-sr-$v" 30 "$py_sr" benches/anchors/realcugan_ncnn.py compare --ours "$sr/sr-ours-$v/frame_a.png" \
            --ref "$sr/ncnn_vulkan.npy" --label "sr-$v" && cat "$logs/cmp-sr-$v.out" >>"$logs/compare.jsonl"
    fi
done
# Whole and --tile auto of the same dtype must agree exactly (tiling is lossless).
for dt in f32 f16; do
    if [[ -f $sr/sr-ours-$dt-whole/frame_a.png && -f $sr/sr-ours-$dt-auto/frame_a.png ]]; then
        if cmp -s "$sr/sr-ours-$dt-whole/frame_a.png" "$sr/sr-ours-$dt-auto/frame_a.png"; then
            echo "identical" >"$logs/sr-whole-vs-auto-$dt.txt"
        else
            echo "DIFFERENT" >"$logs/sr-whole-vs-auto-$dt.txt"
        fi
    fi
done

# --- 4. summary ------------------------------------------------------------------------------
echo "kernel cache entries after: $(ls "$ROCM_VISION_KERNEL_CACHE" 2>/dev/null | wc -l)" >>"$logs/machine.txt"
echo "total: $(($(date +%s) - start)) s" >>"$logs/machine.txt"
"$py" scripts/gpu-apps-report.py "$logs" >"$out/apps.md" 2>"$logs/report.err" || {
    status=1
    echo "report failed:"
    cat "$logs/report.err"
}
if has anysize; then
    # The any-size table: each run's plan line and what the CLI measured.
    {
        echo "## any size (issue 30)"
        for f in "$logs"/any-*.out; do
            [[ $f == *-plan.out || $f == *-trace.out ]] && continue
            n=$(basename "$f" .out)
            echo "### $n"
            sed 's/^/    /' "$logs/$n-plan.out" 2>/dev/null
            grep -h "^banded\|^wrote\|decode times" "$logs/$n.err" "$f" 2>/dev/null | sed 's/^/    /'
            echo "    nvidia-smi peak MiB: $(sort -n "$logs/$n.smi" 2>/dev/null | tail -1)"
            echo "    conv plans by algorithm: $(grep -o 'algorithm=[A-Za-z0-9_-]*' "$logs/$n.err" 2>/dev/null |
                sort | uniq -c | tr -s ' \n' ' ')"
            [[ -f $logs/$n-trace.out ]] && sed 's/^/    /' "$logs/$n-trace.out"
        done
        cat "$logs/anysize.txt" 2>/dev/null
        grep -h any- "$logs/compare.jsonl" 2>/dev/null
    } >"$out/anysize.md"
    cat "$out/anysize.md"
fi
tar -C "$logs" -czf "$out/apps-logs.tgz" .
cat "$out/apps.md"
echo "gpu-apps: $(($(date +%s) - start)) s, exit $status"
exit $status
