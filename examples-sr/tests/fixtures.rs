//! Our output against ncnn's on every fixture in `fixtures/manifest.json` (written by
//! `fixtures/make_fixtures.py` with the ncnn PyPI package on the CPU, fp32): the 8-bit
//! images within 1/255, and the raw network output of the float fixtures at float
//! precision.

mod common;

use std::collections::HashMap;

use examples_sr::image_io;
use examples_sr::upscale::{Options, Upscaler};
use rocm_vision::{DType, Device, Weights};

fn manifest() -> serde_json::Value {
    let text = std::fs::read_to_string(common::fixtures_dir().join("manifest.json")).expect("manifest.json");
    serde_json::from_str(&text).expect("manifest.json is JSON")
}

fn field<'a>(case: &'a serde_json::Value, key: &str) -> &'a str {
    case[key].as_str().unwrap_or_else(|| panic!("case field {key}"))
}

/// Every manifest case upscaled in `dtype` on `device`, against ncnn's output: the cases
/// beyond `levels` levels.
/// With `present_only`, the cases whose model is not in `models` are left out (and
/// named); the second value counts the cases run.
fn fixtures_beyond(
    models: &std::path::Path,
    device: &Device,
    dtype: DType,
    levels: u32,
    present_only: bool,
) -> (Vec<String>, usize) {
    let m = manifest();
    let cases = m["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 28, "the manifest lists 28 cases");
    let mut nets: HashMap<String, Upscaler> = HashMap::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    println!("{device} {dtype:?}");
    println!("{:<32} {:<10} {:>8} {:>9} {:>9}", "variant", "input", "max|d|", "differ", "of");
    for case in cases {
        let variant = field(case, "variant");
        let input = field(case, "input");
        if present_only && !models.join(format!("{variant}.bin")).is_file() {
            println!("{variant:<32} {input:<10} (model not in {}: left out)", models.display());
            continue;
        }
        ran += 1;
        let up = nets.entry(variant.to_string()).or_insert_with(|| {
            common::parse_variant(variant).load(models, dtype, device).unwrap_or_else(|e| panic!("{variant}: {e}"))
        });
        let src = m["inputs"][input]["file"].as_str().expect("input file");
        let img = image_io::load(&common::fixtures_dir().join(src)).expect("fixture input");
        let want = image_io::load(&common::fixtures_dir().join(field(case, "output"))).expect("fixture output");
        let plan = up.plan(img.width, img.height, &Options::whole()).expect("plan");
        let got = up.upscale(&img, &plan, &mut |_| {}).expect("upscale");
        let (worst, count) = common::max_diff(&got, &want);
        println!("{variant:<32} {input:<10} {worst:>8} {count:>9} {:>9}", common::samples(&want).len());
        if worst > levels {
            failures.push(format!("{variant} on {input}: max |diff| {worst}"));
        }
    }
    (failures, ran)
}

#[test]
fn every_fixture_matches_ncnn_within_one_level() {
    let Some(models) = common::models_or_skip("every_fixture_matches_ncnn_within_one_level") else { return };
    let (failures, _) = fixtures_beyond(&models, &common::device(), DType::F32, 1, false);
    assert!(failures.is_empty(), "beyond 1/255: {failures:?}");
}

/// The same on a ROCm GPU (GPU tier), for the cases whose model is there: f32 within 1
/// level, f16 within 3 (ncnn's reference is fp32; f16 storage moves a few samples by more
/// than one level). Covers the GPU's own
/// input upload (8-bit levels normalised on the device) and output read-back (quantised
/// and interleaved on the device) for RGB, RGBA and 16-bit inputs.
#[test]
fn gpu_every_fixture_matches_ncnn() {
    let test = "gpu_every_fixture_matches_ncnn";
    let Some(models) = common::models_or_skip(test) else { return };
    let Some(device) = common::rocm_or_skip(None) else { return };
    // The GPU machine carries two of the models (scripts/gpu-apps-build.sh): models-se 2x
    // and 4x, on RGB, odd-sized and RGBA inputs (4 cases).
    let (mut failures, ran) = fixtures_beyond(&models, &device, DType::F32, 1, true);
    let (f16, ran16) = fixtures_beyond(&models, &device, DType::F16, 3, true);
    failures.extend(f16);
    assert!(ran >= 3 && ran16 == ran, "only {ran} fixture cases have their model in {}", models.display());
    assert!(failures.is_empty(), "beyond the bound: {failures:?}");
}

#[test]
fn float_fixtures_match_ncnn_output() {
    let Some(models) = common::models_or_skip("float_fixtures_match_ncnn_output") else { return };
    let m = manifest();
    let mut checked = 0;
    for case in m["cases"].as_array().expect("cases") {
        let Some(file) = case["float"].as_str() else { continue };
        let variant = field(case, "variant");
        let up = common::load(&models, variant);
        // On the network's own device handle (its engine and budget): tensors of two
        // handles do not mix.
        let w = Weights::open(common::fixtures_dir().join(file), up.network().device()).expect("float fixture");
        let input = w.get_unchecked_shape("input").expect("input tensor");
        let want = w.get_unchecked_shape("output").expect("output tensor");
        let d = input.dims().to_vec();
        let got = up.network().forward(input.reshape(&[1, d[0], d[1], d[2]]).expect("reshape")).expect("forward");
        assert_eq!(&got.dims()[1..], want.dims(), "{variant}: output shape");
        let (g, t) = (got.to_vec::<f32>().expect("output"), want.to_vec::<f32>().expect("expected"));
        let worst = g.iter().zip(&t).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let scale = t.iter().fold(0.0f32, |a, b| a.max(b.abs()));
        println!("{variant}: max |ours - ncnn| = {worst:.3e} (output range {scale:.3}, {} values)", t.len());
        // ncnn's winograd/sgemm float32 against our implicit GEMM: different summation
        // orders over 20+ layers; a few 1e-5 is the expected size.
        assert!(worst < 2e-4, "{variant}: {worst}");
        checked += 1;
    }
    assert_eq!(checked, 3, "three float fixtures");
}
