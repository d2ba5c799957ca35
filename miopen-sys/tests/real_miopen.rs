//! Against the real MIOpen library: the ROCm toolchain chroot of docs/architecture.md (verification tiers) (no GPU there).
//!
//! Where MIOpen is not installed (the CPU tier) each test prints `SKIPPED: <reason>` and
//! passes; with `ROCM_VISION_REQUIRE_ROCM=1` (the toolchain tier) a missing MIOpen fails.
//! A MIOpen that is found but unusable always fails.

use std::ptr;
use std::sync::{Mutex, MutexGuard};

use miopen_sys::*;
use rocm_loader::testing::{assert_bound_pointers_are_the_library_s, loaded_or_skip};

/// Serialises the tests of this binary. Debian's MIOpen 6.4.3 (+dfsg-1+b1) crashed with
/// SIGSEGV in one of three runs when these tests ran on parallel threads, while one thread
/// took the `miopenCreateWithStream` no-device error and another an error status out of
/// `miopenGetConvolutionForwardOutputDim`; each test alone, or all of them one at a time,
/// passed every time.
static SERIAL: Mutex<()> = Mutex::new(());

fn miopen_or_skip(test: &str) -> Option<(MutexGuard<'static, ()>, MIOpen)> {
    let serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    loaded_or_skip("MIOpen", test, MIOpen::load()).map(|miopen| (serial, miopen))
}

#[test]
fn every_bound_symbol_resolves_in_the_real_library() {
    let Some((_serial, miopen)) = miopen_or_skip("every_bound_symbol_resolves_in_the_real_library") else { return };
    let f = miopen.fns();
    let bound: [(&str, usize); 17] = [
        ("miopenCreateWithStream", f.miopenCreateWithStream as usize),
        ("miopenDestroy", f.miopenDestroy as usize),
        ("miopenGetVersion", f.miopenGetVersion as usize),
        ("miopenGetErrorString", f.miopenGetErrorString as usize),
        ("miopenCreateTensorDescriptor", f.miopenCreateTensorDescriptor as usize),
        ("miopenSet4dTensorDescriptor", f.miopenSet4dTensorDescriptor as usize),
        ("miopenDestroyTensorDescriptor", f.miopenDestroyTensorDescriptor as usize),
        ("miopenCreateConvolutionDescriptor", f.miopenCreateConvolutionDescriptor as usize),
        ("miopenInitConvolutionDescriptor", f.miopenInitConvolutionDescriptor as usize),
        ("miopenSetConvolutionGroupCount", f.miopenSetConvolutionGroupCount as usize),
        ("miopenDestroyConvolutionDescriptor", f.miopenDestroyConvolutionDescriptor as usize),
        ("miopenGetConvolutionForwardOutputDim", f.miopenGetConvolutionForwardOutputDim as usize),
        ("miopenConvolutionForwardGetSolutionCount", f.miopenConvolutionForwardGetSolutionCount as usize),
        ("miopenConvolutionForwardGetSolution", f.miopenConvolutionForwardGetSolution as usize),
        (
            "miopenConvolutionForwardGetSolutionWorkspaceSize",
            f.miopenConvolutionForwardGetSolutionWorkspaceSize as usize,
        ),
        ("miopenConvolutionForwardCompileSolution", f.miopenConvolutionForwardCompileSolution as usize),
        ("miopenConvolutionForwardImmediate", f.miopenConvolutionForwardImmediate as usize),
    ];
    // Resolve each symbol again, independently of the generated bindings.
    assert_bound_pointers_are_the_library_s(miopen.path(), &bound, SYMBOLS);
}

#[test]
fn version_is_readable() {
    let Some((_serial, miopen)) = miopen_or_skip("version_is_readable") else { return };
    let (major, minor, patch) = miopen.version().expect("miopenGetVersion");
    println!("MIOpen {major}.{minor}.{patch} from {}", miopen.path().display());
    // The headers these bindings were generated from are MIOpen 3.4 (ROCm 6.4).
    assert_eq!(major, 3, "{major}.{minor}.{patch}");
    assert!(minor >= 4, "{major}.{minor}.{patch}");
}

#[test]
fn status_strings_come_from_the_library() {
    let Some((_serial, miopen)) = miopen_or_skip("status_strings_come_from_the_library") else { return };
    for &(status, name) in STATUS_NAMES {
        let err = miopen.error(status);
        assert_eq!(err.name, name);
        assert!(!err.message.is_empty(), "{name}");
    }
    assert_eq!(miopen.check(miopenStatusSuccess), Ok(()));
    let err = miopen.check(miopenStatusBadParm).unwrap_err();
    assert!(err.to_string().starts_with("MIOpen returned miopenStatusBadParm (3)"), "{err}");
}

