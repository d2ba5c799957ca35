//! Loader tests: a synthetic model built here (every supported layer type, every accepted
//! weight tag, an odd-length fp16 blob) and its corruptions, then the real Real-CUGAN files
//! in `<repo>/models` when scripts/fetch-models.sh has fetched them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use half::f16;

use super::bin::{TAG_FP16, TAG_FP32, TAG_FP32_RAW, TAG_INT8};
use super::*;

const PARAM: &str = "7767517
11 13
Input            in0     0 1 in0
Convolution      conv0   1 1 in0 c0 0=3 1=3 5=1 6=81 9=2 -23310=1,1.000000e-01
Split            split0  1 3 c0 s0 s1 s2
Pooling          gap     1 1 s0 g0 0=1 4=1
InnerProduct     fc      1 1 g0 f0 0=3 1=1 2=9 9=4
BinaryOp         mul     2 1 s1 f0 m0 0=2
Crop             crop    1 1 s2 k0 -23309=2,1,1 -23310=2,-1,-1 -23311=2,-2,-1
Deconvolution    up      1 1 m0 d0 0=3 1=4 3=2 4=3 5=1 6=144 9=2 -23310=1,2.000000e-01
BinaryOp         add     2 1 d0 k0 a0
Convolution      conv1   1 1 a0 c1 0=4 1=1 6=12
PixelShuffle     ps      1 1 c1 out0 0=2
";

/// A byte range of the synthetic `.bin` and who reads it.
#[derive(Debug, Clone, Copy)]
struct Section {
    start: usize,
    end: usize,
    layer: &'static str,
    what: &'static str,
}

struct Synth {
    bin: Vec<u8>,
    sections: Vec<Section>,
}

impl Synth {
    fn push(&mut self, layer: &'static str, what: &'static str, bytes: &[u8]) {
        let start = self.bin.len();
        self.bin.extend_from_slice(bytes);
        self.sections.push(Section { start, end: self.bin.len(), layer, what });
    }

