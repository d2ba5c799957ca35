// Part of cutlass_conv.cu (included from it when ANCHOR_WITH_KERNELS, not compiled on its own):
// the CUTLASS kernel configurations behind make_ops<I>(). Kept apart from the main program so
// that the main unit (ANCHOR_TU=100) never parses the CUTLASS conv headers.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "interface.h"

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
