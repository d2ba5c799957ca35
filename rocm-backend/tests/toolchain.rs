//! The ROCm toolchain tier: run inside the Debian chroot with the real ROCm 6.4 libraries
//! and no GPU. hiprtc really compiles every kernel module; with no GPU, device entry
//! points return the no-device error. Outside the chroot (no ROCm at all) the runtime
//! reports itself missing, clearly; `ROCM_VISION_REQUIRE_ROCM=1` makes that a failure.

use rocm_backend::{RocmDevice, RocmError, jit, runtime};

// The one skip rule of the README (`SKIPPED <test>: <reason>` on the process's stderr).
use conv_engine::testing::skipped;

fn require_rocm() -> bool {
    std::env::var("ROCM_VISION_REQUIRE_ROCM").is_ok_and(|v| v == "1")
}

#[test]
fn missing_runtime_or_device_is_a_clear_error() {
    match runtime() {
        Err(e) => {
            assert!(!require_rocm(), "ROCM_VISION_REQUIRE_ROCM=1 but: {e}");
            let msg = e.to_string();
            assert!(msg.starts_with("ROCm runtime not found") && msg.contains("ROCM_PATH"), "{msg}");
            assert!(matches!(RocmDevice::open(0), Err(RocmError::RuntimeNotFound(_))));
            skipped(format!("the device checks: {msg}"));
        }
        Ok(rt) => {
            println!(
                "HIP runtime {} ({}), hiprtc {}.{}, {} device(s)",
                rt.runtime_version, rt.library, rt.hiprtc_version.0, rt.hiprtc_version.1, rt.device_count
            );
            if rt.device_count == 0 {
                let e = RocmDevice::open(0).unwrap_err();
                assert!(matches!(e, RocmError::NoDevice { .. }), "{e}");
                assert!(e.to_string().contains("no ROCm device 0"), "{e}");
            }
        }
    }
}

#[test]
fn hiprtc_compiles_every_kernel_module_for_rdna3_and_rdna4() {
    if let Err(e) = runtime() {
        assert!(!require_rocm(), "ROCM_VISION_REQUIRE_ROCM=1 but: {e}");
        skipped(format!("needs the ROCm toolchain chroot: {e}"));
        return;
    }
    let archs: &[&str] =
        if std::env::var("ROCM_VISION_HIPRTC_ARCHS").is_ok() { &["gfx1100"] } else { &["gfx1100", "gfx1201"] };
    for arch in archs {
        for m in kernels::modules() {
            let t = std::time::Instant::now();
            let code = jit::compile(m, arch).unwrap_or_else(|e| panic!("{e}"));
            assert!(code.len() > 1000, "{}: {} bytes for {arch}", m.name, code.len());
            // Every entry point's symbol name is in the code object's symbol table.
            for entry in m.entry_points() {
                assert!(
                    code.windows(entry.len()).any(|w| w == entry.as_bytes()),
                    "{} for {arch}: {entry} missing",
                    m.name
                );
            }
            println!(
                "{arch} {:<12} {:>8} bytes, {} entry points, {:.1} s",
                m.name,
                code.len(),
                m.entry_points().len(),
                t.elapsed().as_secs_f64()
            );
        }
    }
}

#[test]
fn a_compile_error_returns_the_hiprtc_log() {
    if runtime().is_err() {
        skipped("needs the ROCm toolchain chroot");
        return;
    }
    let broken = kernels::Module {
        name: "broken",
        file: "broken.hip",
        source: "#include \"prelude.h\"\nRV_KERNEL void k() { undeclared_thing(); }\n",
        headers: &[(kernels::PRELUDE_NAME, kernels::PRELUDE)],
        families: &[],
    };
    match jit::compile(&broken, "gfx1100") {
        Err(RocmError::Compile { log, .. }) => assert!(log.contains("undeclared_thing"), "log: {log}"),
        other => panic!("expected a compile error, got {:?}", other.map(|c| c.len())),
    }
}
