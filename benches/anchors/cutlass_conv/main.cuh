// Part of cutlass_conv.cu (included from it when ANCHOR_WITH_MAIN, after host.cuh, not compiled
// on its own): argument parsing, the per-(shape, dtype, configuration) check and timing loop,
// the JSON lines and the best-per-shape summary.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cutlass/version.h"

#include "host.cuh"
#include "interface.h"

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
