//! Issue 27, item 2: the prelude compiles beside every toolkit name it wraps, under each
//! toolchain (run in the ROCm 6.4 and the ROCm 7.2 chroot): kernels/tests/prelude_toolkit_names.hip
//! calls the toolkit's 16-bit atomics, bf16/f16 conversions and shuffles next to the prelude's
//! rv_ wrappers, compiled by hiprtc through the backend's JIT (`jit::compile`) and by hipcc.
//!
//! The control: the same file with a shim defining `unsafeAtomicAdd` for one
//! `__hip_bfloat16` (a name HIP 6.4 lacks and HIP 7 provides, the same kind of breakage as
//! the atomicAdd shim on ROCm 7.14) compiles under HIP 6 and is rejected as a redefinition
//! under HIP 7: the compile really sees both header sets' names, so a prelude that redefined
//! one would fail here.

use conv_engine::testing::skipped;
use rocm_backend::{RocmError, jit, runtime};
use std::process::Command;

const SOURCE: &str = include_str!("../../kernels/tests/prelude_toolkit_names.hip");
const ENTRIES: &[&str] = &["names_atomics", "names_conversions", "names_shuffles"];
const ARCHS: &[&str] = &["gfx1100", "gfx1201", "gfx90a"];
/// A shim of the kind that broke: a definition of a name a newer HIP provides.
const SHIM: &str = "\n__device__ __hip_bfloat16 unsafeAtomicAdd(__hip_bfloat16* p, __hip_bfloat16 v) { \
                    __hip_bfloat16 o = *p; *p = __float2bfloat16(__bfloat162float(o) + __bfloat162float(v)); return o; }\n";

fn module(source: &'static str) -> kernels::Module {
    kernels::Module {
        name: "prelude_toolkit_names",
        file: "prelude_toolkit_names.hip",
        source,
        headers: &[(kernels::PRELUDE_NAME, kernels::PRELUDE)],
        families: &[],
    }
}

fn have_rocm(test: &str) -> Option<&'static rocm_backend::HipRuntime> {
    match runtime() {
        Ok(rt) => Some(rt),
        Err(e) => {
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_ROCM").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_ROCM=1 but: {e}"
            );
            skipped(format!("{test}: needs the ROCm toolchain chroot (hiprtc): {e}"));
            None
        }
    }
}

fn on_nvidia() -> bool {
    rocm_backend::RocmDevice::open(0).is_ok_and(|d| d.info().arch.starts_with("sm_"))
}

#[test]
fn hiprtc_compiles_the_toolkit_names_beside_the_prelude() {
    let Some(rt) = have_rocm("hiprtc") else { return };
    if on_nvidia() {
        skipped("the runtime is the HIP-on-CUDA test library, which compiles NVIDIA targets only");
        return;
    }
    for arch in ARCHS {
        let code = jit::compile(&module(SOURCE), arch).unwrap_or_else(|e| panic!("HIP {}: {e}", rt.version));
        for e in ENTRIES {
            assert!(code.windows(e.len()).any(|w| w == e.as_bytes()), "{arch}: {e} missing");
        }
        println!(
            "HIP {} hiprtc {}.{}, {arch}: {} bytes",
            rt.version,
            rt.hiprtc_version.0,
            rt.hiprtc_version.1,
            code.len()
        );
    }
}

#[test]
fn a_shim_redefining_a_hip_7_name_is_caught_under_hip_7_only() {
    let Some(rt) = have_rocm("shim control") else { return };
    if on_nvidia() {
        skipped("the runtime is the HIP-on-CUDA test library, which compiles NVIDIA targets only");
        return;
    }
    let shimmed: &'static str = Box::leak(format!("{SOURCE}{SHIM}").into_boxed_str());
    let result = jit::compile(&module(shimmed), "gfx1100");
    match (rt.version.major, result) {
        (6, Ok(_)) => println!("HIP {}: the shim compiles (6.x has no unsafeAtomicAdd for one bf16)", rt.version),
        (7, Err(RocmError::Compile { log, .. })) => {
            assert!(log.contains("redefinition of 'unsafeAtomicAdd'"), "HIP {}: {log}", rt.version);
            println!(
                "HIP {}: the shim is rejected: {}",
                rt.version,
                log.lines().find(|l| l.contains("redefinition")).unwrap()
            );
        }
        (major, other) => panic!("HIP {} (major {major}): unexpected {:?}", rt.version, other.map(|c| c.len())),
    }
}

#[test]
fn hipcc_compiles_the_toolkit_names_beside_the_prelude() {
    if have_rocm("hipcc").is_none() {
        return;
    }
    if on_nvidia() {
        skipped("the GPU tier has no hipcc");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rv-prelude-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/tests/prelude_toolkit_names.hip");
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/src");
    for arch in ARCHS {
        let out = dir.join(format!("{arch}.o"));
        let run = Command::new("hipcc")
            .args([
                "-x",
                "hip",
                &format!("--offload-arch={arch}"),
                "-O3",
                "--cuda-device-only",
                "-c",
                "-I",
                include,
                "-o",
            ])
            .arg(&out)
            .arg(src)
            .output();
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                assert!(
                    !std::env::var("ROCM_VISION_REQUIRE_ROCM").is_ok_and(|v| v == "1"),
                    "ROCM_VISION_REQUIRE_ROCM=1 but hipcc cannot run: {e}"
                );
                skipped(format!("hipcc is not on PATH: {e}"));
                return;
            }
        };
        assert!(run.status.success(), "hipcc for {arch}:\n{}", String::from_utf8_lossy(&run.stderr));
        let obj = std::fs::read(&out).unwrap();
        for e in ENTRIES {
            assert!(obj.windows(e.len()).any(|w| w == e.as_bytes()), "{arch}: {e} missing from the hipcc object");
        }
        println!("hipcc {arch}: {} bytes", obj.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
