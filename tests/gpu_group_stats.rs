//! GPU tier: group-norm statistics gathered band by band on the device equal the CPU's
//! bit for bit, and a map normalised in bands with them equals the map normalised whole
//! (the banded VAE decode's two promises), in f32/f16/bf16. Skips with a printed reason
//! where there is no ROCm device; `ROCM_VISION_REQUIRE_GPU=1` makes that a failure.

use rocm_vision::{DType, Device, GroupStats, GroupStatsAccumulator, Tensor};

mod common;
use common::gpu;

#[test]
fn banded_statistics_and_normalisation_match_the_whole_map() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    let (c, h, w, groups) = (64, 37, 45, 32);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let xc =
            Tensor::rand_normal(&[1, c, h, w], (0.5, 2.0), 21, 0, DType::F32, &cpu).unwrap().to_dtype(dtype).unwrap();
        let xg = xc.to_device(&g).unwrap();
        let weight = Tensor::rand_normal(&[c], (1.0, 0.2), 22, 0, DType::F32, &cpu).unwrap().to_dtype(dtype).unwrap();
        let bias = Tensor::rand_normal(&[c], (0.0, 0.2), 23, 0, DType::F32, &cpu).unwrap().to_dtype(dtype).unwrap();
        let (wg, bg) = (weight.to_device(&g).unwrap(), bias.to_device(&g).unwrap());
        let whole_cpu = GroupStats::of(&xc, groups).unwrap();
        let whole = GroupStats::of(&xg, groups).unwrap();
        assert_eq!(whole, whole_cpu, "{dtype:?}: device statistics differ from the CPU's");
        let mut acc = GroupStatsAccumulator::new(c, groups, &g).unwrap();
        for r0 in (0..h).step_by(8) {
            acc.add(&xg.narrow(2, r0, 8.min(h - r0)).unwrap().contiguous().unwrap()).unwrap();
        }
        assert_eq!(acc.finish().unwrap(), whole, "{dtype:?}: banded device statistics differ");

        let normed = xg.group_norm_with_stats(&whole, Some(&wg), Some(&bg), 1e-6, true).unwrap();
        let want: Vec<f32> = normed.to_dtype(DType::F32).unwrap().to_vec().unwrap();
        // Against the CPU's normalisation with the same statistics (f32 vs f64 affine).
        let reference: Vec<f32> = xc
            .group_norm_with_stats(&whole_cpu, Some(&weight), Some(&bias), 1e-6, true)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec()
            .unwrap();
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
        let worst = want.iter().zip(&reference).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0f32, f32::max);
        assert!(worst <= tol, "{dtype:?}: device normalisation {worst} from the CPU's");
        for (r0, rows) in [(0, 5), (5, 16), (21, 16)] {
            let band = xg.narrow(2, r0, rows).unwrap().contiguous().unwrap();
            let y: Vec<f32> = band
                .group_norm_with_stats(&whole, Some(&wg), Some(&bg), 1e-6, true)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .to_vec()
                .unwrap();
            for ch in 0..c {
                let (a, b) = (&want[(ch * h + r0) * w..][..rows * w], &y[ch * rows * w..][..rows * w]);
                assert!(
                    a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{dtype:?}: the band at row {r0} differs from the whole map in channel {ch}"
                );
            }
        }
    }
}
