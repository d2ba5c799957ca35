//! rocBLAS on a device's stream: the strided-batched GEMM behind matmul, `Gemm1x1` and
//! `Im2colGemm` (f32; f16 and bf16 with f32 compute).

use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use candle_core::DType;
use rocblas_sys as rb;

/// A rocBLAS handle bound to one device's stream.
pub struct Blas {
    lib: rb::Rocblas,
    handle: rb::rocblas_handle,
    version: String,
}

// SAFETY: the handle is only used with its device current and on that device's stream;
// rocBLAS handles may be used from any thread, one call at a time, which `RocmDevice`'s
// single stream serialises.
unsafe impl Send for Blas {}
unsafe impl Sync for Blas {}

/// (pointer, leading dimension, stride between batch entries) of one GEMM operand.
pub type Operand = (usize, usize, usize);

impl Blas {
    pub(crate) fn new(dev: &RocmDevice) -> Result<Blas> {
        let lib = rb::Rocblas::load().map_err(|e| RocmError::Rocblas(e.to_string()))?;
        dev.activate()?;
        let mut handle: rb::rocblas_handle = std::ptr::null_mut();
        lib.check(unsafe { (lib.fns().rocblas_create_handle)(&mut handle) })
            .map_err(|e| RocmError::Rocblas(format!("rocblas_create_handle: {e}")))?;
        lib.check(unsafe { (lib.fns().rocblas_set_stream)(handle, dev.stream().raw() as rb::hipStream_t) })
            .map_err(|e| RocmError::Rocblas(format!("rocblas_set_stream: {e}")))?;
        let version = lib.version().unwrap_or_else(|e| format!("unknown ({e})"));
        tracing::info!(target: "rocm_backend", ordinal = dev.ordinal(), version = %version, library = %lib.path().display(), "rocBLAS ready");
        Ok(Blas { lib, handle, version })
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// Column-major `C = op(A) · op(B)` over `batch` entries, `(m, n, k)` the product's
    /// dimensions, alpha = 1, beta = 0, f32 accumulation.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_strided_batched(
        &self,
        dtype: DType,
        trans_a: bool,
        trans_b: bool,
        (m, n, k): (usize, usize, usize),
        a: Operand,
        b: Operand,
        c: Operand,
        batch: usize,
    ) -> Result<()> {
        let ty = match dtype {
            DType::F32 => rb::rocblas_datatype_f32_r,
            DType::F16 => rb::rocblas_datatype_f16_r,
            DType::BF16 => rb::rocblas_datatype_bf16_r,
            other => {
                return Err(RocmError::op("gemm", format!("rocBLAS GEMM supports f32, f16 and bf16, not {other:?}")));
            }
        };
        if m == 0 || n == 0 || batch == 0 {
            return Ok(());
        }
        let int = |v: usize, what: &str| -> Result<i32> {
            i32::try_from(v).map_err(|_| RocmError::op("gemm", format!("{what} = {v} exceeds rocBLAS's 32-bit sizes")))
        };
        let op = |t: bool| if t { rb::rocblas_operation_transpose } else { rb::rocblas_operation_none };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let status = unsafe {
            (self.lib.fns().rocblas_gemm_strided_batched_ex)(
                self.handle,
                op(trans_a),
                op(trans_b),
                int(m, "m")?,
                int(n, "n")?,
                int(k, "k")?,
                &alpha as *const f32 as *const _,
                a.0 as *const _,
                ty,
                int(a.1.max(1), "lda")?,
                a.2 as i64,
                b.0 as *const _,
                ty,
                int(b.1.max(1), "ldb")?,
                b.2 as i64,
                &beta as *const f32 as *const _,
                c.0 as *const _,
                ty,
                int(c.1.max(1), "ldc")?,
                c.2 as i64,
                c.0 as *mut _,
                ty,
                int(c.1.max(1), "ldd")?,
                c.2 as i64,
                int(batch, "batch")?,
                rb::rocblas_datatype_f32_r,
                rb::rocblas_gemm_algo_standard,
                0,
                0,
            )
        };
        self.lib.check(status).map_err(|e| {
            RocmError::Rocblas(format!("rocblas_gemm_strided_batched_ex ({m}x{n}x{k}, batch {batch}, {dtype:?}): {e}"))
        })
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        unsafe { (self.lib.fns().rocblas_destroy_handle)(self.handle) };
    }
}
