//! Issue 13: `Device` handles with different budgets must not mix silently. A handle's
//! identity is its engine (see `Device`'s rustdoc): CPU handles of different engines are
//! unequal, every op given tensors of two of them answers `Error::DeviceMismatch` naming
//! both budgets, `to_device` moves a tensor between them without a copy, and the moved
//! tensor's convolutions then run under the new handle's budget.

use conv_cpu::CpuConv;
use rocm_vision::{Algorithm, Budget, Conv2dParams, ConvEpilogue, ConvError, DType, Device, Error, Tensor};

mod common;

/// A conv that needs workspace: on an engine allowed only Im2colGemm, with 1 KiB, it cannot
/// fit (the column buffer is 16·9·32·32·4 bytes), and Direct is not there to rescue it.
fn tight() -> Device {
    Device::cpu_with_engine(CpuConv::new(Budget::bytes(1024)).with_allowed(&[Algorithm::Im2colGemm]))
}

fn input(device: &Device) -> Tensor {
    Tensor::rand_normal(&[1, 16, 32, 32], (0.0, 1.0), 1, 0, DType::F32, device).unwrap()
}

fn weight(device: &Device) -> Tensor {
    Tensor::rand_normal(&[16, 16, 3, 3], (0.0, 0.1), 2, 0, DType::F32, device).unwrap()
}

fn pad1() -> Conv2dParams {
    Conv2dParams::default().with_padding(1)
}

fn assert_mismatch(op: &str, r: Result<Tensor, Error>) {
    match r {
        Err(Error::DeviceMismatch { op: got, left, right }) => {
            assert_eq!(got, op);
            let msg = format!("{left} | {right}");
            // Both handles named with their budgets: the tight engine's 1 KiB, the shared 64 MiB.
            assert!(msg.contains("1.00 KiB") && msg.contains("64.00 MiB"), "{op}: {msg}");
            assert!(msg.contains("engine #") && msg.contains("shared engine of Device::cpu()"), "{op}: {msg}");
        }
        Err(other) => panic!("{op}: expected DeviceMismatch, got {other:?}"),
        Ok(t) => panic!("{op}: mixed engines silently, got a tensor on {:?}", t.device()),
    }
}

#[test]
fn cpu_handles_are_equal_by_engine() {
    assert_eq!(Device::cpu(), Device::cpu(), "Device::cpu() handles share one engine");
    let a = Device::cpu_with_budget(Budget::bytes(8 << 20));
    let b = Device::cpu_with_budget(Budget::bytes(8 << 20));
    assert_eq!(a, a.clone());
    assert_ne!(a, Device::cpu());
    assert_ne!(a, b, "two engines with equal budgets are still two engines");
    // Kind and Display are unchanged: both are the CPU.
    assert!(a.is_cpu() && b.is_cpu() && a.to_string() == "cpu");
    // Debug (what an assert prints) tells them apart.
    assert_ne!(format!("{a:?}"), format!("{b:?}"));
    assert!(format!("{a:?}").contains("8.00 MiB"), "{a:?}");
}

/// Every op taking two tensors refuses operands of two engines, naming both budgets.
#[test]
fn mixing_engines_is_a_clean_error_naming_both_budgets() {
    let (t, c) = (tight(), Device::cpu());
    let x = input(&t);
    let on_cpu = input(&c);
    let w_cpu = weight(&c);
    let p = pad1();
    assert_mismatch("conv2d", x.conv2d(&w_cpu, None, &p));
    // The weight on the conv's handle, only the bias or the residual on another.
    let w = weight(&t);
    let bias_cpu = Tensor::zeros(&[16], DType::F32, &c).unwrap();
    assert_mismatch("conv2d", x.conv2d(&w, Some(&bias_cpu), &p));
    let ep = ConvEpilogue { residual: Some(&on_cpu), ..Default::default() };
    assert_mismatch("conv2d", x.conv2d_fused(&w, None, &p, &ep));
    assert_mismatch("conv2d", x.conv2d_with_plan(&w_cpu, None, &p).map(|(y, _)| y));
    assert_mismatch("add", x.add(&on_cpu));
    assert_mismatch("mul", on_cpu.mul(&x));
    assert_mismatch("cat", Tensor::cat(&[&x, &on_cpu], 1));
    let m = x.reshape(&[16, 1024]).unwrap();
    assert_mismatch("matmul", m.matmul(&on_cpu.reshape(&[1024, 16]).unwrap()));
    let ids = Tensor::from_vec(vec![0u32, 3], &[2], &c).unwrap();
    assert_mismatch("index_select", x.index_select(&ids, 1));
    let ln_w = Tensor::ones(&[32], DType::F32, &c).unwrap();
    assert_mismatch("layer_norm", x.layer_norm(Some(&ln_w), None, 1e-5));
    let mask = x.cmp(rocm_vision::CmpOp::Gt, &Tensor::zeros(&[1], DType::F32, &t).unwrap()).unwrap();
    assert_mismatch("where_cond", mask.where_cond(&x, &on_cpu));
    assert_mismatch("add", x.clone().add_assign(&on_cpu));
    let dst = Tensor::zeros(&[1, 32, 32, 32], DType::F32, &t).unwrap();
    match dst.slice_set(&on_cpu, 1, 0) {
        Err(Error::DeviceMismatch { op: "slice_set", .. }) => {}
        other => panic!("slice_set: expected DeviceMismatch, got {other:?}"),
    }
    // The message says what to do.
    let e = x.add(&on_cpu).unwrap_err().to_string();
    assert!(e.contains("to_device"), "{e}");
}

