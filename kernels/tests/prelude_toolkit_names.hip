// Issue 27: the prelude beside each toolkit's own names. Compiled by
// rocm-backend/tests/prelude_names.rs with hiprtc (the backend's JIT) and with hipcc, in each
// toolchain chroot (ROCm 6.4 and 7.2). Every kernel calls the toolkit's names directly, next
// to the prelude's rv_ wrappers of them: were the prelude to define one of those names (as a
// shim that redefined atomicAdd for __half and __hip_bfloat16 did, which broke on ROCm 7.14),
// this file would fail to compile with a redefinition or an ambiguous call.
//
// Names only some header sets provide (atomicAdd on 16-bit floats: 7.14; unsafeAtomicAdd on
// one __hip_bfloat16: 7.x; the _sync shuffles: 7.x, or 6.x with HIP_ENABLE_WARP_SYNC_BUILTINS)
// are called where the headers declare them, found by overload resolution (RV_PROBE below), so
// the file compiles under every header set and calls each name wherever it exists.
#include "prelude.h"

// RV_PROBE(name, call): rv_probe_<name>(p, 0) makes `call` if it is well-formed with
// these headers, else does nothing (the int/long pair picks the first overload when viable).
#define RV_PROBE(name, call)                                                                       \
    template <typename P> static __device__ auto rv_probe_##name(P* p, int)->decltype(call, void()) { \
        (void)(call);                                                                              \
    }                                                                                              \
    template <typename P> static __device__ void rv_probe_##name(P*, long) {}
RV_PROBE(atomic_add_16, atomicAdd(p, *p))
RV_PROBE(unsafe_atomic_add_16, unsafeAtomicAdd(p, *p))
RV_PROBE(shfl_xor_sync_16, __shfl_xor_sync(0xffffffffffffffffull, *p, 1, warpSize))
#undef RV_PROBE

// 16-bit atomics: the prelude's CAS loop, and the toolkit's atomics where it has them.
RV_KERNEL void names_atomics(float* f, double* d, unsigned* u, rv_half* h, rv_bf16* b, __hip_bfloat162* b2) {
    atomicAdd(f, 1.0f);
    atomicAdd(d, 1.0);
    atomicCAS(u, 0u, 1u);
    unsafeAtomicAdd(b2, *b2);
    rv_atomic_add(h, 1.0f);
    rv_atomic_add(b, 1.0f);
    rv_probe_atomic_add_16(h, 0);
    rv_probe_atomic_add_16(b, 0);
    rv_probe_unsafe_atomic_add_16(h, 0);
    rv_probe_unsafe_atomic_add_16(b, 0);
}

// bf16 and f16 conversions, the toolkit's and the prelude's.
RV_KERNEL void names_conversions(float* f, rv_half* h, rv_bf16* b, rv_u16* bits) {
    const rv_i64 i = rv_global_id();
    h[i] = __float2half(f[i]);
    b[i] = __float2bfloat16(f[i]);
    f[i] = __half2float(h[i]) + __bfloat162float(b[i]) + rv_to_f32(h[i]) + rv_to_f32(b[i]);
    bits[i] = (rv_u16)(__half_as_ushort(h[i]) ^ __bfloat16_as_ushort(b[i]) ^ rv_bits(h[i]) ^ rv_bits(b[i]));
    h[i] = __ushort_as_half(bits[i]);
    b[i] = __ushort_as_bfloat16(bits[i]);
    b[i] = rv_convert<rv_bf16>::from(h[i]);
}

// Shuffles with an explicit width, the toolkit's and the prelude's.
RV_KERNEL void names_shuffles(float* f, double* d, int* n, unsigned* u, rv_half* h, rv_bf16* b) {
    const int i = (int)rv_global_id(), w = warpSize;
    f[i] = __shfl_xor(f[i], 1, w) + rv_shfl_xor(f[i], 1, w) + __shfl(f[i], 0, w) + rv_shfl(f[i], 0, w);
    d[i] = __shfl_xor(d[i], 1, w) + rv_shfl_xor(d[i], 1, w);
    n[i] = __shfl_xor(n[i], 1, w) + rv_shfl_xor(n[i], 1, w);
    u[i] = __shfl_xor(u[i], 1u, w) + rv_shfl_xor(u[i], 1, w);
    rv_probe_shfl_xor_sync_16(h + i, 0);
    rv_probe_shfl_xor_sync_16(b + i, 0);
}
