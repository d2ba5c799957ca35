//! Issue 13, item 3: seeded mutation fuzzing of the `.npy` latents reader: at least 20,000
//! mutated files (truncation, bit flips, header lengths, huge shapes, dtypes, orders),
//! zero panics, and no allocation past what the file backs. Its own test binary, so the
//! counting allocator sees only it.

use std::time::Duration;
use test_support::CountingAlloc;
use test_support::fuzz::{Rng, fuzz, replace_number};

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if shape.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let order = if fortran { "True" } else { "False" };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn seeds() -> Vec<Vec<u8>> {
    let f32s: Vec<u8> = (0..4 * 8 * 8).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect();
    let f16s: Vec<u8> = (0..16 * 4 * 4).flat_map(|i| half::f16::from_f32(i as f32).to_le_bytes()).collect();
    let f64s: Vec<u8> = (0..2 * 3).flat_map(|i| (i as f64).to_le_bytes()).collect();
    vec![
        npy("<f4", false, &[1, 4, 8, 8], &f32s),
        npy("<f2", false, &[1, 16, 4, 4], &f16s),
        npy("<f8", true, &[2, 3], &f64s),
        npy("<f4", false, &[256], &f32s),
    ]
}

/// Header edits: a dimension made huge or zero, the dtype or order changed, the header
/// length field rewritten.
fn header_aware(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 10 {
        return None;
    }
    let n = u16::from_le_bytes([data[8], data[9]]) as usize;
    let end = (10 + n).min(data.len());
    let mut header = data[10..end].to_vec();
    match rng.below(4) {
        0 => replace_number(rng, &mut header),
        1 => {
            let to = *rng.pick(&["<i4", ">f4", "<f16", "|u1", "<c8", "O", "<f2", "<f8"]);
            let text = String::from_utf8_lossy(&header).into_owned();
            let from = ["<f4", "<f2", "<f8"].into_iter().find(|d| text.contains(d))?;
            header = text.replacen(from, to, 1).into_bytes();
        }
        2 => {
            let text = String::from_utf8_lossy(&header).into_owned();
            header = text.replacen("False", "True", 1).replacen("'shape'", "'shape' ", 1).into_bytes();
        }
        _ => {
            let mut v = data.to_vec();
            let bad: u16 = *rng.pick(&[0, 1, u16::MAX, (n as u16).wrapping_add(1), (n as u16).wrapping_sub(1)]);
            v[8..10].copy_from_slice(&bad.to_le_bytes());
            return Some(v);
        }
    }
    let mut v = data[..8].to_vec();
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(&header);
    v.extend_from_slice(&data[end..]);
    Some(v)
}

#[test]
fn npy_reader_survives_mutated_files() {
    for s in seeds() {
        examples_sd::npy::read(&s).expect("the seeds read");
    }
    let report = fuzz(
        ".npy latents",
        &HEAP,
        0x5eed_0201,
        &seeds(),
        20_000,
        Duration::from_secs(40),
        &header_aware,
        // The data once as read, once more when a Fortran-order array is transposed.
        &|len| 16 * 1024 + 3 * len,
        &|bytes| examples_sd::npy::read(bytes).map(drop),
    );
    println!("{report}");
    for (i, msg) in report.panics.iter().take(5) {
        println!("  panic at mutation {i}: {msg}");
    }
    for (i, len, asked) in report.over_allocations.iter().take(5) {
        println!("  mutation {i}: a {len}-byte input asked for {asked} bytes at once");
    }
    assert_eq!(report.tried, 20_000, "stopped at the time cap");
    assert!(report.panics.is_empty(), "{report}");
    assert!(report.over_allocations.is_empty(), "{report}");
    assert!(report.rejected > report.tried / 4, "{report}");
}
