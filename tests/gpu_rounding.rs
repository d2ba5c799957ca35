//! GPU tier: with `ConvRounding::SizeIndependent` a convolution's output on a crop of the
//! input equals the same outputs of the whole map bit for bit, for the layer shapes of
//! Real-CUGAN and the VAE (3x3, 2x2 stride 2, 2x2 stride-2 transposed, 1x1, a 3-channel
//! head, a 512-channel map small enough for split-K) in f32, f16 and bf16. This is what
//! lossless tiling rests on. The same comparison under `ConvRounding::Fastest` is printed,
//! not asserted: there the plan may change with the size (split-K, rocBLAS's kernel
//! choice), and the line says whether it changed the bits. Skips with a printed reason
//! without a ROCm device (`ROCM_VISION_REQUIRE_GPU=1` makes that a failure).

use rocm_vision::{Conv2dParams, ConvRounding, DType, Device, Tensor};

mod common;
use common::gpu;

/// One layer: channels in and out, kernel, stride, transposed, the whole map and the
/// crop's origin and size (input pixels; origins multiples of the stride).
struct Layer {
    name: &'static str,
    c: usize,
    k: usize,
    kernel: usize,
    stride: usize,
    transposed: bool,
    whole: (usize, usize),
    crop: (usize, usize, usize, usize),
}

const LAYERS: &[Layer] = &[
    Layer {
        name: "3x3 64->64",
        c: 64,
        k: 64,
        kernel: 3,
        stride: 1,
        transposed: false,
        whole: (540, 960),
        crop: (100, 202, 136, 170),
    },
    Layer {
        name: "3x3 512->512 small",
        c: 512,
        k: 512,
        kernel: 3,
        stride: 1,
        transposed: false,
        whole: (64, 64),
        crop: (20, 10, 18, 18),
    },
    Layer {
        name: "2x2 s2 64->64",
        c: 64,
        k: 64,
        kernel: 2,
        stride: 2,
        transposed: false,
        whole: (540, 960),
        crop: (100, 202, 136, 170),
    },
    Layer {
        name: "2x2 s2 transposed 64->64",
        c: 64,
        k: 64,
        kernel: 2,
        stride: 2,
        transposed: true,
        whole: (270, 480),
        crop: (50, 100, 68, 86),
    },
    Layer {
        name: "1x1 64->128",
        c: 64,
        k: 128,
        kernel: 1,
        stride: 1,
        transposed: false,
        whole: (540, 960),
        crop: (100, 202, 136, 170),
    },
    Layer {
        name: "3x3 64->3 head",
        c: 64,
        k: 3,
        kernel: 3,
        stride: 1,
        transposed: false,
        whole: (540, 960),
        crop: (100, 202, 136, 170),
    },
];

fn random(shape: &[usize], seed: u64, std: f64, dtype: DType, device: &Device) -> Tensor {
    Tensor::rand_normal(shape, (0.0, std), seed, 0, DType::F32, &Device::cpu())
        .and_then(|t| t.to_dtype(dtype))
        .and_then(|t| t.to_device(device))
        .unwrap()
}

fn conv(x: &Tensor, w: &Tensor, b: &Tensor, l: &Layer) -> Tensor {
    let p = Conv2dParams::default().with_stride(l.stride);
    if l.transposed { x.conv_transpose2d(w, Some(b), &p) } else { x.conv2d(w, Some(b), &p) }.unwrap()
}

/// `(differing outputs, compared outputs, plan of the whole, plan of the crop)`.
fn compare(l: &Layer, dtype: DType, device: &Device) -> (usize, usize, String, String) {
    let (h, w) = l.whole;
    let (r0, c0, ch, cw) = l.crop;
    let x = random(&[1, l.c, h, w], 1, 1.0, dtype, device);
    let wshape = if l.transposed { [l.c, l.k, l.kernel, l.kernel] } else { [l.k, l.c, l.kernel, l.kernel] };
    let weight = random(&wshape, 2, (1.0 / (l.c * l.kernel * l.kernel) as f64).sqrt(), dtype, device);
    let bias = random(&[l.k], 3, 0.1, dtype, device);
    let whole = conv(&x, &weight, &bias, l);
    let crop_in = x.narrow(2, r0, ch).unwrap().narrow(3, c0, cw).unwrap().contiguous().unwrap();
    let crop = conv(&crop_in, &weight, &bias, l);
    let (oh, ow) = (crop.dims()[2], crop.dims()[3]);
    let (or, oc) = if l.transposed { (r0 * l.stride, c0 * l.stride) } else { (r0 / l.stride, c0 / l.stride) };
    let same = whole.narrow(2, or, oh).unwrap().narrow(3, oc, ow).unwrap().contiguous().unwrap();
    let (a, b) = (crop.to_vec::<f32>().unwrap(), same.to_vec::<f32>().unwrap());
    let differ = a.iter().zip(&b).filter(|(p, q)| p.to_bits() != q.to_bits()).count();
    let plan = |t: &Tensor| -> String {
        let p = Conv2dParams::default().with_stride(l.stride);
        let problem = if l.transposed {
            rocm_vision::ConvProblem::conv_transpose2d(t.dims(), weight.dims(), dtype, dtype, &p)
        } else {
            rocm_vision::ConvProblem::conv2d(t.dims(), weight.dims(), dtype, dtype, &p)
        }
        .unwrap();
        let info = device.conv_plan(&problem).unwrap();
        format!("{} ({})", info.algorithm, info.kernel)
    };
    (differ, a.len(), plan(&x), plan(&crop_in))
}

#[test]
fn gpu_size_independent_rounding_makes_crops_equal_the_whole() {
    let Some(dev) = gpu() else { return };
    let mut failures = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for l in LAYERS {
            for rounding in [ConvRounding::SizeIndependent, ConvRounding::Fastest] {
                let device = dev.clone().with_conv_rounding(rounding);
                let (differ, n, whole_plan, crop_plan) = compare(l, dtype, &device);
                println!(
                    "{rounding:?} {dtype:?} {}: {differ} of {n} outputs differ; whole: {whole_plan}; crop: {crop_plan}",
                    l.name
                );
                if rounding == ConvRounding::SizeIndependent && differ > 0 {
                    failures.push(format!("{dtype:?} {}: {differ} of {n} ({whole_plan} / {crop_plan})", l.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "crops differ from the whole map under SizeIndependent:\n{}", failures.join("\n"));
}
