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

// ------------------------------------------------------------------------------------------------
// Kernel units.
#if ANCHOR_WITH_KERNELS

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/device_kernel.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"

// (index, element, dtype name, threadblock K = warp K, stages); threadblock 128x128, warp 64x64.
#define ANCHOR_CONFIGS(X)               \
  X(0, cutlass::half_t, "f16", 32, 5)   \
  X(1, cutlass::half_t, "f16", 64, 3)   \
  X(2, cutlass::half_t, "f16", 64, 4)   \
  X(3, cutlass::bfloat16_t, "bf16", 32, 5) \
  X(4, cutlass::bfloat16_t, "bf16", 64, 3) \
  X(5, cutlass::bfloat16_t, "bf16", 64, 4)

template <int I> struct CfgOf;
#define ANCHOR_DECLARE_CFG(I, ELEM, DT, TBK, ST)       \
  template <> struct CfgOf<I> {                        \
    using Element = ELEM;                              \
    static constexpr const char *kDtype = DT;          \
    static constexpr int kTbK = TBK;                   \
    static constexpr int kStages = ST;                 \
  };
ANCHOR_CONFIGS(ANCHOR_DECLARE_CFG)
#undef ANCHOR_DECLARE_CFG

template <int I> struct AnchorImpl {
  using Cfg = CfgOf<I>;
  using Element = typename Cfg::Element;
  using Layout = cutlass::layout::TensorNHWC;
  using ThreadblockShape = cutlass::gemm::GemmShape<128, 128, Cfg::kTbK>;
  using WarpShape = cutlass::gemm::GemmShape<64, 64, Cfg::kTbK>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 16>;
  using EpilogueOp = cutlass::epilogue::thread::LinearCombination<
      Element, 128 / cutlass::sizeof_bits<Element>::value, float, float>;
  using Kernel = typename cutlass::conv::kernel::DefaultConv2dFprop<
      Element, Layout,           // activation, NHWC
      Element, Layout,           // filter, KRSC (TensorNHWC over K, R, S, C)
      Element, Layout,           // output, NPQK
      float,                     // accumulator
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape,
      InstructionShape, EpilogueOp, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>,
      Cfg::kStages, cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kOptimized,
      // Fprop's activation iterators take any stride; the flag only matters for dgrad.
      cutlass::conv::StrideSupport::kStrided>::Kernel;
  using Op = cutlass::conv::device::ImplicitGemmConvolution<Kernel>;

  struct Plan {
    std::vector<Op> ops;
  };

  static constexpr int kSmem = int(sizeof(typename Kernel::SharedStorage));
  static constexpr int kThreads = 32 * Op::kWarpCount;

  static typename Op::Arguments arguments(const SubConv &s) {
    cutlass::conv::Conv2dProblemSize problem(
        s.n, s.h, s.w, s.c, s.k, s.r, s.s, s.p, s.q, s.pad_h, s.pad_w, s.stride_h, s.stride_w,
        /*dilation*/ 1, 1, cutlass::conv::Mode::kCrossCorrelation, /*split_k_slices*/ 1,
        /*groups*/ 1);
    cutlass::TensorRef<Element, Layout> x(static_cast<Element *>(const_cast<void *>(s.x)),
                                          Layout::packed({s.n, s.h, s.w, s.c}));
    cutlass::TensorRef<Element, Layout> w(static_cast<Element *>(const_cast<void *>(s.wt)),
                                          Layout::packed({s.k, s.r, s.s, s.c}));
    cutlass::TensorRef<Element, Layout> y(static_cast<Element *>(s.y),
                                          Layout::packed({s.n, s.p, s.q, s.k}));
    // beta = 0: the epilogue does not read the source (is_source_needed() is false), so C = D.
    return typename Op::Arguments(problem, x, w, y, y, {1.0f, 0.0f},
                                  cutlass::conv::SplitKMode::kSerial);
  }

  static bool can_implement(const SubConv &s, std::string *why) {
    cutlass::Status st = Op::can_implement(arguments(s));
    if (st != cutlass::Status::kSuccess) {
      *why = std::string("can_implement: ") + cutlass::cutlassGetStatusString(st);
      return false;
    }
    return true;
  }

  static size_t workspace_bytes(const SubConv &s) { return Op::get_workspace_size(arguments(s)); }

  static void *create(const SubConv *subs, int nsubs, void *workspace, std::string *why) {
    Plan *plan = new Plan;
    plan->ops.resize(nsubs);
    for (int i = 0; i < nsubs; ++i) {
      cutlass::Status st = plan->ops[i].initialize(arguments(subs[i]), workspace);
      if (st != cutlass::Status::kSuccess) {
        *why = std::string("initialize: ") + cutlass::cutlassGetStatusString(st) + " (" +
               cudaGetErrorString(cudaGetLastError()) + ")";
        delete plan;
        return nullptr;
      }
    }
    return plan;
  }

  static bool run(void *p, cudaStream_t stream) {
    Plan *plan = static_cast<Plan *>(p);
    for (Op &op : plan->ops) {
      if (op.run(stream) != cutlass::Status::kSuccess) return false;
    }
    return true;
  }

  static void destroy(void *p) { delete static_cast<Plan *>(p); }

  static int ctas_per_sm() {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, cutlass::Kernel<Kernel>, kThreads,
                                                      kSmem) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return n;
  }
};

