#!/usr/bin/env bash
# build.sh: build the hip-on-cuda test libraries and their test program with gcc.
#
#   rocm-backend/testing/hip-on-cuda/build.sh OUTDIR
#
# Produces OUTDIR/lib/{libamdhip64,libhiprtc,librocblas,libMIOpen}.so (use ROCM_PATH=OUTDIR)
# and OUTDIR/bin/test_hip_on_cuda. Compiled against the real ROCm headers staged by
# stage-headers.sh (.device-carry/rocm-include, or HOC_ROCM_INCLUDE) and the CUDA toolkit /
# cuDNN headers, linked against libcuda, NVRTC, cuBLAS and cuDNN by full path, with each
# library's directory in the RUNPATH so that nothing else needs setting at run time.
#
# Where CUDA is looked for, in order: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, the toolkit
# of the nvcc on PATH, the roots in
# HOC_SEARCH_ROOTS (colon-separated), and python3's site-packages (the nvidia-* wheels that
# PyTorch brings: nvidia/cu13, nvidia/cudnn, ...). The first root holding a file wins.
#
# HOC_CHECK_ONLY=1: a machine without the NVIDIA driver (no libcuda): compile and link
# everything, leaving the driver's symbols unresolved; nothing can run. This is the
# signature check against the ROCm headers that can be done anywhere.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out/lib" "$out/bin" "$out/obj"
out=$(cd "$out" && pwd)
check_only=${HOC_CHECK_ONLY:-0}

rocm_inc=${HOC_ROCM_INCLUDE:-$repo/.device-carry/rocm-include}
[[ -f "$rocm_inc/hip/hip_runtime_api.h" ]] || {
    echo "build.sh: no ROCm headers in $rocm_inc; run stage-headers.sh first" >&2
    exit 1
}

