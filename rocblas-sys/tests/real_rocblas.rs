//! Against the real rocBLAS library: the ROCm toolchain chroot of docs/architecture.md (verification tiers) (no GPU there).
//!
//! Where rocBLAS is not installed (the CPU tier) each test prints `SKIPPED: <reason>` and
//! passes; with `ROCM_VISION_REQUIRE_ROCM=1` (the toolchain tier) a missing rocBLAS fails.
//! A rocBLAS that is found but unusable always fails.

use std::ptr;

use rocblas_sys::*;
use rocm_loader::testing::{assert_bound_pointers_are_the_library_s, loaded_or_skip};

fn rocblas_or_skip(test: &str) -> Option<Rocblas> {
    loaded_or_skip("rocBLAS", test, Rocblas::load())
}

#[test]
fn every_bound_symbol_resolves_in_the_real_library() {
    let Some(rocblas) = rocblas_or_skip("every_bound_symbol_resolves_in_the_real_library") else { return };
    let f = rocblas.fns();
    let bound: [(&str, usize); 7] = [
        ("rocblas_create_handle", f.rocblas_create_handle as usize),
        ("rocblas_destroy_handle", f.rocblas_destroy_handle as usize),
        ("rocblas_set_stream", f.rocblas_set_stream as usize),
        ("rocblas_get_version_string_size", f.rocblas_get_version_string_size as usize),
        ("rocblas_get_version_string", f.rocblas_get_version_string as usize),
        ("rocblas_gemm_strided_batched_ex", f.rocblas_gemm_strided_batched_ex as usize),
        ("rocblas_status_to_string", f.rocblas_status_to_string as usize),
    ];
    // Resolve each symbol again, independently of the generated bindings.
    assert_bound_pointers_are_the_library_s(rocblas.path(), &bound, SYMBOLS);
}

#[test]
fn version_is_readable() {
    let Some(rocblas) = rocblas_or_skip("version_is_readable") else { return };
    let version = rocblas.version().expect("rocblas_get_version_string");
    println!("rocBLAS {version} from {}", rocblas.path().display());
    let mut parts = version.split('.');
    for part in ["major", "minor", "patch"] {
        let field = parts.next().unwrap_or_default();
        assert!(!field.is_empty() && field.bytes().all(|b| b.is_ascii_digit()), "{part} of {version:?}");
    }
    // rocBLAS 4.x is ROCm 6's, 5.x ROCm 7's (the bindings come from 4.x's headers;
    // scripts/rocm-abi-check.sh checks 5.x agrees on everything bound). Loaded beside a HIP
    // runtime (rocBLAS brings its own), the two are of the same ROCm.
    let major: u32 = version.split('.').next().unwrap().parse().unwrap();
    assert!(major == 4 || major == 5, "{version}");
    let hip = rocm_loader::mapped_hip_runtimes();
    assert_eq!(hip.len(), 1, "rocBLAS {version} with HIP runtimes {hip:?}");
    assert_eq!(rocm_loader::hip_major_of(&hip[0]), Some(major + 2), "rocBLAS {version} with {}", hip[0].display());
}

#[test]
fn status_strings_come_from_the_library() {
    let Some(rocblas) = rocblas_or_skip("status_strings_come_from_the_library") else { return };
    for &(status, name) in STATUS_NAMES {
        let err = rocblas.error(status);
        assert_eq!(err.name, name);
        assert!(!err.message.is_empty(), "{name}");
    }
    assert_eq!(rocblas.check(rocblas_status_success), Ok(()));
    let err = rocblas.check(rocblas_status_invalid_size).unwrap_err();
    assert!(err.to_string().starts_with("rocBLAS returned rocblas_status_invalid_size (4)"), "{err}");
}

/// With no GPU, rocBLAS 4.4 (ROCm 6.4) answers `rocblas_create_handle` with
/// `rocblas_status_internal_error` and leaves the handle null; it does not crash.
#[test]
fn create_handle_without_a_gpu_is_an_error_status() {
    let Some(rocblas) = rocblas_or_skip("create_handle_without_a_gpu_is_an_error_status") else { return };
    let mut handle: rocblas_handle = ptr::null_mut();
    // SAFETY: writes one handle.
    let status = unsafe { rocblas.rocblas_create_handle(&mut handle) };
    if status == rocblas_status_success {
        // A GPU is present after all: the handle must be real and destroyable.
        assert!(!handle.is_null());
        // SAFETY: the handle was just created.
        rocblas.check(unsafe { rocblas.rocblas_destroy_handle(handle) }).expect("rocblas_destroy_handle");
        println!("rocblas_create_handle succeeded: this machine has a GPU");
        return;
    }
    let err = rocblas.check(status).unwrap_err();
    println!("rocblas_create_handle without a GPU: {err}");
    assert_eq!(status, rocblas_status_internal_error, "{err}");
    assert!(handle.is_null());
}

/// Calls through the pointers with a null handle: rocBLAS validates the handle first, so
/// each returns `rocblas_status_invalid_handle`. This exercises the full 29-argument
/// `rocblas_gemm_strided_batched_ex` signature without a device.
#[test]
fn null_handle_calls_return_invalid_handle() {
    let Some(rocblas) = rocblas_or_skip("null_handle_calls_return_invalid_handle") else { return };
    let null: rocblas_handle = ptr::null_mut();
    // SAFETY: rocBLAS checks for a null handle before touching anything else.
    let status = unsafe { rocblas.rocblas_destroy_handle(null) };
    assert_eq!(rocblas.check(status).unwrap_err().name, "rocblas_status_invalid_handle");
    // SAFETY: as above.
    let status = unsafe { rocblas.rocblas_set_stream(null, ptr::null_mut()) };
    assert_eq!(rocblas.check(status).unwrap_err().name, "rocblas_status_invalid_handle");
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (a, b, mut d) = ([0f32; 4], [0f32; 4], [0f32; 4]);
    // SAFETY: as above; the pointers are valid host memory in any case.
    let status = unsafe {
        rocblas.rocblas_gemm_strided_batched_ex(
            null,
            rocblas_operation_none,
            rocblas_operation_none,
            2,
            2,
            2,
            (&alpha as *const f32).cast(),
            a.as_ptr().cast(),
            rocblas_datatype_f32_r,
            2,
            4,
            b.as_ptr().cast(),
            rocblas_datatype_f32_r,
            2,
            4,
            (&beta as *const f32).cast(),
            d.as_ptr().cast(),
            rocblas_datatype_f32_r,
            2,
            4,
            d.as_mut_ptr().cast(),
            rocblas_datatype_f32_r,
            2,
            4,
            1,
            rocblas_datatype_f32_r,
            rocblas_gemm_algo_standard,
            0,
            rocblas_gemm_flags_none,
        )
    };
    assert_eq!(rocblas.check(status).unwrap_err().name, "rocblas_status_invalid_handle");
    assert_eq!(d, [0.0; 4]);
}
