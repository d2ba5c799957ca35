//! Issue 13, item 3: seeded mutation fuzzing of the safetensors loader (`Weights`): at
//! least 20,000 mutated files (truncation, bit flips, a rewritten header length, shapes
//! and offsets made huge, names duplicated in the header, dtypes swapped), each opened and
//! every tensor loaded, with zero panics and no allocation past what the file backs. Its
//! own test binary, so the counting allocator sees only it.

use rocm_vision::{Device, Weights};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::time::Duration;
use test_support::CountingAlloc;
use test_support::fuzz::{Rng, fuzz, replace_number};

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

fn seed_file(n: usize) -> Vec<u8> {
    let a: Vec<u8> = (0..n * 6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..n * 2).flat_map(|i| half::f16::from_f32(i as f32 * 0.5).to_le_bytes()).collect();
    let c: Vec<u8> = (0..n * 2).flat_map(|i| half::bf16::from_f32(i as f32).to_le_bytes()).collect();
    let ids: Vec<u8> = (0..3u8).collect();
    let mut m = HashMap::new();
    m.insert("decoder.conv.weight".to_string(), TensorView::new(Dtype::F32, vec![n, 2, 3], &a).unwrap());
    m.insert("decoder.conv.bias".to_string(), TensorView::new(Dtype::F16, vec![n * 2], &b).unwrap());
    m.insert("decoder.norm.weight".to_string(), TensorView::new(Dtype::BF16, vec![n, 2], &c).unwrap());
    m.insert("ids".to_string(), TensorView::new(Dtype::U8, vec![3], &ids).unwrap());
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(&m, Some(meta)).unwrap()
}

/// Edits of the JSON header, with the 8-byte length rewritten to match (so the edit
/// reaches the parser behind it) or left stale.
fn header_aware(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 8 {
        return None;
    }
    let n = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
    let end = 8usize.checked_add(n).filter(|&e| e <= data.len())?;
    let mut header = data[8..end].to_vec();
    let body = &data[end..];
    let text = String::from_utf8_lossy(&header).into_owned();
    match rng.below(4) {
        // A number (shape dim, data offset) made huge, negative or zero.
        0 => replace_number(rng, &mut header),
        // A tensor entry repeated under the same name.
        1 => {
            let start = text.find("\"decoder.conv.bias\"")?;
            let stop = start + text[start..].find('}')? + 1;
            let entry = text[start..stop].to_string();
            header = text.replacen(&entry, &format!("{entry},{entry}"), 1).into_bytes();
        }
        // A dtype swapped.
        2 => {
            let to = *rng.pick(&["\"F64\"", "\"U8\"", "\"BOOL\"", "\"F8_E4M3\"", "\"I64\"", "\"X\""]);
            let from = *rng.pick(&["\"F32\"", "\"F16\"", "\"BF16\""]);
            header = text.replacen(from, to, 1).into_bytes();
        }
        // The header length itself off by a little or a lot.
        _ => {
            let mut v = data.to_vec();
            let bad: u64 =
                *rng.pick(&[n as u64 + 1, (n as u64).saturating_sub(1), 0, u64::MAX, 1 << 40, data.len() as u64]);
            v[..8].copy_from_slice(&bad.to_le_bytes());
            return Some(v);
        }
    }
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(&header);
    v.extend_from_slice(body);
    Some(v)
}

#[test]
fn weights_survive_mutated_files() {
    let device = Device::cpu();
    let load = |bytes: &[u8]| -> Result<(), String> {
        let w = Weights::from_bytes("fuzz.safetensors", bytes.to_vec(), &device).map_err(|e| e.to_string())?;
        let keys: Vec<String> = w.keys().map(str::to_string).collect();
        for k in keys {
            // Integer tensors are refused by name (not model weights); load the rest.
            if !w.info(&k).unwrap().1.is_float() {
                assert!(w.get_unchecked_shape(&k).is_err());
                continue;
            }
            match w.get_unchecked_shape(&k) {
                Ok(t) => {
                    assert_eq!(t.dims().iter().product::<usize>(), w.info(&k).unwrap().0.iter().product::<usize>())
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    };
    load(&seed_file(4)).expect("the seed loads");
    let seeds = vec![seed_file(1), seed_file(4), seed_file(9)];
    // The file's bytes are copied once into `Weights`, each tensor once more; a 100-byte
    // file may not ask for more than a few times its size.
    let report = fuzz(
        "safetensors Weights",
        &HEAP,
        0x5eed_0101,
        &seeds,
        20_000,
        Duration::from_secs(40),
        &header_aware,
        &|len| 16 * 1024 + 4 * len,
        &load,
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
