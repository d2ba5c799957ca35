//! Issue 13, item 4 (CPU tier): a Real-CUGAN tile with the N-th allocation of the
//! convolution engine failing, for every N the run makes: each a clean error naming the
//! injected fault, the engine's workspace and the heap back where they were, and the next
//! run on the same device gives the same image. Needs the models (skips without them).

mod common;

use common::*;
use conv_engine::ConvError;
use examples_sr::upscale::{Options, TileSize};
use test_support::{CountingAlloc, fail_every_allocation};

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

#[test]
fn realcugan_tile_fails_cleanly_at_every_allocation() {
    let Some(models) = models_or_skip("realcugan_tile_fails_cleanly_at_every_allocation") else { return };
    let up = load(&models, "models-se/up2x-no-denoise");
    let img = synthetic(24, 20, 3, 7);
    let plan = up.plan(img.width, img.height, &Options { tile: TileSize::Whole, ..Options::whole() }).unwrap();
    let meter = up.network().device().cpu_conv().meter();
    let reference = up.upscale(&img, &plan, &mut |_| {}).expect("upscale");
    let before = meter.allocations();
    let again = up.upscale(&img, &plan, &mut |_| {}).expect("upscale");
    let per_run = meter.allocations() - before;
    assert_eq!(samples(&again), samples(&reference));
    assert!(per_run >= 10, "a tile makes {per_run} engine allocations");

    fail_every_allocation(&HEAP, meter, per_run, |n| {
        let e = up.upscale(&img, &plan, &mut |_| {}).err().unwrap_or_else(|| panic!("allocation {n}: no error"));
        let msg = e.to_string();
        assert!(msg.contains("injected fault"), "allocation {n} of {per_run}: {msg}");
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        let mut found = false;
        while let Some(s) = source {
            found |= matches!(s.downcast_ref::<ConvError>(), Some(ConvError::AllocationFailed { injected: true, .. }));
            source = s.source();
        }
        assert!(found || msg.contains("could not allocate"), "allocation {n}: {msg}");
    });
    let after = up.upscale(&img, &plan, &mut |_| {}).expect("upscale after the faults");
    assert_eq!(samples(&after), samples(&reference), "the device upscales as before");
}
