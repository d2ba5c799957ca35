//! Tiled output is bit-identical to untiled output: on images that need at least 4 tiles,
//! for each network shape (se 2x / 3x / 4x with 4 SE blocks, pro 3x, nose 2x without SE),
//! with tile states kept between the SE passes, kept shed (maps dropped and rebuilt) and
//! recomputed.

mod common;

use examples_sr::upscale::{Options, TileSize, Upscaler};

fn run(
    up: &Upscaler,
    img: &examples_sr::image_io::Image,
    tile: TileSize,
    cache: usize,
) -> (examples_sr::image_io::Image, examples_sr::upscale::Stats) {
    run_shed(up, img, tile, cache, None)
}

/// `shed`: overrides the plan's choice of shedding parked states.
fn run_shed(
    up: &Upscaler,
    img: &examples_sr::image_io::Image,
    tile: TileSize,
    cache: usize,
    shed: Option<bool>,
) -> (examples_sr::image_io::Image, examples_sr::upscale::Stats) {
    let mut plan =
        up.plan(img.width, img.height, &Options { tile, budget_bytes: usize::MAX, cache_bytes: cache }).expect("plan");
    plan.shed = shed.unwrap_or(plan.shed);
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
    assert_eq!(
        (worst, count),
        (0, 0),
        "{variant}: tiled (cached) differs from untiled in {count} samples, max {worst}"
    );
    // Every state kept, shed: the maps rebuilt before their readers give the same bytes.
    let (shed, ss) = run_shed(&up, &img, TileSize::Fixed(tile), usize::MAX, Some(true));
    assert_eq!(ss.recomputed, 0, "{variant}: shed states should have been kept");
    if variant.starts_with("models-se/up2x") {
        // The second U-Net's skip map is rebuilt from the 3-channel map (see net/shed.rs).
        assert!(ss.shed_maps > 0, "{variant}: nothing was shed");
    }
    let (worst, count) = common::max_diff(&whole, &shed);
    assert_eq!((worst, count), (0, 0), "{variant}: tiled (shed) differs from untiled in {count} samples, max {worst}");
    // No room for any tile state: every pass recomputes from the input.
    let (recomputed, rs) = run(&up, &img, TileSize::Fixed(tile), 0);
    if !up.network().pools().is_empty() {
        assert!(rs.recomputed > 0, "{variant}: nothing was recomputed with a zero budget");
    }
    let (worst, count) = common::max_diff(&whole, &recomputed);
    assert_eq!(
        (worst, count),
        (0, 0),
        "{variant}: tiled (recomputed) differs from untiled in {count} samples, max {worst}"
    );
    // An output buffer given back (here poisoned) is written everywhere by the next image.
    let s = up.scale();
    let n = w * s * h * s * channels;
    up.recycle(examples_sr::image_io::Image::from_u8(w * s, h * s, channels, vec![0xA5; n]).expect("poison"));
    let (recycled, _) = run(&up, &img, TileSize::Fixed(tile), usize::MAX);
    let (worst, count) = common::max_diff(&whole, &recycled);
    assert_eq!((worst, count), (0, 0), "{variant}: a recycled output buffer kept {count} stale samples, max {worst}");
    let plan = up.plan(w, h, &Options { tile: TileSize::Fixed(tile), budget_bytes: usize::MAX, cache_bytes: 0 });
    let (tw, th) = plan.expect("plan").tile_size();
    println!(
        "{variant}: {w}x{h} in {} tiles of <= {tile} px (origins on multiples of {}, {:?} extra context) ({} SE \
         passes, {} maps shed): identical to untiled (cached, shed, recomputed, into a recycled buffer)",
        cs.tiles,
        up.tile_align(),
        up.far_extension(tw, th).expect("extension"),
        cs.passes - 1,
        ss.shed_maps
    );
}

#[test]
fn tiled_equals_untiled_se_2x() {
    // Odd size: the rounding rows/columns and uneven tiles.
    check("models-se/up2x-no-denoise", 67, 45, 3, 24);
}

/// Tiles far enough from the image's edges that their extra far context (see
/// `Upscaler::far_extension`) ends inside the image instead of at its end.
#[test]
fn tiled_equals_untiled_se_2x_interior_tiles() {
    check("models-se/up2x-no-denoise", 150, 118, 3, 32);
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

/// The property the tiling rests on, at float precision: a run on a window of the net
/// input whose origin is a multiple of the tiler's alignment, with the tiler's extra far
/// context, given the untiled run's SE means, reproduces the untiled float output over the
/// window's own region bit for bit (the conv engine computes each output pixel the same
/// way whichever tile it is in, Winograd's transform grid included).
#[test]
fn window_runs_reproduce_untiled_floats() {
    let Some(models) = common::models_or_skip("window_runs_reproduce_untiled_floats") else { return };
    use examples_sr::net::Stop;
    use rocm_vision::Tensor;
    for variant in ["models-se/up2x-no-denoise", "models-se/up3x-no-denoise", "models-se/up4x-denoise3x"] {
        let up = common::load(&models, variant);
        let (net, s, p, a) = (up.network(), up.scale(), up.prepadding(), up.tile_align());
        // Large enough that the windows' extra context ends inside the image.
        let (h0, w0) = (6 * a + 40, 7 * a + 40);
        let (h, w) = (h0 + 2 * p, w0 + 2 * p);
        let data: Vec<f32> = (0..3 * h * w).map(|i| (i * 7919 % 1000) as f32 / 1000.0).collect();
        let full = Tensor::from_vec(data, &[1, 3, h, w], net.device()).expect("input");
        let (out, means) = net.forward_with_means(full.clone()).expect("untiled");
        let (oh, ow) = (out.dims()[2], out.dims()[3]);
        let o = out.to_vec::<f32>().expect("output");
        let mut compared = 0;
        // (origin row, column, own rows, columns).
        for (y0, x0, th, tw) in [(0, 0, 2 * a, 2 * a), (a, 2 * a, 2 * a, 3 * a), (2 * a, a, 2 * a, 2 * a)] {
            let (eh, ew) = up.far_extension(tw, th).expect("extension");
            assert!(y0 + th + eh < h0 && x0 + tw + ew < w0, "{variant}: the window is not inside the image");
            let (wh, ww) = (th + eh + 2 * p, tw + ew + 2 * p);
            let win = full.narrow(2, y0, wh).and_then(|t| t.narrow(3, x0, ww)).expect("window");
            let mut run = net.start(win.contiguous().expect("contiguous")).expect("start");
            let Stop::Done(t) = net.advance(&mut run, &means).expect("window run") else {
                panic!("{variant}: the window run stopped at a pooling layer although every mean was given")
            };
            let (wh, ww) = (t.dims()[2], t.dims()[3]);
            let v = t.to_vec::<f32>().expect("window output");
            for c in 0..3 {
                for i in 0..th * s {
                    for j in 0..tw * s {
                        let a = o[(c * oh + y0 * s + i) * ow + x0 * s + j];
                        let b = v[(c * wh + i) * ww + j];
                        assert_eq!(
                            a.to_bits(),
                            b.to_bits(),
                            "{variant}: window at ({y0}, {x0}), pixel ({c}, {i}, {j})"
                        );
                        compared += 1;
                    }
                }
            }
        }
        println!(
            "{variant}: {compared} float outputs of 3 windows (origins on multiples of {a}) identical to the untiled run"
        );
    }
}
