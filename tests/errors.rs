//! Issue 13, item 2: errors are values on both devices. A convolution over its budget is
//! `Error::Conv(ConvError::BudgetExceeded { needed, available, .. })` on the CPU and on
//! ROCm; a missing GPU is `Error::Rocm` with the backend's no-device variant; both carry a
//! one-line hint for the tools.

use conv_cpu::CpuConv;
use rocm_vision::{Algorithm, Budget, Conv2dParams, ConvError, DType, Device, Error, RocmError, Tensor};

mod common;

fn conv_over(device: &Device) -> Result<Tensor, Error> {
    let x = Tensor::ones(&[1, 16, 32, 32], DType::F32, device)?;
    let w = Tensor::ones(&[16, 16, 3, 3], DType::F32, device)?;
    x.conv2d(&w, None, &Conv2dParams::default().with_padding(1))
}

#[test]
fn cpu_budget_exceeded_is_matched_with_its_numbers() {
    // Im2colGemm only, within 1 KiB: its column buffer cannot fit, and Direct (no
    // workspace) is not allowed to rescue it.
    let engine = CpuConv::new(Budget::bytes(1024)).with_allowed(&[Algorithm::Im2colGemm]);
    let device = Device::cpu_with_engine(engine);
    let e = conv_over(&device).unwrap_err();
    match &e {
        Error::Conv(ConvError::BudgetExceeded { needed, available, algorithm, .. }) => {
            assert_eq!(*available, 1024);
            assert!(*needed > 1024, "{e}");
            assert_eq!(algorithm, "Im2colGemm");
        }
        other => panic!("expected Error::Conv(BudgetExceeded), got {other:?}"),
    }
    let short = e.budget_shortfall().expect("a budget error has a shortfall");
    assert_eq!(short.available, 1024);
    assert!(short.needed > short.available);
    let hint = e.hint().expect("a budget error has a hint");
    assert!(hint.contains("--tile") && hint.contains("--device cpu"), "{hint}");
    assert!(!e.is_no_device());
    // The same device runs what fits: Direct needs no workspace.
    let ok = Device::cpu_with_engine(CpuConv::new(Budget::bytes(1024)).with_allowed(&[Algorithm::Direct]));
    assert_eq!(conv_over(&ok).unwrap().dims(), &[1, 16, 32, 32]);
}

/// Without a GPU (this machine) opening one is the no-device variant, matched as a value;
/// with one, a conv over a tiny budget on it is the same `BudgetExceeded` as on the CPU.
#[test]
fn rocm_errors_are_values() {
    match Device::rocm(0) {
        Err(e) => {
            assert!(
                matches!(e, Error::Rocm(RocmError::RuntimeNotFound(_) | RocmError::NoDevice { .. })),
                "expected the no-device variant, got {e:?}"
            );
            assert!(e.is_no_device());
            let hint = e.hint().expect("no device has a hint");
            assert!(hint.contains("--device cpu"), "{hint}");
            assert!(e.budget_shortfall().is_none());
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_GPU=1 but {e}"
            );
            common::skipped(format!("the GPU half (OverBudget matched on a device) needs the GPU tier: {e}"));
        }
        Ok(_) => {
            // A 1 MiB budget and a 256 MiB tensor: the allocation past the budget.
            let d = Device::rocm_with_budget(0, Budget::bytes(1 << 20)).unwrap();
            let e = Tensor::zeros(&[64 << 20], DType::F32, &d).unwrap_err();
            assert!(matches!(e, Error::Rocm(RocmError::OverBudget { .. })), "{e:?}");
            let short = e.budget_shortfall().expect("over budget has a shortfall");
            assert!(short.needed > short.available, "{short:?}");
            assert!(e.hint().unwrap().contains("--vram-budget"));
            Device::rocm_with_budget(0, Budget::bytes(usize::MAX)).unwrap();
        }
    }
    // `auto` never fails: it falls back to the CPU and says why.
    let (d, why) = Device::auto();
    assert!(d.is_rocm() || why.is_some());
}

/// A structured conv error from the ROCm backend is unwrapped into `Error::Conv`, the
/// variant the CPU gives.
#[test]
fn rocm_conv_errors_become_conv_errors() {
    let conv = ConvError::BudgetExceeded {
        problem: "conv2d".into(),
        algorithm: "ImplicitGemm".into(),
        unit: "output row",
        needed: 10,
        available: 4,
        budget: 8,
        live: 4,
    };
    let e = Error::from(RocmError::from(conv));
    assert!(matches!(e, Error::Conv(ConvError::BudgetExceeded { needed: 10, available: 4, .. })), "{e:?}");
    let e = Error::from(RocmError::OverBudget { ordinal: 0, requested: 100, live: 30, budget: 50 });
    assert_eq!(e.budget_shortfall().map(|s| (s.needed, s.available)), Some((100, 20)));
    assert!(e.to_string().contains("100 bytes"), "{e}");
}