    fn tagged(&mut self, layer: &'static str, tag: u32, values: &[f32]) {
        self.push(layer, "weight tag", &tag.to_le_bytes());
        let mut bytes: Vec<u8> = if tag == TAG_FP16 {
            values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect()
        } else {
            values.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        self.push(layer, "weights", &bytes);
    }

    fn bias(&mut self, layer: &'static str, values: &[f32]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.push(layer, "bias", &bytes);
    }

    fn section_at(&self, offset: usize) -> Section {
        *self.sections.iter().find(|s| s.start <= offset && offset < s.end).expect("offset inside the file")
    }
}

/// Exactly representable in f16: multiples of 1/8 in [-5, 5].
fn conv0_weights() -> Vec<f32> {
    (0..81).map(|i| (i as f32 - 40.0) / 8.0).collect()
}

/// Value = ncnn flat index, so the IOHW permutation can be read back.
fn up_weights_ncnn_order() -> Vec<f32> {
    (0..144).map(|i| i as f32).collect()
}

fn synth() -> Synth {
    let mut s = Synth { bin: Vec::new(), sections: Vec::new() };
    s.tagged("conv0", TAG_FP16, &conv0_weights()); // 81 halves: 162 bytes + 2 padding
    s.bias("conv0", &[0.5, -0.25, 1.0]);
    s.tagged("fc", TAG_FP32, &(0..9).map(|i| i as f32 * 0.1).collect::<Vec<_>>());
    s.bias("fc", &[1.0, 2.0, 3.0]);
    s.tagged("up", TAG_FP32_RAW, &up_weights_ncnn_order());
    s.bias("up", &[-1.0, 0.0, 1.0]);
    s.tagged("conv1", TAG_FP16, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    s
}

fn load(param: &str, bin: &[u8]) -> Result<NcnnModel, NcnnError> {
    NcnnModel::from_bytes(param.as_bytes(), bin)
}

fn err(param: &str, bin: &[u8]) -> NcnnError {
    match load(param, bin) {
        Ok(_) => panic!("expected an error for:\n{param}"),
        Err(e) => e,
    }
}

/// The synthetic param with the line of layer `name` edited.
fn edit_line(name: &str, f: impl Fn(&str) -> String) -> String {
    PARAM
        .lines()
        .map(|l| if l.split_whitespace().nth(1) == Some(name) { f(l) } else { l.to_string() })
        .map(|l| l + "\n")
        .collect()
}

fn line_of(name: &str) -> usize {
    1 + PARAM.lines().position(|l| l.split_whitespace().nth(1) == Some(name)).expect("layer in PARAM")
}

#[test]
fn synthetic_model_loads_with_types_weights_and_shapes() {
    let s = synth();
    let m = load(PARAM, &s.bin).unwrap();
    let types: Vec<&str> = m.layers.iter().map(|l| l.kind.type_name()).collect();
    assert_eq!(
        types,
        [
            "Input",
            "Convolution",
            "Split",
            "Pooling",
            "InnerProduct",
            "BinaryOp",
            "Crop",
            "Deconvolution",
            "BinaryOp",
            "Convolution",
            "PixelShuffle"
        ]
    );
    let names: BTreeSet<&str> = SUPPORTED_TYPES.iter().copied().collect();
    assert_eq!(types.iter().copied().collect::<BTreeSet<_>>(), names);

    let LayerKind::Convolution(c) = &m.layer("conv0").unwrap().kind else { panic!("conv0 kind") };
    assert_eq!((c.num_output, c.num_input, c.kernel_h, c.kernel_w, c.stride_h, c.dilation_w), (3, 3, 3, 3, 1, 1));
    assert_eq!(c.pad, Pad { left: 0, right: 0, top: 0, bottom: 0 });
    assert_eq!(c.activation, Activation::LeakyRelu { slope: 0.1 });
    assert_eq!(c.weight, conv0_weights());
    assert_eq!(c.bias.as_deref(), Some(&[0.5, -0.25, 1.0][..]));
    assert!(c.bias_term);

    let LayerKind::InnerProduct(fc) = &m.layer("fc").unwrap().kind else { panic!("fc kind") };
    assert_eq!((fc.num_output, fc.num_input, fc.activation), (3, 3, Activation::Sigmoid));
    assert_eq!(fc.weight[8], 0.8);

    let LayerKind::Deconvolution(d) = &m.layer("up").unwrap().kind else { panic!("up kind") };
    assert_eq!((d.num_output, d.num_input, d.kernel_w, d.stride_w, d.pad.top), (3, 3, 4, 2, 3));
    assert_eq!(d.activation, Activation::LeakyRelu { slope: 0.2 });
    // IOHW: weight[i][o][k] holds what ncnn stores at [o][i][k].
    for i in 0..3 {
        for o in 0..3 {
            for k in 0..16 {
                assert_eq!(d.weight[(i * 3 + o) * 16 + k], ((o * 3 + i) * 16 + k) as f32);
            }
        }
    }

    let LayerKind::Crop(crop) = &m.layer("crop").unwrap().kind else { panic!("crop kind") };
    assert_eq!(
        crop.slices,
        [CropSlice { axis: CropAxis::H, start: 1, end: -1 }, CropSlice { axis: CropAxis::W, start: 1, end: -1 }]
    );
    assert_eq!(m.layer("ps").unwrap().kind, LayerKind::PixelShuffle(PixelShuffle { upscale_factor: 2 }));
    assert_eq!(m.layer("gap").unwrap().kind, LayerKind::Pooling(Pooling::GlobalAverage));
    assert_eq!(m.layer("mul").unwrap().kind, LayerKind::BinaryOp(BinaryOp::Mul));
    let LayerKind::Convolution(c1) = &m.layer("conv1").unwrap().kind else { panic!("conv1 kind") };
    assert_eq!((c1.bias.is_none(), c1.bias_term, c1.activation), (true, false, Activation::None));

    // Graph: names, producers, consumers, shapes.
    let shape = |n: &str| m.blobs[m.blob_index(n).unwrap()].shape;
    assert_eq!(shape("in0"), BlobShape::Image { channels: None });
    assert_eq!(shape("g0"), BlobShape::Vector { len: Some(3) });
    assert_eq!(shape("f0"), BlobShape::Vector { len: Some(3) });
    assert_eq!(shape("a0"), BlobShape::Image { channels: Some(3) });
    assert_eq!(shape("out0"), BlobShape::Image { channels: Some(1) });
    let c0 = &m.blobs[m.blob_index("c0").unwrap()];
    assert_eq!((c0.producer, c0.consumers.as_slice()), (1, &[2][..]));
    assert_eq!(m.layers[2].tops.len(), 3);
    assert_eq!(m.outputs().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["out0"]);
    assert_eq!(m.inputs().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["in0"]);
    assert_eq!(m.layer("split0").unwrap().line, 5);

    // The weight ranges tile the file in layer order.
    let ranges: Vec<_> = m.layers.iter().map(|l| l.bin_range.clone()).filter(|r| !r.is_empty()).collect();
    assert_eq!(ranges.first().unwrap().start, 0);
    assert_eq!(ranges.last().unwrap().end, s.bin.len());
    assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
    assert_eq!(m.layer("conv0").unwrap().bin_range, 0..4 + 164 + 12);
}

#[test]
fn every_truncation_names_the_layer_and_offset() {
    let s = synth();
    for cut in 0..s.bin.len() {
        let want = s.section_at(cut);
        match err(PARAM, &s.bin[..cut]) {
            NcnnError::Truncated { layer, what, offset, available, needed, file_len, .. } => {
                assert_eq!((layer.as_str(), what, offset), (want.layer, want.what, want.start), "cut at {cut}");
                assert_eq!(available, cut - want.start, "cut at {cut}");
                assert_eq!(needed, want.end - want.start, "cut at {cut}");
                assert_eq!(file_len, cut);
            }
            other => panic!("cut at {cut}: unexpected {other}"),
        }
    }
}

#[test]
fn wrong_tags_name_the_layer_and_offset() {
    let s = synth();
    for tag_section in s.sections.iter().filter(|x| x.what == "weight tag") {
        for (bad, unsupported) in [(0x1234_5678u32, false), (TAG_INT8, true), (0x0130_6B48, false)] {
            let mut bin = s.bin.clone();
            bin[tag_section.start..tag_section.start + 4].copy_from_slice(&bad.to_le_bytes());
            match (err(PARAM, &bin), unsupported) {
                (NcnnError::UnknownTag { layer, offset, tag, .. }, false)
                | (NcnnError::UnsupportedTag { layer, offset, tag, .. }, true) => {
                    assert_eq!((layer.as_str(), offset, tag), (tag_section.layer, tag_section.start, bad));
                }
                (other, _) => panic!("tag {bad:#x} at {}: unexpected {other}", tag_section.start),
            }
        }
    }
}

#[test]
fn trailing_bytes_are_oversized() {
    let s = synth();
    for extra in [1usize, 3, 4, 1000] {
        let mut bin = s.bin.clone();
        bin.resize(bin.len() + extra, 0);
        match err(PARAM, &bin) {
            NcnnError::Oversized { layer, ty, offset, trailing, file_len } => {
                assert_eq!(
                    (layer.as_str(), ty.as_str(), offset, trailing, file_len),
                    ("conv1", "Convolution", s.bin.len(), extra, bin.len())
                );
            }
            other => panic!("{extra} extra bytes: unexpected {other}"),
        }
    }
    // A model without weights and a non-empty .bin.
    let param = "7767517\n2 2\nInput in0 0 1 in0\nSplit sp 1 1 in0 out0\n";
    assert!(load(param, &[]).is_ok());
    assert!(matches!(err(param, &[0; 4]), NcnnError::Oversized { offset: 0, trailing: 4, .. }));
}

#[test]
fn non_finite_weights_are_located() {
    let s = synth();
    let mut bin = s.bin.clone();
    // conv0 element 5 (fp16 data starts after the 4-byte tag) -> NaN
    bin[4 + 10..4 + 12].copy_from_slice(&f16::NAN.to_le_bytes());
    match err(PARAM, &bin) {
        NcnnError::NonFinite { layer, what, offset, index, .. } => {
            assert_eq!((layer.as_str(), what, offset, index), ("conv0", "weights", 14, 5))
        }
        other => panic!("unexpected {other}"),
    }
    // The fc bias (untagged f32): second value -> +inf.
    let bias = s.sections.iter().find(|x| x.layer == "fc" && x.what == "bias").unwrap();
    let mut bin = s.bin.clone();
    bin[bias.start + 4..bias.start + 8].copy_from_slice(&f32::INFINITY.to_le_bytes());
    match err(PARAM, &bin) {
        NcnnError::NonFinite { layer, what, offset, .. } => {
            assert_eq!((layer.as_str(), what, offset), ("fc", "bias", bias.start + 4))
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn unknown_layer_types_are_rejected_by_name_and_line() {
    let s = synth();
    for ty in ["Interp", "ReLU", "Foo", "convolution"] {
        let param = edit_line("ps", |l| l.replacen("PixelShuffle", ty, 1));
        match err(&param, &s.bin) {
            NcnnError::UnknownLayerType { line, layer, ty: t } => {
                assert_eq!((line, layer.as_str(), t.as_str()), (line_of("ps"), "ps", ty));
            }
            other => panic!("{ty}: unexpected {other}"),
        }
    }
}

#[test]
fn blob_graph_errors() {
    let s = synth();
    // crop reads s2 before split0 produces it
    let lines: Vec<&str> = PARAM.lines().collect();
    let (split, crop) = (line_of("split0") - 1, line_of("crop") - 1);
    let mut moved = lines.clone();
    let crop_line = moved.remove(crop);
    moved.insert(split, crop_line);
    match err(&moved.join("\n"), &s.bin) {
        NcnnError::BlobNotProduced { line, layer, ty, blob } => {
            assert_eq!((line, layer.as_str(), ty.as_str(), blob.as_str()), (split + 1, "crop", "Crop", "s2"));
        }
        other => panic!("unexpected {other}"),
    }
    let param = edit_line("conv1", |l| l.replace(" a0 c1 ", " a0 k0 ").to_string());
    let param = param.replace("c1 out0", "k0 out0");
    match err(&param, &s.bin) {
        NcnnError::DuplicateBlob { line, layer, blob, first_layer, .. } => assert_eq!(
            (line, layer.as_str(), blob.as_str(), first_layer.as_str()),
            (line_of("conv1"), "conv1", "k0", "crop")
        ),
        other => panic!("unexpected {other}"),
    }
    assert!(matches!(
        err(&PARAM.replace("11 13", "11 12"), &s.bin),
        NcnnError::BlobCountMismatch { declared: 12, found: 13 }
    ));
    assert!(matches!(
        err(&PARAM.replace("11 13", "12 13"), &s.bin),
        NcnnError::LayerCountMismatch { declared: 12, found: 11 }
    ));
}

#[test]
fn inconsistent_weight_sizes_name_the_line() {
    let s = synth();
    for (layer, from, to) in [
        ("conv0", "6=81", "6=80"),
        ("conv0", "6=81", "6=0"),
        ("fc", "2=9", "2=10"),
        ("up", "6=144", "6=143"),
        ("conv1", "0=4", "0=5"),
    ] {
        let param = edit_line(layer, |l| l.replace(from, to));
        match err(&param, &s.bin) {
            NcnnError::InvalidParam { line, layer: l, .. } => {
                assert_eq!((line, l.as_str()), (line_of(layer), layer), "{layer} {to}");
            }
            other => panic!("{layer} {to}: unexpected {other}"),
        }
    }
}

#[test]
fn unsupported_parameters_name_the_layer() {
    let s = synth();
    let cases: &[(&str, &str, &str)] = &[
        ("conv0", "5=1", "5=1 8=1"),             // int8
        ("conv0", "5=1", "5=1 19=1"),            // dynamic weight
        ("conv0", "5=1", "5=1 4=-233"),          // SAME padding
        ("conv0", "5=1", "5=1 4=-1"),            // negative padding
        ("conv0", "5=1", "5=1 7=3"),             // group: not a Convolution parameter
        ("conv0", "5=1", "5=2"),                 // bias_term not 0/1
        ("conv0", "5=1", "5=1 3=0"),             // stride 0
        ("conv0", "5=1", "5=1 11=1.5"),          // float where an int is due
        ("conv0", "9=2", "9=3"),                 // clip
        ("conv0", "9=2", "9=5"),                 // mish
        ("conv0", "9=2", "9=7"),                 // no such activation
        ("conv0", " -23310=1,1.000000e-01", ""), // leaky ReLU without slope
        ("conv0", "-23310=1,1.000000e-01", "-23310=2,1.0,2.0"),
        ("gap", "0=1", "0=0"), // max pooling
        ("gap", "4=1", "4=0"), // not global
        ("gap", "4=1", "4=1 9=1"),
        ("fc", "9=4", "9=4 8=1"),
        ("fc", "9=4", "9=4 3=1"),
        ("mul", "0=2", "0=1"),     // sub
        ("mul", "0=2", "0=2 1=1"), // with_scalar
        ("crop", "-23309", "0=1 -23309"),
        ("crop", "-23311=2,-2,-1", "-23311=2,-2,3"),
        ("crop", "-23311=2,-2,-1", "-23311=2,-1,-1"),
        ("crop", " -23311=2,-2,-1", ""), // 2 starts without axes
        ("crop", "-23310=2,-1,-1", "-23310=1,-1"),
        ("crop", "-23309=2,1,1", "-23309=2,1.0,1.0"),
        ("up", "5=1", "5=1 18=1"),  // output padding
        ("up", "5=1", "5=1 20=64"), // output size
        ("up", "5=1", "5=1 28=1"),  // dynamic weight
        ("up", "5=1", "5=1 8=1"),   // not a Deconvolution parameter
        ("ps", "0=2", "0=2 1=1"),   // depth-to-space mode
        ("ps", "0=2", "0=0"),
        ("split0", "s2", "s2 0=1"),
        ("in0", "0 1 in0", "0 1 in0 11=2"),
    ];
    for &(layer, from, to) in cases {
        let param = edit_line(layer, |l| l.replacen(from, to, 1));
        assert_ne!(param, PARAM, "case {layer}: '{from}' not found");
        match err(&param, &s.bin) {
            NcnnError::InvalidParam { line, layer: l, .. } => {
                assert_eq!((line, l.as_str()), (line_of(layer), layer), "{layer}: {to}");
            }
            other => panic!("{layer} '{to}': unexpected {other}"),
        }
    }
}

#[test]
fn wrong_blob_counts_per_type() {
    let s = synth();
    for (layer, from, to) in [
        ("conv0", "1 1 in0 c0", "1 2 in0 c0 cx"),
        ("mul", "2 1 s1 f0 m0", "1 1 s1 m0"),
        ("split0", "1 3 c0 s0 s1 s2", "1 0 c0"),
        ("in0", "0 1 in0", "0 2 in0 inx"),
    ] {
        let param = edit_line(layer, |l| l.replacen(from, to, 1));
        match err(&param, &s.bin) {
            NcnnError::InvalidParam { line, layer: l, .. } => {
                assert_eq!((line, l.as_str()), (line_of(layer), layer), "{layer}: {to}");
            }
            other => panic!("{layer} '{to}': unexpected {other}"),
        }
    }
}

#[test]
fn shape_inconsistencies_name_the_layer() {
    let f32_tagged = |n: usize| {
        let mut v = TAG_FP32.to_le_bytes().to_vec();
        v.resize(4 + 4 * n, 0);
        v
    };
    // conv expecting 4 input channels after an Input declaring 3
    let param = "7767517\n2 2\nInput in0 0 1 in0 2=3\nConvolution conv 1 1 in0 out0 0=2 1=1 6=8\n";
    match err(param, &f32_tagged(8)) {
        NcnnError::Inconsistent { line, layer, .. } => {
            assert_eq!((line, layer.as_str()), (4, "conv"))
        }
        other => panic!("unexpected {other}"),
    }
    // 3 channels cannot be pixel-shuffled by 2
    let param =
        "7767517\n3 3\nInput in0 0 1 in0\nConvolution conv 1 1 in0 c 0=3 1=1 6=9\nPixelShuffle ps 1 1 c out0 0=2\n";
    match err(param, &f32_tagged(9)) {
        NcnnError::Inconsistent { line, layer, ty, .. } => {
            assert_eq!((line, layer.as_str(), ty.as_str()), (5, "ps", "PixelShuffle"));
        }
        other => panic!("unexpected {other}"),
    }
    // add of 2 and 3 channels
    let param = "7767517\n4 4\nInput in0 0 1 in0\nConvolution a 1 1 in0 x 0=2 1=1 6=2\n\
                 Convolution b 1 1 in0 y 0=3 1=1 6=3\nBinaryOp add 2 1 x y out0\n";
    let mut bin = f32_tagged(2);
    bin.extend(f32_tagged(3));
    match err(param, &bin) {
        NcnnError::Inconsistent { line, layer, .. } => {
            assert_eq!((line, layer.as_str()), (6, "add"))
        }
        other => panic!("unexpected {other}"),
    }
    // InnerProduct straight on an image blob (ncnn would flatten it; Real-CUGAN never does)
    let param = "7767517\n2 2\nInput in0 0 1 in0\nInnerProduct fc 1 1 in0 out0 0=2 2=4\n";
    match err(param, &f32_tagged(4)) {
        NcnnError::Inconsistent { line, layer, .. } => {
            assert_eq!((line, layer.as_str()), (4, "fc"))
        }
        other => panic!("unexpected {other}"),
    }
    // per-channel mul with a vector of the wrong length
    let param = "7767517\n5 6\nInput in0 0 1 in0 2=4\nSplit sp 1 2 in0 a b\nPooling gap 1 1 a g 0=1 4=1\n\
                 InnerProduct fc 1 1 g v 0=3 2=12\nBinaryOp mul 2 1 b v out0 0=2\n";
    match err(param, &f32_tagged(12)) {
        NcnnError::Inconsistent { line, layer, .. } => {
            assert_eq!((line, layer.as_str()), (7, "mul"))
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn file_level_errors() {
    let s = synth();
    assert!(matches!(err(&PARAM.replacen("7767517", "7767516", 1), &s.bin), NcnnError::BadMagic { line: 1, .. }));
    let mut bytes = PARAM.as_bytes().to_vec();
    bytes[PARAM.find("Split").unwrap()] = 0xFF;
    assert!(matches!(NcnnModel::from_bytes(&bytes, &s.bin), Err(NcnnError::Syntax { line: 5, .. })));
    match NcnnModel::load("/nonexistent/x.param", "/nonexistent/x.bin") {
        Err(e @ NcnnError::Io { .. }) => assert!(e.to_string().contains("/nonexistent/x.param")),
        other => panic!("unexpected {other:?}"),
    }
    // Messages carry the locations.
    let e = err(&PARAM.replace("6=81", "6=80"), &s.bin).to_string();
    assert!(e.contains("line 4") && e.contains("conv0") && e.contains("Convolution"), "{e}");
    let e = err(PARAM, &s.bin[..100]).to_string();
    assert!(e.contains("offset 4") && e.contains("conv0"), "{e}");
}

// ----------------------------------------------------------------------------------
// The real model files
// ----------------------------------------------------------------------------------

const VARIANTS: [&str; 18] = [
    "models-se/up2x-conservative",
    "models-se/up2x-no-denoise",
    "models-se/up2x-denoise1x",
    "models-se/up2x-denoise2x",
    "models-se/up2x-denoise3x",
    "models-se/up3x-conservative",
    "models-se/up3x-no-denoise",
    "models-se/up3x-denoise3x",
    "models-se/up4x-conservative",
    "models-se/up4x-no-denoise",
    "models-se/up4x-denoise3x",
    "models-pro/up2x-conservative",
    "models-pro/up2x-no-denoise",
    "models-pro/up2x-denoise3x",
    "models-pro/up3x-conservative",
    "models-pro/up3x-no-denoise",
    "models-pro/up3x-denoise3x",
    "models-nose/up2x-no-denoise",
];

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("models")
}

/// The loaded real models, or None (with the reason printed) when they were not fetched.
fn real_models() -> Option<Vec<(&'static str, NcnnModel)>> {
    let dir = models_dir();
    if !dir.is_dir() {
        test_support::skipped(format!(
            "{} does not exist; run scripts/fetch-models.sh to test the real Real-CUGAN files",
            dir.display()
        ));
        return None;
    }
    let models = VARIANTS
        .iter()
        .map(|v| {
            let p = dir.join(format!("{v}.param"));
            let b = dir.join(format!("{v}.bin"));
            let m = NcnnModel::load(&p, &b)
                .unwrap_or_else(|e| panic!("{v}: {e} (models/ is incomplete? rerun scripts/fetch-models.sh --force)"));
            (*v, m)
        })
        .collect();
    Some(models)
}

fn count_types(m: &NcnnModel) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::new();
    for l in &m.layers {
        *c.entry(l.kind.type_name()).or_insert(0) += 1;
    }
    c
}

#[test]
fn real_models_parse_with_the_expected_structure() {
    let Some(models) = real_models() else { return };
    let mut all_types = BTreeSet::new();
    for (variant, m) in &models {
        let scale: usize = variant[variant.find("up").unwrap() + 2..][..1].parse().unwrap();
        let nose = variant.starts_with("models-nose");
        let types = count_types(m);
        all_types.extend(types.keys().copied());
        let expected: BTreeMap<&str, usize> = match (nose, scale) {
            (true, _) => {
                [("Input", 1), ("Convolution", 18), ("Split", 4), ("Crop", 4), ("Deconvolution", 4), ("BinaryOp", 4)]
                    .into_iter()
                    .collect()
            }
            (false, 4) => [
                ("Input", 1),
                ("Convolution", 19),
                ("Split", 8),
                ("Pooling", 4),
                ("InnerProduct", 8),
                ("BinaryOp", 8),
                ("Crop", 5),
                ("Deconvolution", 4),
                ("PixelShuffle", 1),
            ]
            .into_iter()
            .collect(),
            (false, _) => [
                ("Input", 1),
                ("Convolution", 18),
                ("Split", 8),
                ("Pooling", 4),
                ("InnerProduct", 8),
                ("BinaryOp", 8),
                ("Crop", 4),
                ("Deconvolution", 4),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(types, expected, "{variant}");

        assert_eq!(m.inputs().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["in0"], "{variant}");
        let outs: Vec<_> = m.outputs().collect();
        assert_eq!(outs.len(), 1, "{variant}");
        assert_eq!(outs[0].name, "out0", "{variant}");
        assert_eq!(outs[0].shape, BlobShape::Image { channels: Some(3) }, "{variant}");

        // The upsampling deconvolution of UNet1: 4x4 s2 p3 (2x, 4x) or 5x5 s3 p2 (3x).
        let deconvs: Vec<&Deconvolution> = m
            .layers
            .iter()
            .filter_map(|l| match &l.kind {
                LayerKind::Deconvolution(d) => Some(d),
                _ => None,
            })
            .collect();
        let (k, s, p) = if scale == 3 { (5, 3, 2) } else { (4, 2, 3) };
        let up: Vec<_> = deconvs.iter().filter(|d| d.kernel_w == k).collect();
        assert_eq!(up.len(), 1, "{variant}");
        assert_eq!(
            (up[0].kernel_h, up[0].stride_w, up[0].stride_h, up[0].pad, up[0].activation),
            (k, s, s, Pad { left: p, right: p, top: p, bottom: p }, Activation::None),
            "{variant}"
        );
        assert_eq!(up[0].num_output, if scale == 4 { 64 } else { 3 }, "{variant}");
        for d in deconvs.iter().filter(|d| d.kernel_w != k) {
            assert_eq!((d.kernel_w, d.stride_w, d.pad.left), (2, 2, 0), "{variant}");
            assert_eq!(d.activation, Activation::LeakyRelu { slope: 0.1 }, "{variant}");
        }

        for l in &m.layers {
            match &l.kind {
                LayerKind::Convolution(c) => {
                    assert!(
                        [Activation::None, Activation::LeakyRelu { slope: 0.1 }].contains(&c.activation),
                        "{variant} {}",
                        l.name
                    );
                    assert!(c.bias.is_some() && c.pad.left == 0 && c.dilation_w == 1, "{variant} {}", l.name);
                    assert!(c.weight.iter().all(|w| w.is_finite()));
                }
                LayerKind::InnerProduct(ip) => {
                    let want = if l.name.starts_with("convsigmoid") { Activation::Sigmoid } else { Activation::Relu };
                    assert_eq!(ip.activation, want, "{variant} {}", l.name);
                }
                LayerKind::PixelShuffle(ps) => assert_eq!(ps.upscale_factor, 2, "{variant}"),
                LayerKind::Crop(c) => {
                    assert!(c.slices.iter().all(|s| s.axis != CropAxis::C && s.start > 0 && s.end == -s.start));
                }
                _ => {}
            }
        }
        // The first convolution reads RGB.
        let LayerKind::Convolution(c0) = &m.layers[1].kind else { panic!("{variant}: layer 1 is not a convolution") };
        assert_eq!((c0.num_input, c0.num_output, c0.kernel_w), (3, 32, 3), "{variant}");
    }
    let supported: BTreeSet<&str> = SUPPORTED_TYPES.iter().copied().collect();
    assert_eq!(all_types, supported, "the real files use exactly the supported types");
}

#[test]
fn real_model_weights_match_the_raw_file() {
    let Some(models) = real_models() else { return };
    let dir = models_dir();
    for (variant, m) in &models {
        let bin = std::fs::read(dir.join(format!("{variant}.bin"))).unwrap();
        let mut end = 0;
        for l in &m.layers {
            if l.bin_range.is_empty() {
                continue;
            }
            assert_eq!(l.bin_range.start, end, "{variant} {}: ranges are contiguous", l.name);
            end = l.bin_range.end;
            // Every Real-CUGAN weight blob is fp16-tagged; decode it independently here.
            let r = l.bin_range.clone();
            assert_eq!(&bin[r.start..r.start + 4], &TAG_FP16.to_le_bytes(), "{variant} {}", l.name);
            let half_at = |i: usize| f16::from_le_bytes([bin[r.start + 4 + 2 * i], bin[r.start + 5 + 2 * i]]).to_f32();
            match &l.kind {
                LayerKind::Convolution(c) => {
                    for i in [0, c.weight.len() / 2, c.weight.len() - 1] {
                        assert_eq!(c.weight[i], half_at(i), "{variant} {}", l.name);
                    }
                }
                LayerKind::Deconvolution(d) => {
                    let k = d.kernel_w * d.kernel_h;
                    for (o, i, kk) in [
                        (0, 0, 0),
                        (d.num_output - 1, 0, k - 1),
                        (0, d.num_input - 1, 1),
                        (d.num_output / 2, d.num_input / 3, k / 2),
                    ] {
                        assert_eq!(
                            d.weight[(i * d.num_output + o) * k + kk],
                            half_at((o * d.num_input + i) * k + kk),
                            "{variant} {}",
                            l.name
                        );
                    }
                }
                LayerKind::InnerProduct(ip) => {
                    assert_eq!(ip.weight[ip.weight.len() - 1], half_at(ip.weight.len() - 1));
                }
                _ => panic!("{variant} {}: unexpected weights", l.name),
            }
        }
        assert_eq!(end, bin.len(), "{variant}: the weights cover the whole .bin");
    }
    // Spot values of se/up2x-no-denoise, decoded with numpy (float16 -> float32).
    let (_, m) = models.iter().find(|(v, _)| *v == "models-se/up2x-no-denoise").unwrap();
    let LayerKind::Convolution(c) = &m.layer("convrelu_0").unwrap().kind else { panic!("convrelu_0") };
    assert_eq!((c.weight[0], c.weight[1], c.weight[863]), (-0.042663574, 0.2770996, -0.011802673));
    let bias = c.bias.as_ref().unwrap();
    assert_eq!((bias[0], bias[31]), (0.0009393692, 0.02420044));
    let LayerKind::Convolution(last) = &m.layer("conv_46").unwrap().kind else { panic!("conv_46") };
    assert_eq!(last.bias.as_deref(), Some(&[0.41333008f32, 0.31347656, 0.3322754][..]));
}

#[test]
fn real_model_truncations_and_extensions_fail_cleanly() {
    let Some(models) = real_models() else { return };
    let dir = models_dir();
    // The two structures with the most and the fewest weighted layers are enough here;
    // every offset of every section is covered by the synthetic test.
    for variant in ["models-se/up4x-conservative", "models-nose/up2x-no-denoise"] {
        let (_, m) = models.iter().find(|(v, _)| *v == variant).unwrap();
        let param = std::fs::read(dir.join(format!("{variant}.param"))).unwrap();
        let bin = std::fs::read(dir.join(format!("{variant}.bin"))).unwrap();
        // A cut inside each layer's weights names that layer.
        for l in m.layers.iter().filter(|l| !l.bin_range.is_empty()) {
            for cut in [l.bin_range.start + 2, l.bin_range.end - 1] {
                match NcnnModel::from_bytes(&param, &bin[..cut]) {
                    Err(NcnnError::Truncated { layer, offset, .. }) => {
                        assert_eq!(layer, l.name, "{variant} cut {cut}");
                        assert!(l.bin_range.contains(&offset), "{variant} cut {cut}: offset {offset}");
                    }
                    other => panic!("{variant} cut {cut}: unexpected {other:?}"),
                }
            }
        }
        let mut longer = bin.clone();
        longer.extend_from_slice(&[0; 8]);
        let last = m.layers.iter().rev().find(|l| !l.bin_range.is_empty()).unwrap();
        match NcnnModel::from_bytes(&param, &longer) {
            Err(NcnnError::Oversized { layer, offset, trailing, .. }) => {
                assert_eq!((layer.as_str(), offset, trailing), (last.name.as_str(), bin.len(), 8), "{variant}");
            }
            other => panic!("{variant}: unexpected {other:?}"),
        }
    }
}
