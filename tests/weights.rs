//! Loading safetensors: good files load exactly; bad ones fail with errors that name the
//! file, the tensor and the byte offsets.

use rocm_vision::{DType, Device, Weights};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::path::PathBuf;

fn write_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocm-vision-weights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn good_file() -> Vec<u8> {
    let a: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let b: Vec<u8> =
        [half::f16::from_f32(0.5), half::f16::from_f32(-1.25)].iter().flat_map(|v| v.to_le_bytes()).collect();
    let c: Vec<u8> = vec![7, 8, 9];
    let mut m = HashMap::new();
    m.insert("layer.weight".to_string(), TensorView::new(Dtype::F32, vec![2, 3], &a).unwrap());
    m.insert("layer.bias".to_string(), TensorView::new(Dtype::F16, vec![2], &b).unwrap());
    m.insert("ids".to_string(), TensorView::new(Dtype::U8, vec![3], &c).unwrap());
    safetensors::serialize(&m, None).unwrap()
}

#[test]
fn loads_tensors_with_prefixes_and_dtype_conversion() {
    let p = write_file("good.safetensors", &good_file());
    let w = Weights::open(&p, &Device::cpu()).unwrap();
    let layer = w.pp("layer");
    let t = layer.get("weight", &[2, 3]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(layer.get("bias", &[2]).unwrap().dtype(), DType::F16);
    let as_f32 = w.clone().with_dtype(DType::F32).pp("layer").get("bias", &[2]).unwrap();
    assert_eq!((as_f32.dtype(), as_f32.to_vec::<f32>().unwrap()), (DType::F32, vec![0.5, -1.25]));
    assert!(layer.contains("weight") && !layer.contains("gamma"));
}

#[test]
fn missing_keys_wrong_shapes_and_dtypes_are_named() {
    let p = write_file("names.safetensors", &good_file());
    let w = Weights::open(&p, &Device::cpu()).unwrap();
    let e = w.pp("layer").get("gamma", &[2]).unwrap_err().to_string();
    assert!(e.contains("missing tensor \"layer.gamma\"") && e.contains("names.safetensors"), "{e}");
    let e = w.get("layer.weight", &[3, 2]).unwrap_err().to_string();
    assert!(e.contains("\"layer.weight\"") && e.contains("[2, 3]") && e.contains("[3, 2]"), "{e}");
    let e = w.get("ids", &[3]).unwrap_err().to_string();
    assert!(e.contains("\"ids\"") && e.contains("U8"), "{e}");
    let e = w.pp("other").get("weight", &[2, 3]).unwrap_err().to_string();
    assert!(e.contains("layer.weight"), "a near miss should be suggested: {e}");
}

#[test]
fn truncated_oversized_and_malformed_files_are_rejected_with_offsets() {
    let good = good_file();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let data_start = 8 + header_len;
    // Truncated inside the length, inside the header, and inside the data.
    for cut in [0, 5, 8 + header_len / 2, data_start + 3, good.len() - 1] {
        let p = write_file(&format!("cut{cut}.safetensors"), &good[..cut]);
        let e = match Weights::open(&p, &Device::cpu()) {
            Ok(_) => panic!("a file cut at byte {cut} loaded"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(&format!("cut{cut}.safetensors")) && e.contains("truncated"), "cut at {cut}: {e}");
        if cut > data_start {
            assert!(
                e.contains(&format!("{}", good.len())) && e.contains(&format!("ends at {cut}")),
                "cut at {cut}: {e}"
            );
        }
    }
    let mut long = good.clone();
    long.extend_from_slice(&[0; 5]);
    let e = Weights::open(write_file("long.safetensors", &long), &Device::cpu()).err().unwrap().to_string();
    assert!(e.contains("5 unexpected bytes"), "{e}");
    let mut garbage = good.clone();
    garbage[8] = b'#';
    let e = Weights::open(write_file("garbage.safetensors", &garbage), &Device::cpu()).err().unwrap().to_string();
    assert!(e.contains("malformed safetensors header") && e.contains(&format!("8..{data_start}")), "{e}");
    let e = Weights::open("/nonexistent/vae.safetensors", &Device::cpu()).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/vae.safetensors"), "{e}");
}