/// With no GPU, MIOpen 3.4 (ROCm 6.4) answers `miopenCreateWithStream` on the default
/// (null) stream with `miopenStatusUnknownError`, printing
/// `MIOpen Error: src/hip/handlehip.cpp:150: No device` to stderr, and leaves the handle
/// null; it does not crash.
#[test]
fn create_handle_without_a_gpu_is_an_error_status() {
    let Some((_serial, miopen)) = miopen_or_skip("create_handle_without_a_gpu_is_an_error_status") else { return };
    let mut handle: miopenHandle_t = ptr::null_mut();
    // SAFETY: writes one handle; a null stream is HIP's default stream.
    let status = unsafe { miopen.miopenCreateWithStream(&mut handle, ptr::null_mut()) };
    if status == miopenStatusSuccess {
        assert!(!handle.is_null());
        // SAFETY: the handle was just created.
        miopen.check(unsafe { miopen.miopenDestroy(handle) }).expect("miopenDestroy");
        println!("miopenCreateWithStream succeeded: this machine has a GPU");
        return;
    }
    let err = miopen.check(status).unwrap_err();
    println!("miopenCreateWithStream without a GPU: {err}");
    assert_eq!(status, miopenStatusUnknownError, "{err}");
    assert!(handle.is_null());
}

/// Descriptors live on the host, so they work without a GPU: a 3x3 convolution's output
/// shape, plain and transposed, grouped, computed by MIOpen through the bindings.
#[test]
fn descriptors_and_output_shape_work_without_a_gpu() {
    let Some((_serial, miopen)) = miopen_or_skip("descriptors_and_output_shape_work_without_a_gpu") else { return };
    let mut input: miopenTensorDescriptor_t = ptr::null_mut();
    let mut weight: miopenTensorDescriptor_t = ptr::null_mut();
    let mut conv: miopenConvolutionDescriptor_t = ptr::null_mut();
    // SAFETY: each call writes one descriptor handle, later destroyed once.
    unsafe {
        miopen.check(miopen.miopenCreateTensorDescriptor(&mut input)).unwrap();
        miopen.check(miopen.miopenCreateTensorDescriptor(&mut weight)).unwrap();
        miopen.check(miopen.miopenCreateConvolutionDescriptor(&mut conv)).unwrap();
    }
    assert!(!input.is_null() && !weight.is_null() && !conv.is_null());

    let out_dims = |mode, groups| {
        // SAFETY: the descriptors are live; the output pointers are four i32s.
        unsafe {
            miopen.check(miopen.miopenInitConvolutionDescriptor(conv, mode, 1, 1, 2, 2, 1, 1))?;
            miopen.check(miopen.miopenSetConvolutionGroupCount(conv, groups))?;
            let (mut n, mut c, mut h, mut w) = (0, 0, 0, 0);
            miopen.check(
                miopen.miopenGetConvolutionForwardOutputDim(conv, input, weight, &mut n, &mut c, &mut h, &mut w),
            )?;
            Ok::<_, MiopenError>([n, c, h, w])
        }
    };

    // NCHW 2x8x17x17 input, 16x4x3x3 weights (2 groups of 4 input channels).
    // SAFETY: the descriptors are live.
    unsafe {
        miopen.check(miopen.miopenSet4dTensorDescriptor(input, miopenHalf, 2, 8, 17, 17)).unwrap();
        miopen.check(miopen.miopenSet4dTensorDescriptor(weight, miopenHalf, 16, 4, 3, 3)).unwrap();
    }
    // pad 1, stride 2, dilation 1: (17 + 2 - 3) / 2 + 1 = 9.
    assert_eq!(out_dims(miopenConvolution, 2).unwrap(), [2, 16, 9, 9]);

    // Transposed (f32 now), weights CKRS = 8 x 4 x 3 x 3 with 2 groups: 8 output channels;
    // (17 - 1) * 2 - 2 * 1 + 3 = 33.
    // SAFETY: the descriptors are live.
    unsafe {
        miopen.check(miopen.miopenSet4dTensorDescriptor(input, miopenFloat, 2, 8, 17, 17)).unwrap();
        miopen.check(miopen.miopenSet4dTensorDescriptor(weight, miopenFloat, 8, 4, 3, 3)).unwrap();
    }
    assert_eq!(out_dims(miopenTranspose, 2).unwrap(), [2, 8, 33, 33]);

    // Channel mismatch (8 input channels, 1 group, 4 weight channels) is a status, not a crash.
    let err = out_dims(miopenConvolution, 1).unwrap_err();
    println!("mismatched channels: {err}");
    assert_eq!(err.status, miopenStatusBadParm, "{err}");

    // SAFETY: each descriptor is destroyed once.
    unsafe {
        miopen.check(miopen.miopenDestroyConvolutionDescriptor(conv)).unwrap();
        miopen.check(miopen.miopenDestroyTensorDescriptor(weight)).unwrap();
        miopen.check(miopen.miopenDestroyTensorDescriptor(input)).unwrap();
    }
}
