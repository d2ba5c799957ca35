#!/usr/bin/env bash
# The CPU row of docs/measurements/*-any-size.md (issue 30, item 3): an exact SD VAE decode
# far larger than the memory it is given, on this machine's CPU. Writes seeded random
# full-size weights and a latent (benches/decode_cpu.rs --write-inputs), prints the plan,
# then decodes with sd-vae-decode under --vram-budget; the banded run keeps the maps that do
# not fit in unnamed files in --scratch-dir and prints its peak RSS.
#
#   scripts/cpu-any-size.sh [SIZE [BUDGET [DTYPE]]]     # default 4096 8GB f32
#   CPU_ANY_SIZE_DIR=/big/disk scripts/cpu-any-size.sh  # where inputs and maps go (default /tmp)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
size=${1:-4096} budget=${2:-8GB} dtype=${3:-f32}
dir=${CPU_ANY_SIZE_DIR:-/tmp}/rv-cpu-any-size-$size
mkdir -p "$dir"
echo "date: $(date -u +%FT%TZ)  git: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads; $(grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | head -1 || echo 'no avx512')"
echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB; disk free in $dir: $(df -h --output=avail "$dir" | tail -1 | tr -d ' ')"
cargo build --release -q -p examples-sd --bin sd-vae-decode
if [[ ! -f $dir/z.safetensors ]]; then
    cargo bench -q -p examples-sd --bench decode_cpu -- --size "$size" --write-inputs "$dir"
fi
bin=target/release/sd-vae-decode
args=(--model sd --device cpu --dtype "$dtype" --vram-budget "$budget" --scratch-dir "$dir")
echo "\$ sd-vae-decode --plan --size ${size}x$size ${args[*]}"
"$bin" --plan --size "${size}x$size" "${args[@]}"
echo "\$ sd-vae-decode --vae sd_vae_random_diffusers.safetensors --latents z.safetensors ${args[*]} --out $dir/out.png --force"
/usr/bin/time -v "$bin" --vae "$dir/sd_vae_random_diffusers.safetensors" --latents "$dir/z.safetensors" \
    "${args[@]}" --out "$dir/out.png" --force 2> >(grep -v '^\s*\(Page size\|Average\|Socket\|Signals\|Swaps\|Exit status\)' >&2)