# ---- find CUDA -------------------------------------------------------------------------
roots=()
nvcc_root=""
command -v nvcc >/dev/null 2>&1 && nvcc_root=$(dirname "$(dirname "$(command -v nvcc)")")
for r in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "$nvcc_root"; do [[ -n "$r" && -d "$r" ]] && roots+=("$r"); done
IFS=: read -r -a extra <<<"${HOC_SEARCH_ROOTS:-}"
for r in "${extra[@]}"; do [[ -n "$r" && -d "$r" ]] && roots+=("$r"); done
if command -v python3 >/dev/null 2>&1; then
    while IFS= read -r r; do [[ -n "$r" && -d "$r" ]] && roots+=("$r"); done < <(
        python3 -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' 2>/dev/null || true)
fi
# Where headers and libraries sit under a root: a toolkit, or the pip wheels' layouts.
inc_subdirs=(include targets/x86_64-linux/include nvidia/cu13/include nvidia/cudnn/include nvidia/cublas/include
    nvidia/cuda_nvrtc/include nvidia/cuda_runtime/include)
lib_subdirs=(lib64 lib targets/x86_64-linux/lib nvidia/cu13/lib nvidia/cudnn/lib nvidia/cublas/lib nvidia/cuda_nvrtc/lib)

# find_header FILE -> the include directory holding FILE
find_header() {
    local r s
    for r in "${roots[@]}"; do
        for s in "${inc_subdirs[@]}"; do
            [[ -f "$r/$s/$1" ]] && { echo "$r/$s"; return 0; }
        done
    done
    return 1
}
# find_lib NAME -> the path of libNAME.so or libNAME.so.<n> (not the builtins/alt variants)
find_lib() {
    local r s f
    for r in "${roots[@]}"; do
        for s in "${lib_subdirs[@]}"; do
            for f in "$r/$s/lib$1.so" "$r/$s"/lib"$1".so.[0-9]*; do
                [[ -f "$f" ]] && { echo "$f"; return 0; }
            done
        done
    done
    return 1
}
need() { "$@" || { echo "build.sh: not found: ${*: -1} (searched: ${roots[*]})" >&2; exit 1; }; }

cuda_inc=$(need find_header cuda.h)
nvrtc_inc=$(need find_header nvrtc.h)
cublas_inc=$(need find_header cublas_v2.h)
cudnn_inc=$(need find_header cudnn.h)
fp16_inc=$(need find_header cuda_fp16.h)
# cuda_runtime_api.h (under cublas_v2.h and cudnn.h) includes crt/host_defines.h, which the
# pip runtime wheel does not carry (the nvidia-cuda-crt wheel does).
crt_inc=$(find_header crt/host_defines.h || true)
nvrtc_lib=$(need find_lib nvrtc)
cublas_lib=$(need find_lib cublas)
cudnn_lib=$(need find_lib cudnn)

# The driver: the system's libcuda.so.1 (found by the dynamic loader at run time, so no
# RUNPATH for it), else a toolkit's link stub.
cuda_lib=""
for f in $(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF}') /usr/local/nvidia/lib64/libcuda.so.1 \
    /usr/lib/x86_64-linux-gnu/libcuda.so.1; do
    [[ -f "$f" ]] && { cuda_lib=$f; break; }
done
if [[ -z "$cuda_lib" ]]; then
    for r in "${roots[@]}"; do
        for f in "$r/lib64/stubs/libcuda.so" "$r/targets/x86_64-linux/lib/stubs/libcuda.so"; do
            [[ -f "$f" ]] && { cuda_lib=$f; break 2; }
        done
    done
fi
if [[ -z "$cuda_lib" && "$check_only" != 1 ]]; then
    echo "build.sh: no libcuda (NVIDIA driver) found; set HOC_CHECK_ONLY=1 for a compile-only check" >&2
    exit 1
fi

incs=()
for d in "$cuda_inc" "$nvrtc_inc" "$cublas_inc" "$cudnn_inc" "$crt_inc"; do
    [[ -z "$d" ]] && continue
    [[ " ${incs[*]:-} " == *" -I$d "* ]] || incs+=("-I$d")
done
cuda_version=$(awk '/#define CUDA_VERSION / {print $3}' "$cuda_inc/cuda.h")
cudnn_version=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {printf "%s%s", sep, $3; sep="."}' "$cudnn_inc/cudnn_version.h")
cat <<EOF
build.sh: ROCm headers  $rocm_inc ($(sed -n 's/^HIP version: //p' "$rocm_inc/STAGED.txt" 2>/dev/null || echo "version unknown"))
build.sh: cuda.h        $cuda_inc (CUDA_VERSION $cuda_version)
build.sh: cuda_fp16.h   $fp16_inc (hiprtc's default -I)
build.sh: cuDNN headers $cudnn_inc ($cudnn_version)
build.sh: libcuda       ${cuda_lib:-none (check only)}
build.sh: NVRTC         $nvrtc_lib
build.sh: cuBLAS        $cublas_lib
build.sh: cuDNN         $cudnn_lib
EOF

# ---- compile -----------------------------------------------------------------------------
cc=${CC:-gcc}
# __HIP_PLATFORM_AMD__: the platform ROCm compiles its clients for; with it the HIP headers
# declare the AMD runtime's API (and, in plain C, pull in no device-compiler code).
cflags=(-std=c11 -O2 -g -Wall -Wextra -fPIC -D__HIP_PLATFORM_AMD__ ${HOC_CFLAGS:-})
src=$here/src
obj=$out/obj
rpath() { echo "-Wl,-rpath,$(dirname "$1")"; }
# The driver link: nothing in check-only mode without a stub.
cuda_link=()
[[ -n "$cuda_lib" ]] && cuda_link=("$cuda_lib")
undefined=()
[[ -z "$cuda_lib" ]] && undefined=(-Wl,--allow-shlib-undefined)

# Each library exports its API and nothing else.
printf '{ global: hip*; hoc_make_current; hoc_trace_begin; hoc_trace_end; local: *; };\n' >"$obj/amdhip64.map"
printf '{ global: hiprtc*; local: *; };\n' >"$obj/hiprtc.map"
printf '{ global: rocblas_*; local: *; };\n' >"$obj/rocblas.map"
printf '{ global: miopen*; local: *; };\n' >"$obj/miopen.map"

set -x
# libamdhip64 in three translation units: hip_runtime.c (the core: errors, contexts, trace),
# hip_device.c (devices, memory, streams, events), hip_module.c (modules, launches).
"$cc" "${cflags[@]}" -I"$rocm_inc" -I"$cuda_inc" -c "$src/hip_runtime.c" -o "$obj/hip_runtime.o"
"$cc" "${cflags[@]}" -I"$rocm_inc" -I"$cuda_inc" -c "$src/hip_device.c" -o "$obj/hip_device.o"
"$cc" "${cflags[@]}" -I"$rocm_inc" -I"$cuda_inc" -c "$src/hip_module.c" -o "$obj/hip_module.o"
"$cc" -shared -o "$out/lib/libamdhip64.so" -Wl,-soname,libamdhip64.so -Wl,--version-script="$obj/amdhip64.map" \
    "$obj/hip_runtime.o" "$obj/hip_device.o" "$obj/hip_module.o" "${cuda_link[@]}" -lpthread

"$cc" "${cflags[@]}" -I"$rocm_inc" -I"$nvrtc_inc" -DHOC_CUDA_INCLUDE="\"$fp16_inc\"" -c "$src/hiprtc.c" -o "$obj/hiprtc.o"
"$cc" -shared -o "$out/lib/libhiprtc.so" -Wl,-soname,libhiprtc.so -Wl,--version-script="$obj/hiprtc.map" \
    "$obj/hiprtc.o" "$nvrtc_lib" "$(rpath "$nvrtc_lib")"

"$cc" "${cflags[@]}" -I"$rocm_inc" "${incs[@]}" -c "$src/rocblas.c" -o "$obj/rocblas.o"
"$cc" -shared -o "$out/lib/librocblas.so" -Wl,-soname,librocblas.so -Wl,--version-script="$obj/rocblas.map" \
    "$obj/rocblas.o" -L"$out/lib" -lamdhip64 "$cublas_lib" "${cuda_link[@]}" '-Wl,-rpath,$ORIGIN' "$(rpath "$cublas_lib")"

# MIOpen in two translation units: miopen.h brings hip_runtime_api.h, whose vector types
# collide with those cudnn.h brings from the CUDA runtime headers.
"$cc" "${cflags[@]}" -I"$rocm_inc" -c "$src/miopen_api.c" -o "$obj/miopen_api.o"
"$cc" "${cflags[@]}" "${incs[@]}" -c "$src/miopen_cudnn.c" -o "$obj/miopen_cudnn.o"
"$cc" -shared -o "$out/lib/libMIOpen.so" -Wl,-soname,libMIOpen.so -Wl,--version-script="$obj/miopen.map" \
    "$obj/miopen_api.o" "$obj/miopen_cudnn.o" -L"$out/lib" -lamdhip64 "$cudnn_lib" '-Wl,-rpath,$ORIGIN' \
    "$(rpath "$cudnn_lib")"

# The test sees only the ROCm headers. Three files: test_hip_on_cuda.c (helpers, HIP runtime
# tests, main), test_hiprtc_modules.c, test_rocblas_miopen.c.
"$cc" "${cflags[@]}" -I"$rocm_inc" -c "$here/test_hip_on_cuda.c" -o "$obj/test_hip_on_cuda.o"
"$cc" "${cflags[@]}" -I"$rocm_inc" -c "$here/test_hiprtc_modules.c" -o "$obj/test_hiprtc_modules.o"
"$cc" "${cflags[@]}" -I"$rocm_inc" -c "$here/test_rocblas_miopen.c" -o "$obj/test_rocblas_miopen.o"
"$cc" -o "$out/bin/test_hip_on_cuda" "$obj/test_hip_on_cuda.o" "$obj/test_hiprtc_modules.o" "$obj/test_rocblas_miopen.o" \
    -L"$out/lib" -lMIOpen -lrocblas -lhiprtc -lamdhip64 \
    -lm -pthread -Wl,-rpath,"$out/lib" "${undefined[@]}"
{ set +x; } 2>/dev/null
echo "build.sh: built $out/lib/{libamdhip64,libhiprtc,librocblas,libMIOpen}.so and $out/bin/test_hip_on_cuda"