template <int I> AnchorOps make_ops() {
  using A = AnchorImpl<I>;
  static const std::string name =
      std::to_string(A::ThreadblockShape::kM) + "x" + std::to_string(A::ThreadblockShape::kN) +
      "x" + std::to_string(A::ThreadblockShape::kK) + "_" + std::to_string(A::WarpShape::kM) +
      "x" + std::to_string(A::WarpShape::kN) + "x" + std::to_string(A::WarpShape::kK) + "_s" +
      std::to_string(CfgOf<I>::kStages);
  AnchorOps ops;
  ops.dtype = CfgOf<I>::kDtype;
  ops.config = name.c_str();
  ops.tb_m = A::ThreadblockShape::kM;
  ops.tb_n = A::ThreadblockShape::kN;
  ops.tb_k = A::ThreadblockShape::kK;
  ops.warp_m = A::WarpShape::kM;
  ops.warp_n = A::WarpShape::kN;
  ops.warp_k = A::WarpShape::kK;
  ops.inst_m = A::InstructionShape::kM;
  ops.inst_n = A::InstructionShape::kN;
  ops.inst_k = A::InstructionShape::kK;
  ops.stages = CfgOf<I>::kStages;
  ops.threads = A::kThreads;
  ops.smem_bytes = A::kSmem;
  ops.can_implement = &A::can_implement;
  ops.workspace_bytes = &A::workspace_bytes;
  ops.create = &A::create;
  ops.run = &A::run;
  ops.destroy = &A::destroy;
  ops.ctas_per_sm = &A::ctas_per_sm;
  return ops;
}

#if ANCHOR_TU >= 0
static_assert(ANCHOR_TU < kNumConfigs, "ANCHOR_TU: 0..5 (a kernel) or 100 (main only)");
template AnchorOps make_ops<ANCHOR_TU>();
#endif

#endif  // ANCHOR_WITH_KERNELS

// ------------------------------------------------------------------------------------------------
// Main program.
#if ANCHOR_WITH_MAIN

#include "cutlass/version.h"

#define CUDA_OK(expr)                                                                        \
  do {                                                                                       \
    cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "cutlass_conv: CUDA error %s at %s:%d: %s\n", cudaGetErrorString(err_), \
              __FILE__, __LINE__, #expr);                                                    \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

struct Shape {
  std::string name;
  int n, c, h, w, k, r, stride, pad;
};

static const Shape kShapes[] = {
    {"vae-512-512-1k", 1, 512, 1024, 1024, 512, 3, 1, 1},
    {"vae-512-256-1k", 1, 512, 1024, 1024, 256, 3, 1, 1},
    {"vae-256-256-1k", 1, 256, 1024, 1024, 256, 3, 1, 1},
    {"vae-256-128-1k", 1, 256, 1024, 1024, 128, 3, 1, 1},
    {"vae-128-128-1k", 1, 128, 1024, 1024, 128, 3, 1, 1},
    {"vae-512-512-2k", 1, 512, 2048, 2048, 512, 3, 1, 1},
    {"vae-256-256-2k", 1, 256, 2048, 2048, 256, 3, 1, 1},
    {"vae-128-128-2k", 1, 128, 2048, 2048, 128, 3, 1, 1},
    {"sr-32-64-1080p", 1, 32, 1084, 1924, 64, 3, 1, 0},
    {"sr-64-64-1080p", 1, 64, 1082, 1922, 64, 3, 1, 0},
    {"sr-64-128-540p", 1, 64, 544, 964, 128, 3, 1, 0},
    {"sr-128-64-540p", 1, 128, 542, 962, 64, 3, 1, 0},
    {"sr-128-128-540p", 1, 128, 542, 962, 128, 3, 1, 0},
    {"sr-128-256-270p", 1, 128, 274, 484, 256, 3, 1, 0},
    {"sr-256-128-270p", 1, 256, 272, 482, 128, 3, 1, 0},
    {"sr-64-64-s2-1080p", 1, 64, 1080, 1920, 64, 2, 2, 0},
    {"sr-128-128-s2-540p", 1, 128, 540, 960, 128, 2, 2, 0},
};

// ---- deterministic random fill (counter-based: the same values whatever the launch shape) -----

__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-scale, scale), rounded to nearest even into f16 or bf16.
__global__ void fill_uniform(uint16_t *p, size_t count, uint64_t seed, float scale, int bf16) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = mix64(seed ^ mix64(i));
    float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    float v = (2.0f * u - 1.0f) * scale;
    p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
  }
}

