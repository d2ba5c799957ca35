//! The caching allocator on a real device (GPU tier): reuse, accounting, budget, trim.

mod common;

use candle_core::DType;
use rocm_backend::{DeviceArray, RocmError};

#[test]
fn allocator_reuses_accounts_and_enforces_the_budget() {
    let Some(dev) = common::device() else { return };
    let alloc = dev.allocator();
    alloc.trim(dev.stream()).unwrap();
    alloc.reset_peaks();
    let base = alloc.stats();
    {
        let a = DeviceArray::alloc(&dev, DType::F32, 1000).unwrap();
        let s = alloc.stats();
        assert_eq!(s.live, base.live + rocm_backend::alloc::size_class(4000));
        drop(a);
        let s = alloc.stats();
        assert_eq!((s.live, s.cached), (base.live, base.cached + rocm_backend::alloc::size_class(4000)));
        // Same size class: served from the cache.
        let hits = s.cache_hits;
        let _b = DeviceArray::alloc(&dev, DType::F32, 900).unwrap();
        assert_eq!(alloc.stats().cache_hits, hits + 1);
    }
    // A budget just above what is live: a 64 MiB request must fail with the numbers.
    let live = alloc.stats().live;
    alloc.set_budget(live + (16 << 20), dev.stream()).unwrap();
    let err = DeviceArray::alloc(&dev, DType::U8, 64 << 20).unwrap_err();
    match &err {
        RocmError::OverBudget { requested, budget, .. } => {
            assert_eq!((*requested, *budget), (64 << 20, live + (16 << 20)))
        }
        other => panic!("expected OverBudget, got {other}"),
    }
    assert!(err.to_string().contains("67108864"), "{err}");
    // Within the budget: allowed; cached blocks are released to make room.
    let small = DeviceArray::alloc(&dev, DType::U8, 8 << 20).unwrap();
    assert!(alloc.stats().live + alloc.stats().cached <= live + (16 << 20));
    drop(small);
    alloc.trim(dev.stream()).unwrap();
    assert_eq!(alloc.stats().cached, 0);
    alloc.set_budget(usize::MAX, dev.stream()).unwrap();
}

#[test]
fn round_trips_every_dtype() {
    let Some(dev) = common::device() else { return };
    let f: Vec<f32> = (0..1001).map(|i| i as f32 * 0.5 - 7.0).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &f).unwrap().to_vec::<f32>().unwrap(), f);
    let h: Vec<half::f16> = f.iter().map(|&v| half::f16::from_f32(v)).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &h).unwrap().to_vec::<half::f16>().unwrap(), h);
    let b: Vec<half::bf16> = f.iter().map(|&v| half::bf16::from_f32(v)).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &b).unwrap().to_vec::<half::bf16>().unwrap(), b);
    let d: Vec<f64> = f.iter().map(|&v| v as f64 / 3.0).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &d).unwrap().to_vec::<f64>().unwrap(), d);
    let u: Vec<u8> = (0..=255).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &u).unwrap().to_vec::<u8>().unwrap(), u);
    let w: Vec<u32> = (0..777).map(|i| i * 7919).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &w).unwrap().to_vec::<u32>().unwrap(), w);
    let l: Vec<i64> = (0..777).map(|i| i * -123_456_789_012).collect();
    assert_eq!(DeviceArray::from_slice(&dev, &l).unwrap().to_vec::<i64>().unwrap(), l);
    // Device-to-device copy of a slice.
    let src = DeviceArray::from_slice(&dev, &f).unwrap();
    let dst = DeviceArray::zeros(&dev, DType::F32, 10).unwrap();
    dst.buffer.copy_from(0, &src.buffer, 4 * 100, 40).unwrap();
    assert_eq!(dst.to_vec::<f32>().unwrap(), f[100..110]);
}
