//! GPU tier: `--tile auto` under the CLI's default 2 GiB budget at 1920x1080 (f32) and at
//! 3840x2160 input (f16), and tiles of 320 at 1920x1080 f16: the tiled run's allocator
//! peak stays inside the budget, and its image equals the whole-image run's bit for bit. Prints the tiling and both times (a
//! test, not a benchmark: the figures go to docs/measurements/ from scripts/gpu-apps.sh).
//! Skips with a printed reason without a ROCm device (`ROCM_VISION_REQUIRE_GPU=1` makes
//! that a failure) or without the models (`REALCUGAN_MODELS`).

mod common;

use examples_sr::image_io::Image;
use examples_sr::models::{ModelKind, Variant};
use examples_sr::upscale::{Options, TileSize};
use rocm_vision::{Budget, DType};

const BUDGET: usize = 2 << 30;

/// A deterministic RGB image with texture at every scale (an LCG's noise over gradients).
fn image(w: usize, h: usize) -> Image {
    let mut state = 0x2545_f491_u32;
    let data = (0..w * h * 3)
        .map(|i| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let (x, y) = ((i / 3) % w, (i / 3) / w);
            ((x * 255 / w + y * 255 / h) / 2 + (state >> 28) as usize) as u8
        })
        .collect();
    Image::from_u8(w, h, 3, data).unwrap()
}

#[test]
fn tile_auto_stays_in_the_default_budget_and_matches_the_whole_image() {
    let test = "tile_auto_stays_in_the_default_budget_and_matches_the_whole_image";
    let Some(models) = common::models_or_skip(test) else { return };
    let Some(dev) = common::rocm_or_skip(Some(Budget::bytes(64 << 30))) else { return };
    let alloc = dev.rocm_device().expect("a ROCm device").allocator();
    // 1080p f16 in tiles of 320 (24 of 320x270) differed from the whole image until the
    // network ran its convs with size-independent rounding (split-K and rocBLAS's kernel
    // choice change with the tile's size).
    for (w, h, dtype, tile) in [
        (1920, 1080, DType::F32, TileSize::Auto),
        (1920, 1080, DType::F16, TileSize::Fixed(320)),
        (3840, 2160, DType::F16, TileSize::Auto),
    ] {
        let up = Variant::new(ModelKind::Se, 2, 0).unwrap().load(&models, dtype, &dev).unwrap();
        let img = image(w, h);
        let auto = Options { tile, budget_bytes: BUDGET, cache_bytes: 64 << 30 };
        let plan = up.plan(w, h, &auto).unwrap();
        dev.synchronize().unwrap();
        let base = alloc.stats().live;
        alloc.reset_peaks();
        // The tiled run writes into a given-back output buffer, poisoned: the comparison
        // with the whole image below fails on any sample it leaves.
        up.recycle(Image::from_u8(2 * w, 2 * h, 3, vec![0xA5; 12 * w * h]).unwrap());
        let t0 = std::time::Instant::now();
        let (tiled, stats) = up.upscale_with_stats(&img, &plan, &mut |_| {}).unwrap();
        let tiled_time = t0.elapsed();
        let peak = alloc.stats().peak_live - base;

        let whole = up.plan(w, h, &Options::whole()).unwrap();
        let t0 = std::time::Instant::now();
        let reference = up.upscale(&img, &whole, &mut |_| {}).unwrap();
        let whole_time = t0.elapsed();
        let (tw, th) = plan.tile_size();
        println!(
            "{w}x{h} {dtype:?}: {} tiles of {tw}x{th} (~{} bytes each), {} runs recomputed, states kept \
             up to {} bytes, peak {peak} bytes live (budget {BUDGET}); tiled {:.0} ms, whole {:.0} ms \
             (first runs: kernel compilation and allocation included)",
            stats.tiles,
            plan.tile_bytes,
            stats.recomputed,
            stats.cached_bytes,
            tiled_time.as_secs_f64() * 1e3,
            whole_time.as_secs_f64() * 1e3
        );
        assert!(peak <= BUDGET, "{w}x{h} {dtype:?}: peak {peak} bytes live over the {BUDGET}-byte budget");
        let (worst, count) = common::max_diff(&tiled, &reference);
        assert_eq!((worst, count), (0, 0), "{w}x{h} {dtype:?}: tiled != whole ({count} samples, up to {worst})");
    }
}