/// The documented way across: `to_device` re-tags CPU data (no copy), and the moved
/// tensor's convolution runs under the new handle's budget — a weight made under
/// `Device::cpu()` and moved to the tight handle gives `BudgetExceeded`, while the same
/// conv under `Device::cpu()` runs and matches the f64 reference.
#[test]
fn to_device_moves_between_engines_and_the_new_budget_governs() {
    let (t, c) = (tight(), Device::cpu());
    let w_cpu = weight(&c);
    let w_tight = w_cpu.to_device(&t).unwrap();
    assert_eq!(w_tight.device(), &t);
    assert_eq!(
        w_tight.as_candle().unwrap().id(),
        w_cpu.as_candle().unwrap().id(),
        "moving between CPU engines shares the data"
    );
    let x_cpu = input(&c);
    // Made under Device::cpu() and moved: the input's handle is now the tight one.
    let x_tight = x_cpu.to_device(&t).unwrap();
    match x_tight.conv2d(&w_tight, None, &pad1()) {
        Err(Error::Conv(ConvError::BudgetExceeded { available, needed, .. })) => {
            assert_eq!(available, 1024);
            assert!(needed > 1024);
        }
        other => panic!("expected BudgetExceeded under the tight handle, got {other:?}"),
    }
    // Under the shared engine the same conv fits, and is right.
    let y = x_cpu.conv2d(&w_cpu, None, &pad1()).unwrap();
    assert_eq!(y.device(), &c);
    let problem =
        conv_engine::ConvProblem::conv2d(&[1, 16, 32, 32], &[16, 16, 3, 3], DType::F32, DType::F32, &pad1()).unwrap();
    let f64s = |t: &Tensor| t.to_vec::<f64>().unwrap();
    let reference = conv_engine::reference::conv_f64(&problem, &f64s(&x_cpu), &f64s(&w_cpu), None);
    let got = y.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), reference.len());
    for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
        assert!((*g as f64 - r).abs() <= 1e-4 * (1.0 + r.abs()), "{i}: {g} vs {r}");
    }
    // Results stay on the handle they were computed under: a chain never drifts back to
    // the default budget.
    let ok = Device::cpu_with_engine(CpuConv::new(Budget::bytes(1 << 30)));
    let chained = x_cpu.to_device(&ok).unwrap().relu().unwrap().affine(2.0, 0.0).unwrap();
    assert_eq!(chained.device(), &ok);
    assert_eq!(chained.conv2d(&w_cpu.to_device(&ok).unwrap(), None, &pad1()).unwrap().device(), &ok);
}

/// On ROCm the budget is the GPU's: handles of one ordinal are one device, compare equal
/// and see the one budget; a CPU tensor beside a GPU tensor is a mismatch.
#[test]
fn rocm_handles_of_one_ordinal_share_the_budget() {
    let Some(gpu) = common::gpu() else { return };
    let limited = Device::rocm_with_budget(0, Budget::bytes(1 << 30)).unwrap();
    assert_eq!(gpu, limited);
    let d = gpu.describe();
    assert!(d.contains("1.00 GiB") && d.contains("every handle of rocm:0"), "{d}");
    let g = Tensor::ones(&[4], DType::F32, &gpu).unwrap();
    let h = Tensor::ones(&[4], DType::F32, &Device::cpu()).unwrap();
    match g.add(&h) {
        Err(Error::DeviceMismatch { left, right, .. }) => {
            assert!(left.starts_with("rocm:0") && right.starts_with("cpu"), "{left} | {right}")
        }
        other => panic!("expected DeviceMismatch, got {other:?}"),
    }
    Device::rocm_with_budget(0, Budget::bytes(usize::MAX)).unwrap();
}
