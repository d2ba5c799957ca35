// Part of cutlass_conv.cu (included from it when ANCHOR_WITH_MAIN, not compiled on its own): the
// main program's shapes, deterministic fill and check kernels, host-side decoding, small
// utilities and the banding of tensors over 2^31 bytes. Only the main unit includes it, so its
// (non-static) kernels are still defined once at link time.
#pragma once

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
#include <string>
#include <vector>

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
