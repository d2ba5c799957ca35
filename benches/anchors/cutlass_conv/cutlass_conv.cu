// CUTLASS anchor for issue 28: CUTLASS 2.x implicit-GEMM forward convolution (the SM80
// mma.sync tensor-op kernels, the instruction class of our own ImplicitGemm) on the shapes of
// the SD VAE decoder and Real-CUGAN, timed on the GPU it runs on (an H100 runs the SM80
// kernels as compiled for sm_90).
//
//   cutlass::conv::device::ImplicitGemmConvolution<
//     cutlass::conv::kernel::DefaultConv2dFprop<E, TensorNHWC, E, TensorNHWC (KRSC), E, TensorNHWC,
//       float, OpClassTensorOp, Sm80, threadblock, warp, GemmShape<16,8,16>,
//       LinearCombination<E, 8, float, float> (alpha 1, beta 0), GemmIdentityThreadblockSwizzle<4>,
//       stages, OpMultiplyAdd, IteratorAlgorithm::kOptimized, StrideSupport::kStrided>::Kernel>
//
// with E = cutlass::half_t and cutlass::bfloat16_t, and three tile configurations, all three
// from the CUTLASS profiler's own SM80 16816 list (its generator.py), ThreadblockShape:WarpShape:
// stages = 128x128x32:64x64x32:5, 128x128x64:64x64x64:3 and 128x128x64:64x64x64:4. Like the
// profiler, the anchor figure of a shape is the fastest configuration that passed its check.
//
// Built by scripts/cutlass-anchor.sh (headers of the nvidia-cutlass wheel, staged by
// scripts/cutlass-anchor-build.sh). The file compiles either as one translation unit (everything)
// or split so that nvcc can run in parallel:
//   -DANCHOR_TU=100            main program only (no CUTLASS kernel)
//   -DANCHOR_TU=i, 0 <= i < 6  the kernel of configuration i only (see ANCHOR_CONFIGS)
//   (no ANCHOR_TU)             everything in one unit
// This file is the only one compiled; it picks the parts of the unit by ANCHOR_TU and includes
// them from this folder (kept as headers of one unit, not separate units, so that every
// ANCHOR_TU builds exactly what it did when all of it was one file):
//   interface.h   SubConv, AnchorOps, kNumConfigs, make_ops<I>() (every unit)
//   kernels.cuh   the CUTLASS configurations (ANCHOR_TU 0..5, or none)
//   host.cuh      shapes, fill/check kernels, decoding, utilities, bands (ANCHOR_TU 100, or none)
//   main.cuh      main(): arguments, check, timing, JSON, summary (ANCHOR_TU 100, or none)
//
// Usage: cutlass_conv [--shapes a,b] [--dtypes f16,bf16] [--configs c1,c2] [--reps N]
//                     [--warmup N] [--samples N] [--budget-s S] [--shape name:n,c,h,w,k,r,stride,pad]
//                     [--list]
// stdout: one JSON line per (shape, dtype, configuration); stderr: progress and, at the end, a
// table of the best configuration per (shape, dtype). Exit status 0: every check passed; 1: a
// check failed or a CUDA error happened; 2: bad arguments or no usable GPU; 3: the --budget-s
// time limit left shapes unmeasured (their JSON lines say "skipped").
//
// Tensors over 2^31 bytes: CUTLASS 2.x convolutions refuse them in can_implement (32-bit
// offsets; 2048^2 x 256 and x 512 channels in f16 are 2 GiB and 4 GiB). Such a problem runs as
// `bands` horizontal bands of output rows, each a separate launch on a view of the same tensors
// (N = 1: a band of rows is contiguous in NHWC): the first band keeps the top padding, the
// others start one halo row above their first output row with pad_h = 0, and the bottom padding
// comes from the band's H bound. The time is the sum of the bands' launches (between the same
// two events), and the JSON line says how many there were.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#ifndef ANCHOR_TU
#define ANCHOR_TU -1
#endif
#define ANCHOR_TU_MAIN 100
#define ANCHOR_WITH_KERNELS (ANCHOR_TU != ANCHOR_TU_MAIN)
#define ANCHOR_WITH_MAIN (ANCHOR_TU < 0 || ANCHOR_TU == ANCHOR_TU_MAIN)

// ------------------------------------------------------------------------------------------------
// The interface between the main program and the kernel units.
#include "interface.h"

// ------------------------------------------------------------------------------------------------
// Kernel units.
#if ANCHOR_WITH_KERNELS
#include "kernels.cuh"
#endif  // ANCHOR_WITH_KERNELS

// ------------------------------------------------------------------------------------------------
// Main program.
#if ANCHOR_WITH_MAIN
#include "cutlass/version.h"  // main.cuh's, here to keep the include order of the one-file version
#include "host.cuh"
#include "main.cuh"
#endif  // ANCHOR_WITH_MAIN