__global__ void fill_bits(uint16_t *p, size_t count, uint16_t bits) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = bits;
}

// Counts NaN/Inf elements (the poison is a NaN: an element the kernel did not write counts).
__global__ void count_nonfinite(const uint16_t *p, size_t count, int bf16,
                                unsigned long long *out) {
  const uint16_t mask = bf16 ? 0x7f80 : 0x7c00;
  unsigned long long local = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    local += (p[i] & mask) == mask;
  for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(out, local);
}

__global__ void gather_u16(const uint16_t *src, const unsigned long long *idx, int count,
                           uint16_t *dst) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = src[idx[i]];
}

static int grid_for(size_t count) {
  size_t blocks = (count + 255) / 256;
  return int(std::min<size_t>(blocks, 16384));
}

// ---- host-side decoding --------------------------------------------------------------------

static double f16_to_double(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0)
    v = std::ldexp(double(m), -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(double(m + 1024), e - 25);
  return sign ? -v : v;
}

static double bf16_to_double(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// ---- small utilities -----------------------------------------------------------------------

static std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

static bool in_list(const std::vector<std::string> &list, const std::string &v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

static std::string json_str(const std::string &s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

static std::string json_num(double v, int prec = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (double(v[n / 2 - 1]) + double(v[n / 2]));
}

// ---- bands (for tensors over CUTLASS 2.x's 2^31-byte limit) --------------------------------

struct Band {
  int p0, p1;     // output rows [p0, p1)
  int h0, hrows;  // input rows [h0, h0 + hrows)
  int pad_h;
};

static std::vector<Band> make_bands(const Shape &sh, int P, int Q, size_t elem_bytes) {
  const uint64_t limit = 1ull << 31;
  for (int nb = 1; nb <= P; ++nb) {
    int rows = (P + nb - 1) / nb;
    std::vector<Band> bands;
    bool fits = true;
    for (int p0 = 0; p0 < P; p0 += rows) {
      int p1 = std::min(P, p0 + rows);
      Band b;
      b.p0 = p0;
      b.p1 = p1;
      int last = (p1 - 1) * sh.stride - sh.pad + sh.r;  // one past the last input row read
      if (p0 == 0) {
        b.h0 = 0;
        b.pad_h = sh.pad;
      } else {
        b.h0 = p0 * sh.stride - sh.pad;  // >= 0 since p0 >= 1, stride >= 1 and pad <= stride
        b.pad_h = 0;
      }
      b.hrows = std::min(sh.h, last) - b.h0;
      uint64_t act = uint64_t(sh.n) * b.hrows * sh.w * sh.c * elem_bytes;
      uint64_t outb = uint64_t(sh.n) * (p1 - p0) * Q * sh.k * elem_bytes;
      if (act >= limit || outb >= limit) fits = false;
      bands.push_back(b);
    }
    // Bands of rows need N = 1 (with N > 1 a band of one image is not contiguous).
    if (fits) return bands;
    if (sh.n != 1) return {};
  }
  return {};
}

// ---- one (shape, dtype, configuration) result ----------------------------------------------

struct Result {
  std::string name, dtype, config;
  bool measured = false;
  bool ok = false;
  bool skipped = false;  // not run: can_implement, shared memory, allocation or time budget
  double median_ms = NAN, tflops = NAN;
  int bands = 1;
};

static void usage() {
  fprintf(stderr,
          "usage: cutlass_conv [--shapes a,b] [--dtypes f16,bf16] [--configs c1,c2] [--reps N]\n"
          "                    [--warmup N] [--samples N] [--budget-s S]\n"
          "                    [--shape name:n,c,h,w,k,r,stride,pad]... [--list]\n");
}

template <size_t... Is>
static std::vector<AnchorOps> all_ops(std::index_sequence<Is...>) {
  return {make_ops<int(Is)>()...};
}

int main(int argc, char **argv) {
  auto t_start = std::chrono::steady_clock::now();
  std::vector<std::string> f_shapes, f_dtypes, f_configs;
  std::vector<Shape> custom;
  int reps = 20, warmup = 3, nsamples = 256;
  double budget_s = 0;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "cutlass_conv: %s needs a value\n", a.c_str());
        usage();
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--shapes") f_shapes = split(value(), ',');
    else if (a == "--dtypes") f_dtypes = split(value(), ',');
    else if (a == "--configs") f_configs = split(value(), ',');
    else if (a == "--reps") reps = std::max(1, atoi(value().c_str()));
    else if (a == "--warmup") warmup = std::max(0, atoi(value().c_str()));
    else if (a == "--samples") nsamples = std::max(1, atoi(value().c_str()));
    else if (a == "--budget-s") budget_s = atof(value().c_str());
    else if (a == "--list") list = true;
    else if (a == "--shape") {
      std::string v = value();
      size_t colon = v.find(':');
      std::vector<std::string> f = split(colon == std::string::npos ? "" : v.substr(colon + 1), ',');
      if (colon == std::string::npos || f.size() != 8) {
        fprintf(stderr, "cutlass_conv: --shape name:n,c,h,w,k,r,stride,pad (got %s)\n", v.c_str());
        exit(2);
      }
      Shape s{v.substr(0, colon), atoi(f[0].c_str()), atoi(f[1].c_str()), atoi(f[2].c_str()),
              atoi(f[3].c_str()), atoi(f[4].c_str()), atoi(f[5].c_str()), atoi(f[6].c_str()),
              atoi(f[7].c_str())};
      custom.push_back(s);
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      fprintf(stderr, "cutlass_conv: unknown argument %s\n", a.c_str());
      usage();
      return 2;
    }
  }

  std::vector<AnchorOps> ops = all_ops(std::make_index_sequence<kNumConfigs>{});
  std::vector<Shape> shapes;
  if (!custom.empty()) shapes = custom;
  else
    for (const Shape &s : kShapes)
      if (in_list(f_shapes, s.name)) shapes.push_back(s);
  for (const std::string &want : f_shapes) {
    bool known = false;
    for (const Shape &s : shapes) known |= s.name == want;
    if (!known && custom.empty()) {
      fprintf(stderr, "cutlass_conv: unknown shape %s (--list)\n", want.c_str());
      return 2;
    }
  }
  std::vector<int> chosen;
  for (int i = 0; i < kNumConfigs; ++i)
    if (in_list(f_dtypes, ops[i].dtype) && in_list(f_configs, ops[i].config)) chosen.push_back(i);

  const std::string version = std::to_string(CUTLASS_MAJOR) + "." + std::to_string(CUTLASS_MINOR) +
                              "." + std::to_string(CUTLASS_PATCH);
#ifdef CUTLASS_ANCHOR_PACKAGE
  const std::string package = CUTLASS_ANCHOR_PACKAGE;
#else
  const std::string package = "";
#endif
  const std::string nvcc_version = std::to_string(__CUDACC_VER_MAJOR__) + "." +
                                   std::to_string(__CUDACC_VER_MINOR__) + "." +
                                   std::to_string(__CUDACC_VER_BUILD__);

  if (list) {
    for (const Shape &s : shapes)
      printf("shape %s n=%d c=%d h=%d w=%d k=%d r=%d stride=%d pad=%d\n", s.name.c_str(), s.n, s.c,
             s.h, s.w, s.k, s.r, s.stride, s.pad);
    for (int i : chosen)
      printf("config %s %s threads=%d smem=%d\n", ops[i].dtype, ops[i].config, ops[i].threads,
             ops[i].smem_bytes);
    return 0;
  }
  if (shapes.empty() || chosen.empty()) {
    fprintf(stderr, "cutlass_conv: nothing selected (--list)\n");
    return 2;
  }
  for (const Shape &s : shapes) {
    if (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || s.k < 1 || s.r < 1 || s.stride < 1 ||
        s.pad < 0 || s.pad > s.stride || s.h + 2 * s.pad < s.r || s.w + 2 * s.pad < s.r) {
      fprintf(stderr, "cutlass_conv: shape %s is not supported here (needs pad <= stride)\n",
              s.name.c_str());
      return 2;
    }
  }

  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    fprintf(stderr, "cutlass_conv: no CUDA device\n");
    return 2;
  }
  int runtime_version = 0, driver_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  cudaDriverGetVersion(&driver_version);
  fprintf(stderr,
          "cutlass_conv: CUTLASS %s (%s), nvcc %s, runtime %d, driver %d, device %s (sm_%d%d, %d "
          "SMs, %zu KiB opt-in smem), %zu shapes x %zu configurations, reps %d, warmup %d\n",
          version.c_str(), package.empty() ? "package unknown" : package.c_str(),
          nvcc_version.c_str(), runtime_version, driver_version, prop.name, prop.major, prop.minor,
          prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024, shapes.size(),
          chosen.size(), reps, warmup);
  if (prop.major < 8) {
    fprintf(stderr, "cutlass_conv: the SM80 kernels need compute capability 8.0 or newer\n");
    return 2;
  }

  unsigned long long *d_counter = nullptr;
  CUDA_OK(cudaMalloc(&d_counter, sizeof(unsigned long long)));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ev_start(reps), ev_stop(reps);
  for (int i = 0; i < reps; ++i) {
    CUDA_OK(cudaEventCreate(&ev_start[i]));
    CUDA_OK(cudaEventCreate(&ev_stop[i]));
  }

  std::vector<Result> results;
  bool any_failed = false, budget_hit = false;
  const char *dtype_names[] = {"f16", "bf16"};

  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape &sh = shapes[si];
    const int P = (sh.h + 2 * sh.pad - sh.r) / sh.stride + 1;
    const int Q = (sh.w + 2 * sh.pad - sh.r) / sh.stride + 1;
    const double flop = 2.0 * sh.n * sh.k * sh.c * sh.r * sh.r * double(P) * Q;
    const size_t x_count = size_t(sh.n) * sh.h * sh.w * sh.c;
    const size_t w_count = size_t(sh.k) * sh.r * sh.r * sh.c;
    const size_t y_count = size_t(sh.n) * P * Q * sh.k;

    for (int di = 0; di < 2; ++di) {
      const std::string dtype = dtype_names[di];
      const int bf16 = di == 1;
      std::vector<int> cfgs;
      for (int i : chosen)
        if (dtype == ops[i].dtype) cfgs.push_back(i);
      if (cfgs.empty()) continue;

      auto common_fields = [&](const AnchorOps &o) {
        std::string s = "{\"anchor\":\"cutlass\",\"cutlass_version\":" + json_str(version);
        if (!package.empty()) s += ",\"package\":" + json_str(package);
        s += ",\"nvcc\":" + json_str(nvcc_version) + ",\"device\":" + json_str(prop.name);
        s += ",\"name\":" + json_str(sh.name) + ",\"n\":" + std::to_string(sh.n) +
             ",\"c\":" + std::to_string(sh.c) + ",\"h\":" + std::to_string(sh.h) +
             ",\"w\":" + std::to_string(sh.w) + ",\"k\":" + std::to_string(sh.k) +
             ",\"r\":" + std::to_string(sh.r) + ",\"s\":" + std::to_string(sh.r) +
             ",\"stride\":" + std::to_string(sh.stride) + ",\"pad\":" + std::to_string(sh.pad) +
             ",\"p\":" + std::to_string(P) + ",\"q\":" + std::to_string(Q) +
             ",\"layout\":\"NHWC/KRSC/NHWC\",\"dtype\":" + json_str(dtype) +
             ",\"accumulator\":\"f32\",\"config\":" + json_str(o.config) +
             ",\"threadblock\":" +
             json_str(std::to_string(o.tb_m) + "x" + std::to_string(o.tb_n) + "x" +
                      std::to_string(o.tb_k)) +
             ",\"warp\":" +
             json_str(std::to_string(o.warp_m) + "x" + std::to_string(o.warp_n) + "x" +
                      std::to_string(o.warp_k)) +
             ",\"instruction\":" +
             json_str(std::to_string(o.inst_m) + "x" + std::to_string(o.inst_n) + "x" +
                      std::to_string(o.inst_k)) +
             ",\"stages\":" + std::to_string(o.stages) +
             ",\"iterator\":\"optimized\",\"arch_tag\":\"Sm80\",\"threads\":" +
             std::to_string(o.threads) + ",\"smem_bytes\":" + std::to_string(o.smem_bytes) +
             ",\"flop\":" + json_num(flop, 15);
        return s;
      };
      auto emit_skip = [&](const AnchorOps &o, const std::string &why, int bands) {
        printf("%s,\"bands\":%d,\"median_ms\":null,\"tflops\":null,\"check\":%s,\"skipped\":%s}\n",
               common_fields(o).c_str(), bands, json_str("skipped: " + why).c_str(),
               json_str(why).c_str());
        fflush(stdout);
        fprintf(stderr, "  %-20s %-4s %-24s skipped: %s\n", sh.name.c_str(), dtype.c_str(),
                o.config, why.c_str());
        Result r;
        r.name = sh.name;
        r.dtype = dtype;
        r.config = o.config;
        r.bands = bands;
        r.skipped = true;
        results.push_back(r);
      };

      if (budget_s > 0 && seconds_since(t_start) > budget_s) {
        budget_hit = true;
        for (int i : cfgs) emit_skip(ops[i], "time budget (--budget-s) spent", 0);
        continue;
      }

      std::vector<Band> bands = make_bands(sh, P, Q, 2);
      if (bands.empty()) {
        for (int i : cfgs) emit_skip(ops[i], "tensor over 2^31 bytes and N > 1: no banding", 0);
        continue;
      }

      uint16_t *d_x = nullptr, *d_w = nullptr, *d_y = nullptr;
      if (cudaMalloc(&d_x, x_count * 2) != cudaSuccess ||
          cudaMalloc(&d_w, w_count * 2) != cudaSuccess ||
          cudaMalloc(&d_y, y_count * 2) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(d_x);
        cudaFree(d_w);
        for (int i : cfgs) emit_skip(ops[i], "cudaMalloc failed", int(bands.size()));
        continue;
      }
      // Fixed seeds: the same tensors for a shape in every run, and the same values for f16 and
      // bf16 up to rounding.
      const uint64_t seed_x = mix64(0x5eed0001ull + si * 2), seed_w = mix64(0x5eed0001ull + si * 2 + 1);
      fill_uniform<<<grid_for(x_count), 256, 0, stream>>>(d_x, x_count, seed_x, 1.0f, bf16);
      fill_uniform<<<grid_for(w_count), 256, 0, stream>>>(
          d_w, w_count, seed_w, float(1.0 / std::sqrt(double(sh.c) * sh.r * sh.r)), bf16);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaStreamSynchronize(stream));

      // Sampled output positions: random ones, plus the corners and both sides of every band
      // seam (where a wrong halo would show).
      struct Sample {
        int n, p, q, k;
      };
      std::vector<Sample> samples;
      std::mt19937_64 rng(0xc0ffee00ull + si * 2 + di);
      auto rnd = [&](int m) { return int(rng() % uint64_t(m)); };
      for (int i = 0; i < nsamples; ++i) samples.push_back({rnd(sh.n), rnd(P), rnd(Q), rnd(sh.k)});
      samples.push_back({0, 0, 0, 0});
      samples.push_back({0, 0, Q - 1, sh.k - 1});
      samples.push_back({sh.n - 1, P - 1, 0, rnd(sh.k)});
      samples.push_back({sh.n - 1, P - 1, Q - 1, sh.k - 1});
      for (size_t b = 1; b < bands.size(); ++b) {
        samples.push_back({0, bands[b].p0 - 1, rnd(Q), rnd(sh.k)});
        samples.push_back({0, bands[b].p0, rnd(Q), rnd(sh.k)});
        samples.push_back({0, bands[b].p0, 0, rnd(sh.k)});
        samples.push_back({0, bands[b].p0 - 1, Q - 1, rnd(sh.k)});
      }

      // Reference, in double, from the filter and the input windows copied back from the
      // device tensors the kernel reads.
      std::vector<uint16_t> h_w(w_count);
      CUDA_OK(cudaMemcpy(h_w.data(), d_w, w_count * 2, cudaMemcpyDeviceToHost));
      auto dec = bf16 ? bf16_to_double : f16_to_double;
      std::vector<double> w_d(w_count);
      for (size_t i = 0; i < w_count; ++i) w_d[i] = dec(h_w[i]);
      std::vector<double> ref(samples.size());
      std::vector<uint16_t> window(size_t(sh.r) * sh.r * sh.c);
      std::vector<unsigned long long> y_index(samples.size());
      for (size_t i = 0; i < samples.size(); ++i) {
        const Sample &sm = samples[i];
        std::fill(window.begin(), window.end(), uint16_t(0));
        for (int r = 0; r < sh.r; ++r) {
          int hh = sm.p * sh.stride - sh.pad + r;
          if (hh < 0 || hh >= sh.h) continue;
          int w_lo = sm.q * sh.stride - sh.pad, s_lo = 0;
          if (w_lo < 0) {
            s_lo = -w_lo;
            w_lo = 0;
          }
          int w_hi = std::min(sh.w, sm.q * sh.stride - sh.pad + sh.r);
          if (w_hi <= w_lo) continue;
          size_t off = ((size_t(sm.n) * sh.h + hh) * sh.w + w_lo) * sh.c;
          CUDA_OK(cudaMemcpy(window.data() + (size_t(r) * sh.r + s_lo) * sh.c, d_x + off,
                             size_t(w_hi - w_lo) * sh.c * 2, cudaMemcpyDeviceToHost));
        }
        double acc = 0;
        const double *wk = w_d.data() + size_t(sm.k) * sh.r * sh.r * sh.c;
        for (size_t j = 0; j < window.size(); ++j) acc += dec(window[j]) * wk[j];
        ref[i] = acc;
        y_index[i] = ((size_t(sm.n) * P + sm.p) * Q + sm.q) * sh.k + sm.k;
      }
      unsigned long long *d_idx = nullptr;
      uint16_t *d_gathered = nullptr;
      CUDA_OK(cudaMalloc(&d_idx, y_index.size() * sizeof(unsigned long long)));
      CUDA_OK(cudaMalloc(&d_gathered, y_index.size() * 2));
      CUDA_OK(cudaMemcpy(d_idx, y_index.data(), y_index.size() * sizeof(unsigned long long),
                         cudaMemcpyHostToDevice));

      std::vector<SubConv> subs;
      for (const Band &b : bands) {
        SubConv s;
        s.n = sh.n;
        s.h = b.hrows;
        s.w = sh.w;
        s.c = sh.c;
        s.k = sh.k;
        s.r = sh.r;
        s.s = sh.r;
        s.p = b.p1 - b.p0;
        s.q = Q;
        s.pad_h = b.pad_h;
        s.pad_w = sh.pad;
        s.stride_h = sh.stride;
        s.stride_w = sh.stride;
        s.x = d_x + size_t(b.h0) * sh.w * sh.c;  // N = 1 whenever there is more than one band
        s.wt = d_w;
        s.y = d_y + size_t(b.p0) * Q * sh.k;
        subs.push_back(s);
      }

      for (int ci : cfgs) {
        const AnchorOps &o = ops[ci];
        if (budget_s > 0 && seconds_since(t_start) > budget_s) {
          budget_hit = true;
          emit_skip(o, "time budget (--budget-s) spent", int(bands.size()));
          continue;
        }
        std::string why;
        bool implementable = true;
        for (const SubConv &s : subs)
          if (!o.can_implement(s, &why)) {
            implementable = false;
            break;
          }
        if (!implementable) {
          emit_skip(o, why, int(bands.size()));
          continue;
        }
        if (size_t(o.smem_bytes) > prop.sharedMemPerBlockOptin) {
          emit_skip(o, "needs " + std::to_string(o.smem_bytes) + " B of shared memory, device has " +
                           std::to_string(prop.sharedMemPerBlockOptin),
                    int(bands.size()));
          continue;
        }
        size_t ws_bytes = 0;
        for (const SubConv &s : subs) ws_bytes = std::max(ws_bytes, o.workspace_bytes(s));
        void *d_ws = nullptr;
        if (ws_bytes) CUDA_OK(cudaMalloc(&d_ws, ws_bytes));
        void *plan = o.create(subs.data(), int(subs.size()), d_ws, &why);
        Result res;
        res.name = sh.name;
        res.dtype = dtype;
        res.config = o.config;
        res.bands = int(bands.size());
        std::string check;
        double max_err = NAN;
        unsigned long long nonfinite = 0;
        std::vector<float> times;
        if (!plan) {
          check = "FAILED: " + why;
        } else {
          // Correctness: poison the output, run once, count unwritten/non-finite elements over
          // the whole output and compare the sampled ones with the reference.
          fill_bits<<<grid_for(y_count), 256, 0, stream>>>(d_y, y_count, bf16 ? 0x7fc0 : 0x7e00);
          CUDA_OK(cudaMemsetAsync(d_counter, 0, sizeof(unsigned long long), stream));
          bool launched = o.run(plan, stream);
          cudaError_t err = cudaStreamSynchronize(stream);
          if (!launched || err != cudaSuccess) {
            check = std::string("FAILED: launch: ") +
                    cudaGetErrorString(err != cudaSuccess ? err : cudaGetLastError());
          } else {
            count_nonfinite<<<grid_for(y_count), 256, 0, stream>>>(d_y, y_count, bf16, d_counter);
            gather_u16<<<int((y_index.size() + 255) / 256), 256, 0, stream>>>(
                d_y, d_idx, int(y_index.size()), d_gathered);
            CUDA_OK(cudaGetLastError());
            std::vector<uint16_t> got(y_index.size());
            CUDA_OK(cudaMemcpyAsync(&nonfinite, d_counter, sizeof nonfinite, cudaMemcpyDeviceToHost,
                                    stream));
            CUDA_OK(cudaMemcpyAsync(got.data(), d_gathered, got.size() * 2, cudaMemcpyDeviceToHost,
                                    stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            int bad = 0;
            std::string first_bad;
            max_err = 0;
            for (size_t i = 0; i < got.size(); ++i) {
              double v = dec(got[i]);
              double e = std::fabs(v - ref[i]);
              if (!(e <= 1e-2 + 1e-2 * std::fabs(ref[i]))) {  // NaN fails too
                if (!bad) {
                  char buf[160];
                  snprintf(buf, sizeof buf, "y[n=%d,p=%d,q=%d,k=%d] = %g, reference %g",
                           samples[i].n, samples[i].p, samples[i].q, samples[i].k, v, ref[i]);
                  first_bad = buf;
                }
                ++bad;
              }
              if (std::isfinite(e)) max_err = std::max(max_err, e);
              else max_err = INFINITY;
            }
            if (bad)
              check = "FAILED: " + std::to_string(bad) + " of " + std::to_string(got.size()) +
                      " sampled outputs off (first: " + first_bad + ")";
            else if (nonfinite)
              check = "FAILED: " + std::to_string(nonfinite) +
                      " output elements NaN/Inf (unwritten: the output was poisoned with NaN)";
            else
              check = "ok";
          }
          if (check == "ok") {
            // Timing: warm-up, then reps back to back, each between its own pair of events.
            bool good = true;
            for (int i = 0; i < warmup && good; ++i) good = o.run(plan, stream);
            for (int i = 0; i < reps && good; ++i) {
              CUDA_OK(cudaEventRecord(ev_start[i], stream));
              good = o.run(plan, stream);
              CUDA_OK(cudaEventRecord(ev_stop[i], stream));
            }
            cudaError_t err2 = cudaStreamSynchronize(stream);
            if (!good || err2 != cudaSuccess) {
              check = std::string("FAILED: timed launch: ") +
                      cudaGetErrorString(err2 != cudaSuccess ? err2 : cudaGetLastError());
            } else {
              for (int i = 0; i < reps; ++i) {
                float ms = 0;
                CUDA_OK(cudaEventElapsedTime(&ms, ev_start[i], ev_stop[i]));
                times.push_back(ms);
              }
            }
          }
          o.destroy(plan);
        }
        if (d_ws) cudaFree(d_ws);

        int ctas = o.ctas_per_sm();
        std::string line = common_fields(o) + ",\"bands\":" + std::to_string(bands.size()) +
                           ",\"ctas_per_sm\":" + std::to_string(ctas) +
                           ",\"workspace_bytes\":" + std::to_string(ws_bytes) +
                           ",\"reps\":" + std::to_string(reps) + ",\"warmup\":" + std::to_string(warmup);
        if (!times.empty()) {
          res.measured = true;
          res.median_ms = median(times);
          res.tflops = flop / (res.median_ms * 1e-3) / 1e12;
          line += ",\"median_ms\":" + json_num(res.median_ms) +
                  ",\"min_ms\":" + json_num(*std::min_element(times.begin(), times.end())) +
                  ",\"max_ms\":" + json_num(*std::max_element(times.begin(), times.end())) +
                  ",\"tflops\":" + json_num(res.tflops, 5);
        } else {
          line += ",\"median_ms\":null,\"tflops\":null";
        }
        res.ok = check == "ok";
        if (!res.ok) any_failed = true;
        line += ",\"check\":" + json_str(check) + ",\"max_err\":" + json_num(max_err, 4) +
                ",\"samples\":" + std::to_string(samples.size()) +
                ",\"nonfinite\":" + std::to_string(nonfinite) +
                ",\"tolerance\":\"|y-ref| <= 1e-2 + 1e-2*|ref|\"}";
        printf("%s\n", line.c_str());
        fflush(stdout);
        fprintf(stderr, "  %-20s %-4s %-24s %9.4f ms %7.1f TFLOP/s  bands %zu  %s\n",
                sh.name.c_str(), dtype.c_str(), o.config, res.median_ms, res.tflops, bands.size(),
                check.c_str());
        results.push_back(res);

        cudaError_t sticky = cudaGetLastError();
        if (sticky != cudaSuccess) {
          fprintf(stderr, "cutlass_conv: CUDA error after %s %s %s: %s; stopping\n",
                  sh.name.c_str(), dtype.c_str(), o.config, cudaGetErrorString(sticky));
          return 1;
        }
      }
      cudaFree(d_idx);
      cudaFree(d_gathered);
      cudaFree(d_x);
      cudaFree(d_w);
      cudaFree(d_y);
    }
  }

  // Summary: the best configuration per (shape, dtype), as the profiler would report it.
  fprintf(stderr, "\nCUTLASS %s SM80 implicit-GEMM fprop (NHWC, f32 accumulation) on %s, median of %d"
                  " after %d warm-up, best configuration per shape:\n\n",
          version.c_str(), prop.name, reps, warmup);
  fprintf(stderr, "| shape | dtype | best config | median ms | TFLOP/s | bands | all configs (ms) |\n");
  fprintf(stderr, "| --- | --- | --- | ---: | ---: | ---: | --- |\n");
  for (const Shape &sh : shapes) {
    for (const char *dt : dtype_names) {
      const Result *best = nullptr;
      std::string all;
      bool seen = false;
      for (const Result &r : results) {
        if (r.name != sh.name || r.dtype != dt) continue;
        seen = true;
        char buf[96];
        if (r.measured && r.ok) snprintf(buf, sizeof buf, "%s %.3f", r.config.c_str(), r.median_ms);
        else snprintf(buf, sizeof buf, "%s %s", r.config.c_str(), r.skipped ? "skipped" : "FAILED");
        all += (all.empty() ? "" : ", ") + std::string(buf);
        if (r.measured && r.ok && (!best || r.median_ms < best->median_ms)) best = &r;
      }
      if (!seen) continue;
      if (best)
        fprintf(stderr, "| %s | %s | %s | %.3f | %.1f | %d | %s |\n", sh.name.c_str(), dt,
                best->config.c_str(), best->median_ms, best->tflops, best->bands, all.c_str());
      else
        fprintf(stderr, "| %s | %s | (none passed) | - | - | - | %s |\n", sh.name.c_str(), dt,
                all.c_str());
    }
  }
  fprintf(stderr, "\ncutlass_conv: %.1f s, %s\n", seconds_since(t_start),
          any_failed ? "SOME CHECKS FAILED" : budget_hit ? "incomplete (time budget)" : "all checks ok");
  return any_failed ? 1 : budget_hit ? 3 : 0;
}

#endif  // ANCHOR_WITH_MAIN
