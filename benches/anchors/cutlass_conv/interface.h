// Part of cutlass_conv.cu (included from it, not compiled on its own): the interface between the
// main program and the kernel units, which every ANCHOR_TU needs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

// One launch: a (sub-)problem on views of the device tensors (NHWC activation, KRSC filter,
// NPQK output, all packed).
struct SubConv {
  int n, h, w, c, k, r, s, p, q;
  int pad_h, pad_w, stride_h, stride_w;
  const void *x;
  const void *wt;
  void *y;
};

struct AnchorOps {
  const char *dtype;   // "f16" / "bf16"
  const char *config;  // e.g. "128x128x64_64x64x64_s3"
  int tb_m, tb_n, tb_k, warp_m, warp_n, warp_k, inst_m, inst_n, inst_k, stages;
  int threads;
  int smem_bytes;
  bool (*can_implement)(const SubConv &, std::string *why);
  size_t (*workspace_bytes)(const SubConv &);
  // Initializes one operator per band (sets the kernel's dynamic shared memory attribute).
  void *(*create)(const SubConv *subs, int nsubs, void *workspace, std::string *why);
  bool (*run)(void *plan, cudaStream_t stream);
  void (*destroy)(void *plan);
  int (*ctas_per_sm)();  // occupancy, valid once create() has set the smem attribute
};

constexpr int kNumConfigs = 6;
template <int I> AnchorOps make_ops();
