//! Tiled output is bit-identical to untiled output: on images that need at least 4 tiles,
//! for each network shape (se 2x / 3x / 4x with 4 SE blocks, pro 3x, nose 2x without SE),
//! with tile states kept between the SE passes and with them recomputed.

mod common;

use examples_sr::upscale::{Options, TileSize, Upscaler};

fn run(up: &Upscaler, img: &examples_sr::image_io::Image, tile: TileSize, budget: usize) -> (examples_sr::image_io::Image, examples_sr::upscale::Stats) {
    let plan = up.plan(img.width, img.height, &Options { tile, budget_bytes: budget }).expect("plan");
    up.upscale_with_stats(img, &plan, &mut |_| {}).expect("upscale")
}

fn check(variant: &str, w: usize, h: usize, channels: usize, tile: usize) {
    let Some(models) = common::models_or_skip(&format!("tiled_equals_untiled ({variant})")) else { return };
    let up = common::load(&models, variant);
    let img = common::synthetic(w, h, channels, 11);
    let (whole, ws) = run(&up, &img, TileSize::Whole, usize::MAX);
    assert_eq!(ws.tiles, 1);
    // Enough budget for every tile state: the cached path.
    let (cached, cs) = run(&up, &img, TileSize::Fixed(tile), usize::MAX);
    assert!(cs.tiles >= 4, "{variant}: only {} tiles", cs.tiles);
    assert_eq!(cs.recomputed, 0, "{variant}: states should have been kept");
    let (worst, count) = common::max_diff(&whole, &cached);
    assert_eq!((worst, count), (0, 0), "{variant}: tiled (cached) differs from untiled in {count} samples, max {worst}");
    // No room for any tile state: every pass recomputes from the input.
    let (recomputed, rs) = run(&up, &img, TileSize::Fixed(tile), 0);
    if !up.network().pools().is_empty() {
        assert!(rs.recomputed > 0, "{variant}: nothing was recomputed with a zero budget");
    }
    let (worst, count) = common::max_diff(&whole, &recomputed);
    assert_eq!((worst, count), (0, 0), "{variant}: tiled (recomputed) differs from untiled in {count} samples, max {worst}");
    println!(
        "{variant}: {w}x{h} in {} tiles of <= {tile} px ({} SE passes): identical to untiled (cached and recomputed)",
        cs.tiles,
        cs.passes - 1
    );
}

#[test]
fn tiled_equals_untiled_se_2x() {
    // Odd size: the rounding rows/columns and uneven tiles.
    check("models-se/up2x-no-denoise", 67, 45, 3, 24);
}

#[test]
fn tiled_equals_untiled_se_3x() {
    check("models-se/up3x-denoise3x", 50, 42, 3, 24);
}

#[test]
fn tiled_equals_untiled_se_4x_rgba() {
    check("models-se/up4x-conservative", 41, 38, 4, 20);
}

#[test]
fn tiled_equals_untiled_pro_3x() {
    check("models-pro/up3x-conservative", 40, 40, 3, 20);
}

#[test]
fn tiled_equals_untiled_nose_2x() {
    check("models-nose/up2x-no-denoise", 52, 40, 3, 24);
}
