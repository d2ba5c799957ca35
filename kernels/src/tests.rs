//! Consistency of the registry with the sources: the Rust side (families, argument lists,
//! mirrored structs) and the C++ side are written separately, so these tests read the
//! sources and compare.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// (macro, symbol, remaining macro arguments) of every `RV_EXPORT_<KIND>(symbol, ...)`
/// line that starts a line of `source`.
fn export_lines(source: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for line in source.lines() {
        let Some(rest) = line.strip_prefix("RV_EXPORT_") else {
            continue;
        };
        let Some(open) = rest.find('(') else { continue };
        let Some(close) = rest.rfind(')') else {
            continue;
        };
        let mac = format!("RV_EXPORT_{}", &rest[..open]);
        let mut args = rest[open + 1..close].split(',').map(|a| a.trim().to_string());
        let sym = args.next().unwrap_or_default();
        out.push((mac, sym, args.collect()));
    }
    out
}

/// The parameter list of the kernel that `#define <mac>(NAME, ...)` defines, one
/// normalised `type name` string per parameter.
fn macro_kernel_params(source: &str, mac: &str) -> Option<Vec<String>> {
    let start = source.find(&format!("#define {mac}("))?;
    // The definition runs over backslash-continued lines.
    let mut def = String::new();
    for line in source[start..].lines() {
        let cont = line.trim_end().ends_with('\\');
        def.push_str(line.trim_end().trim_end_matches('\\'));
        def.push(' ');
        if !cont {
            break;
        }
    }
    let body = &def[def.find(')')? + 1..];
    let open = body.find(" NAME(")? + " NAME(".len();
    let close = open + body[open..].find(')')?;
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").replace(" *", "*");
    Some(body[open..close].split(',').map(norm).collect())
}

/// The C type each dtype or element-size suffix is instantiated with.
fn c_type_of_suffix(suffix: &str) -> &'static str {
    match suffix {
        "f32" => "float",
        "f16" => "rv_half",
        "bf16" => "rv_bf16",
        "f64" => "double",
        "u8" | "b8" => "rv_u8",
        "u32" | "b32" => "rv_u32",
        "i64" => "rv_i64",
        "b16" => "rv_u16",
        "b64" => "rv_u64",
        other => panic!("unknown suffix {other}"),
    }
}

#[test]
fn every_entry_point_is_exported_by_its_source_and_nothing_else() {
    for m in modules() {
        let listed: Vec<String> = m.entry_points();
        let listed_set: BTreeSet<&String> = listed.iter().collect();
        assert_eq!(listed.len(), listed_set.len(), "{}: the registry lists a name twice", m.file);
        let lines = export_lines(m.source);
        assert!(!lines.is_empty(), "{}: no RV_EXPORT_ lines", m.file);
        let exported: BTreeSet<&String> = lines.iter().map(|(_, s, _)| s).collect();
        assert_eq!(exported.len(), lines.len(), "{}: a symbol is exported twice", m.file);
        let missing: Vec<_> = listed_set.difference(&exported).collect();
        let extra: Vec<_> = exported.difference(&listed_set).collect();
        assert!(missing.is_empty(), "{}: listed in the registry but not exported: {missing:?}", m.file);
        assert!(extra.is_empty(), "{}: exported but not in the registry: {extra:?}", m.file);
        // Each symbol comes from the export macro of the family that lists it.
        for (mac, sym, _) in &lines {
            let fam = m.family_of(sym).unwrap();
            assert_eq!(mac, fam.export_macro, "{}: {sym} is exported by the wrong macro", m.file);
        }
    }
}

#[test]
fn entry_point_names_are_unique_across_modules() {
    let mut seen = BTreeMap::new();
    for m in modules() {
        for e in m.entry_points() {
            if let Some(other) = seen.insert(e.clone(), m.name) {
                panic!("{e} is defined by both {other} and {}", m.name);
            }
        }
    }
    assert!(seen.len() > 250, "suspiciously few entry points: {}", seen.len());
}

#[test]
fn argument_lists_match_the_kernel_signatures() {
    for m in modules() {
        for f in m.families {
            let params = macro_kernel_params(m.source, f.export_macro)
                .unwrap_or_else(|| panic!("{}: no definition of {} with a NAME(...) kernel", m.file, f.export_macro));
            assert_eq!(params, f.c_params(), "{}: {} arguments differ from the registry", m.file, f.pattern);
        }
    }
}

#[test]
fn export_lines_instantiate_the_dtype_their_name_says() {
    for m in modules() {
        for (_, sym, args) in export_lines(m.source) {
            let fam = m.family_of(&sym).unwrap();
            let parts: Vec<&str> = sym.rsplit('_').collect();
            match fam.types {
                Types::CastPairs => {
                    let (src, dst) = (parts[1], parts[0]);
                    assert_eq!(args, [c_type_of_suffix(src), c_type_of_suffix(dst)], "{sym}");
                }
                _ => {
                    let t = c_type_of_suffix(parts[0]);
                    assert!(args.iter().any(|a| a == t), "{sym}: instantiated with {args:?}, expected {t}");
                    // Only one storage type per instantiation.
                    let types = args.iter().filter(|a| a.starts_with("rv_") || *a == "float" || *a == "double");
                    assert_eq!(types.count(), 1, "{sym}: {args:?}");
                }
            }
        }
    }
}

#[test]
fn igemm_instantiations_match_their_configs() {
    let igemm = module_of("igemm_fwd_64x64x16_4x4_f32").unwrap();
    assert_eq!(igemm.name, "igemm");
    let names: Vec<&str> = IGEMM_CONFIGS.iter().map(|c| c.name).collect();
    // Both families (fwd, tconv) are instantiated for exactly these configurations.
    for f in igemm.families {
        assert_eq!(names, f.ops, "{}", f.pattern);
    }
    let mut count = 0;
    for (_, sym, args) in export_lines(igemm.source) {
        let cfg = IGEMM_CONFIGS.iter().find(|c| sym.contains(&format!("_{}_", c.name))).unwrap();
        let nums: Vec<u32> = args[1..6].iter().map(|a| a.parse().unwrap()).collect();
        assert_eq!(nums, [cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn], "{sym}");
        let transposed = sym.starts_with("igemm_tconv_");
        assert_eq!(args[6], if transposed { "true" } else { "false" }, "{sym}");
        assert_eq!(cfg.threads(), MAX_THREADS, "{sym}: launch needs {} threads", cfg.threads());
        count += 1;
    }
    assert_eq!(count, 2 * IGEMM_CONFIGS.len() * DType::GEMM.len());
    let cfg = &IGEMM_CONFIGS[0];
    assert_eq!(igemm_entry_point(true, cfg, DType::BF16).as_deref(), Some("igemm_tconv_64x64x16_4x4_bf16"));
    assert!(igemm.defines(&igemm_entry_point(false, &IGEMM_CONFIGS[2], DType::F16).unwrap()));
    assert_eq!(igemm_entry_point(false, cfg, DType::F64), None);
}

#[test]
fn mirrored_structs_have_the_sizes_the_prelude_asserts() {
    assert_eq!(std::mem::size_of::<StridedLayout>(), 112);
    assert_eq!(std::mem::size_of::<Conv2dAbi>(), 64);
    assert_eq!(std::mem::size_of::<crate::EpilogueAbi>(), 16);
    assert!(PRELUDE.contains("sizeof(rv_epilogue) == 16"));
    assert!(PRELUDE.contains("sizeof(rv_strided) == 112"));
    assert!(PRELUDE.contains("sizeof(rv_conv2d) == 64"));
    assert!(PRELUDE.contains(&format!("#define RV_MAX_DIMS {MAX_DIMS}")));
    assert!(PRELUDE.contains(&format!("#define RV_MAX_THREADS {MAX_THREADS}")));
    // Field order of rv_conv2d, as declared in the prelude.
    let decl_start = PRELUDE.find("struct rv_conv2d {").unwrap();
    let decl = &PRELUDE[decl_start..decl_start + PRELUDE[decl_start..].find("};").unwrap()];
    let fields: Vec<&str> = decl
        .lines()
        .skip(1)
        .filter_map(|l| l.split("//").next().unwrap().trim().strip_prefix("rv_i32 "))
        .flat_map(|l| l.trim_end_matches(';').split(',').map(str::trim))
        .collect();
    assert_eq!(
        fields,
        [
            "n", "c", "h", "w", "k", "r", "s", "p", "q", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w",
            "groups"
        ]
    );
}

#[test]
fn sources_include_their_headers_and_nothing_else() {
    for m in modules() {
        // The prelude first; then, for the matrix-core module only, the MMA layer.
        assert_eq!(m.headers[0], (PRELUDE_NAME, PRELUDE), "{}", m.file);
        let expected: &[(&str, &str)] = if m.name == "igemm_mma" {
            &[(PRELUDE_NAME, PRELUDE), (MMA_NAME, MMA)]
        } else {
            &[(PRELUDE_NAME, PRELUDE)]
        };
        assert_eq!(m.headers, expected, "{}", m.file);
        let includes: Vec<&str> = m.source.lines().filter(|l| l.trim_start().starts_with("#include")).collect();
        let wanted: Vec<String> = m.headers.iter().map(|(name, _)| format!("#include \"{name}\"")).collect();
        assert_eq!(includes, wanted, "{}", m.file);
        let full = m.source_with_headers();
        assert!(!full.contains("#include \""), "{}", m.file);
        assert!(full.contains("#define RV_KERNEL"), "{}", m.file);
        let pasted: usize =
            m.headers.iter().map(|(name, text)| text.len() - format!("#include \"{name}\"").len()).sum();
        assert_eq!(full.len(), m.source.len() + pasted, "{}", m.file);
        // The prelude comes before the MMA layer, which builds on it.
        if m.headers.len() > 1 {
            assert!(full.find("#define RV_KERNEL").unwrap() < full.find("struct rv_mma_gfx11").unwrap());
        }
    }
    // The prelude itself includes only toolkit headers; the MMA layer includes nothing.
    for l in PRELUDE.lines().filter(|l| l.trim_start().starts_with("#include")) {
        let h = l.trim_start().trim_start_matches("#include").trim();
        assert!(
            ["<hip/hip_runtime.h>", "<hip/hip_fp16.h>", "<hip/hip_bf16.h>", "<cuda_fp16.h>", "<cuda_bf16.h>"]
                .contains(&h),
            "prelude includes {h}"
        );
    }
    assert!(!MMA.lines().any(|l| l.trim_start().starts_with("#include")), "mma.h includes a header");
    assert!(!PRELUDE.contains("rv_mma"), "the MMA layer belongs in mma.h, not in the prelude");
}

/// The names a top-level line declares: macros, typedefs, structs and functions.
fn declared_name(line: &str) -> Option<String> {
    if line.starts_with(' ') || line.starts_with('\t') || line.starts_with("//") {
        return None;
    }
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    if let Some(rest) = line.strip_prefix("#define ") {
        return Some(ident(rest));
    }
    if line.starts_with("typedef ") {
        // `typedef T name __attribute__((...));` (clang vector types) names `name`.
        let decl = line.split(" __attribute__").next().unwrap_or(line);
        let decl = decl.trim_end().trim_end_matches(';');
        return decl.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().map(String::from);
    }
    let mut l = line;
    if l.starts_with("template <") {
        l = l[l.find('>')? + 1..].trim_start();
        if l.is_empty() {
            return None;
        }
    }
    if let Some(rest) = l.strip_prefix("struct ") {
        // `struct alignas(16) name {`
        let rest = match rest.strip_prefix("alignas(") {
            Some(r) => r[r.find(')')? + 1..].trim_start(),
            None => rest,
        };
        return Some(ident(rest));
    }
    if l.starts_with("RV_DEVICE ") || l.starts_with("__device__ ") || l.starts_with("static __device__ ") {
        let before = &l[..l.find('(')?];
        if before.contains('<') && before.trim_end().ends_with('>') {
            // An explicit specialisation `f<T>(`: its name is before the '<'.
            let base = &before[..before.rfind('<')?];
            return base.rsplit(' ').next().map(String::from);
        }
        return before.rsplit(' ').next().map(String::from);
    }
    None
}

#[test]
fn nothing_outside_our_prefix_is_defined() {
    // The toolkits own every other name; redefining one of theirs is what broke an older
    // shim on a ROCm update.
    let mut checked = 0;
    let headers = [(PRELUDE_NAME, PRELUDE), (MMA_NAME, MMA)];
    for (file, text) in headers.into_iter().chain(modules().iter().map(|m| (m.file, m.source))) {
        for line in text.lines() {
            if let Some(name) = declared_name(line) {
                checked += 1;
                assert!(
                    name.starts_with("rv_") || name.starts_with("RV_"),
                    "{file}: `{name}` is declared without the rv_/RV_ prefix: {line}"
                );
            }
        }
    }
    assert!(checked > 100, "the declaration scan found only {checked} names");
    assert_eq!(declared_name("#define __shfl_xor_sync(a) a").as_deref(), Some("__shfl_xor_sync"));
    assert_eq!(declared_name("typedef __half half;").as_deref(), Some("half"));
    assert_eq!(declared_name("typedef float v8 __attribute__((ext_vector_type(8)));").as_deref(), Some("v8"));
    assert_eq!(declared_name("RV_DEVICE float atomicAdd(float* p, float v) {").as_deref(), Some("atomicAdd"));
    assert_eq!(declared_name("static __device__ __noinline__ double erf(double x) {").as_deref(), Some("erf"));
}

#[test]
fn strided_layout_construction() {
    let c = StridedLayout::contiguous(&[2, 3, 4]).unwrap();
    assert_eq!(c.rank, 3);
    assert_eq!(c.contiguous, 1);
    assert_eq!(&c.strides[..3], &[12, 4, 1]);
    assert_eq!(c.numel(), 24);

    // A transposed view is not contiguous; a broadcast one neither.
    let t = StridedLayout::new(&[4, 3], &[1, 4]).unwrap();
    assert_eq!(t.contiguous, 0);
    let b = StridedLayout::new(&[5, 3], &[0, 1]).unwrap();
    assert_eq!(b.contiguous, 0);
    // Size-1 dimensions may carry any stride.
    let u = StridedLayout::new(&[1, 3], &[99, 1]).unwrap();
    assert_eq!(u.contiguous, 1);
    // A scalar.
    let s = StridedLayout::contiguous(&[]).unwrap();
    assert_eq!((s.rank, s.contiguous, s.numel()), (0, 1, 1));

    assert_eq!(StridedLayout::new(&[1; 7], &[1; 7]), Err(LayoutError::RankTooLarge { rank: 7 }));
    assert_eq!(StridedLayout::new(&[2, 2], &[1]), Err(LayoutError::LengthMismatch { dims: 2, strides: 1 }));
    assert_eq!(StridedLayout::new(&[usize::MAX], &[1]), Err(LayoutError::TooLarge { value: usize::MAX }));
    assert!(LayoutError::RankTooLarge { rank: 7 }.to_string().contains("maximum of 6"));
}

#[test]
fn lookups_by_op_and_dtype() {
    let (m, f) = family_of("unary_silu_f16").unwrap();
    assert_eq!(m.name, "elementwise");
    assert_eq!(f.entry_point("silu", DType::F16).as_deref(), Some("unary_silu_f16"));
    assert_eq!(f.entry_point("silu", DType::U8), None);
    assert_eq!(f.entry_point("nope", DType::F32), None);
    assert_eq!(f.launch, Launch::GridStride);

    let (_, copy) = family_of("copy_strided_b16").unwrap();
    assert_eq!(copy.entry_point("", DType::BF16).as_deref(), Some("copy_strided_b16"));
    assert_eq!(copy.entry_point("", DType::I64).as_deref(), Some("copy_strided_b64"));

    let (m, cast) = family_of("cast_bf16_u8").unwrap();
    assert_eq!(m.name, "cast");
    assert_eq!(cast.entry_points().len(), 42);
    assert!(family_of("cast_f32_f32").is_none());

    let (_, argmax) = family_of("reduce_argmax_lastdim_f32").unwrap();
    assert_eq!(argmax.args[3].ty, ArgType::Ptr { elem: Elem::U32, mutable: true });
    assert_eq!(argmax.launch, Launch::BlockPerRow);

    let (_, fill) = family_of("fill_bf16").unwrap();
    assert_eq!(fill.args[2].ty.size_in_bytes(DType::BF16), 2);
    assert_eq!(fill.args[2].ty.c_type(), "T");
    assert!(module_of("no_such_kernel").is_none());
}

#[test]
fn igemm_grid_covers_the_problem() {
    // SD VAE up-block conv at 1024^2: 512 -> 512 channels, 3x3, one image.
    let p = Conv2dAbi {
        n: 1,
        c: 512,
        h: 1024,
        w: 1024,
        k: 512,
        r: 3,
        s: 3,
        p: 1024,
        q: 1024,
        stride_h: 1,
        stride_w: 1,
        pad_h: 1,
        pad_w: 1,
        dil_h: 1,
        dil_w: 1,
        groups: 1,
    };
    assert_eq!(IGEMM_CONFIGS[0].grid(&p), (16384, 8, 1));
    assert_eq!(IGEMM_CONFIGS[1].grid(&p), (8192, 4, 1));
    // Grouped, ragged: 3 groups of 5 output channels, 10x10 output.
    let g = Conv2dAbi { n: 2, c: 6, k: 15, p: 10, q: 10, groups: 3, ..p };
    assert_eq!(IGEMM_CONFIGS[2].grid(&g), (2, 1, 3));
}

#[test]
fn igemm_nhwc_instantiations_match_their_configs() {
    let m = module_of("igemm_mma_128x128_2x4_f16").unwrap();
    assert_eq!(m.name, "igemm_mma");
    let tables: [(&str, &[IgemmNhwcConfig]); 5] = [
        ("RV_EXPORT_IGEMM_MMA", &IGEMM_MMA_CONFIGS),
        ("RV_EXPORT_IGEMM_MMA_NV", &IGEMM_MMA_CONFIGS),
        ("RV_EXPORT_IGEMM_EMU11", &IGEMM_EMU_CONFIGS),
        ("RV_EXPORT_IGEMM_EMU12", &IGEMM_EMU_CONFIGS),
        ("RV_EXPORT_IGEMM_SIMT", &IGEMM_SIMT_CONFIGS),
    ];
    let mut count = 0;
    for (mac, sym, args) in export_lines(m.source) {
        let Some((_, table)) = tables.iter().find(|(t, _)| *t == mac) else { continue };
        let cfg =
            table.iter().find(|c| sym.contains(&format!("_{}_", c.name))).unwrap_or_else(|| panic!("{sym}: no config"));
        assert_eq!(cfg.nvidia_only, mac == "RV_EXPORT_IGEMM_MMA_NV", "{sym}: nvidia_only must match its macro");
        let nums: Vec<u32> = args[1..6].iter().map(|a| a.parse().unwrap()).collect();
        assert_eq!(nums, [cfg.bm, cfg.bn, cfg.a, cfg.b, cfg.nv_stages], "{sym}");
        assert!(cfg.threads() <= MAX_THREADS && cfg.threads() % 64 == 0, "{sym}: {} threads", cfg.threads());
        // AMD's static LDS (two stages or the epilogue slice) within 64 KiB; NVIDIA's dynamic
        // shared memory within sm_90's 227 KiB per block; and only NVIDIA launches pass any.
        assert!(cfg.shared_bytes(false) <= 64 * 1024 && cfg.shared_bytes(true) <= 227 * 1024, "{sym}");
        assert!(cfg.shared_bytes(true) >= cfg.lds_bytes(cfg.nv_stages) && cfg.shared_bytes(false) >= cfg.lds_bytes(2));
        assert_eq!((cfg.dynamic_shared_bytes(false), cfg.dynamic_shared_bytes(true)), (0, cfg.shared_bytes(true)));
        // Every thread loads whole rows of 16-byte chunks of the A tile.
        assert_eq!((cfg.bm * 4) % cfg.threads(), 0, "{sym}");
        match cfg.math {
            IgemmMath::Mma => {
                assert_eq!(cfg.bm % (16 * cfg.a), 0, "{sym}: warp tiles of whole 16x16 atoms");
                assert_eq!(cfg.bn % (16 * cfg.b), 0, "{sym}");
            }
            IgemmMath::Simt => assert_eq!((cfg.bm / cfg.a) * (cfg.bn / cfg.b), 256, "{sym}"),
        }
        let variant = match mac.as_str() {
            "RV_EXPORT_IGEMM_EMU11" => MmaVariant::EmulateGfx11,
            "RV_EXPORT_IGEMM_EMU12" => MmaVariant::EmulateGfx12,
            _ => MmaVariant::Native,
        };
        let dtype = if sym.ends_with("_bf16") {
            DType::BF16
        } else if sym.ends_with("_f16") {
            DType::F16
        } else {
            DType::F32
        };
        assert_eq!(igemm_nhwc_entry_point(variant, cfg, dtype).as_deref(), Some(sym.as_str()));
        count += 1;
    }
    assert_eq!(count, 2 * IGEMM_MMA_CONFIGS.len() + 4 * IGEMM_EMU_CONFIGS.len() + IGEMM_SIMT_CONFIGS.len());
    // What is not instantiated has no name.
    assert_eq!(igemm_nhwc_entry_point(MmaVariant::Native, &IGEMM_SIMT_CONFIGS[0], DType::F16), None);
    assert_eq!(igemm_nhwc_entry_point(MmaVariant::EmulateGfx11, &IGEMM_MMA_CONFIGS[5], DType::F16), None);
    assert_eq!(igemm_nhwc_entry_point(MmaVariant::Native, &IGEMM_MMA_CONFIGS[0], DType::F32), None);
    assert_eq!(IGEMM_MMA_CONFIGS[0].grid(1 << 20, 512, 1, 1), (8192, 4, 1));
    assert_eq!(IGEMM_MMA_CONFIGS[5].grid(100, 3, 3, 2), (1, 1, 6));
    assert_eq!(IGEMM_MMA_CONFIGS[0].k_tile(2), 32);
    assert_eq!(IGEMM_SIMT_CONFIGS[0].k_tile(4), 16);
}

#[test]
fn the_mma_layer_cites_its_layout_sources_and_guards_each_family() {
    // Each family's builtin or instruction appears only inside its target guard, and the
    // documents its lane layout comes from are named.
    for cite in ["PTX ISA", "RDNA3 ISA", "RDNA4 ISA", "MI200/MI300 ISA", "Matrix Instruction"] {
        assert!(MMA.contains(cite), "mma.h does not cite {cite}");
    }
    let guard_of = |needle: &str| -> String {
        let at = MMA.find(needle).unwrap_or_else(|| panic!("{needle} not in mma.h"));
        let before = &MMA[..at];
        let open = before.rfind("\n#if ").expect("an #if guard");
        before[open + 1..].lines().next().unwrap().to_string()
    };
    assert!(guard_of("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32(").contains("__GFX11__"));
    assert!(guard_of("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(").contains("__GFX12__"));
    assert!(guard_of("__builtin_amdgcn_mfma_f32_16x16x16f16(").contains("__gfx942__"));
    assert!(guard_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32").contains("__CUDA_ARCH__"));
}

#[test]
fn coalescing_merges_what_every_operand_steps_through_as_one() {
    let dims = [1, 64, 32, 32];
    // Output and a per-channel bias: [64, 1024] with strides [1024, 1] and [1, 0].
    let [a, b] = StridedLayout::coalesced(&dims, [&[65536, 1024, 32, 1], &[0, 1, 0, 0]]).unwrap();
    assert_eq!((a.rank, &a.dims[..2], &a.strides[..2]), (2, &[64, 1024][..], &[1024, 1][..]));
    assert_eq!((b.rank, &b.dims[..2], &b.strides[..2]), (2, &[64, 1024][..], &[1, 0][..]));
    assert_eq!((a.contiguous, b.contiguous), (1, 0));
    // A scalar against a contiguous tensor: one dimension each.
    let [a, s] = StridedLayout::coalesced(&dims, [&[65536, 1024, 32, 1], &[0, 0, 0, 0]]).unwrap();
    assert_eq!((a.rank, a.dims[0], a.strides[0], s.strides[0]), (1, 65536, 1, 0));
    // A transposed view does not merge.
    let [t] = StridedLayout::coalesced(&[4, 6], [&[1, 4]]).unwrap();
    assert_eq!((t.rank, t.contiguous), (2, 0));
    // Empty, and all ones.
    let [e] = StridedLayout::coalesced(&[3, 0, 2], [&[0, 2, 1]]).unwrap();
    assert_eq!(e.numel(), 0);
    let [o] = StridedLayout::coalesced(&[1, 1], [&[5, 7]]).unwrap();
    assert_eq!((o.rank, o.numel(), o.contiguous), (0, 1, 1));
    assert!(StridedLayout::coalesced(&[2, 3], [&[3, 1], &[1]]).is_err());
}

#[test]
fn igemm_nhwc_shared_bytes_are_the_kernels_formula() {
    // 128x128, 3 NVIDIA stages: 3 * (128 + 128) rows * 64 B; the epilogue slice (32 channels
    // x 132 floats = 16896 B) is smaller. AMD: two stages.
    let c = IGEMM_MMA_CONFIGS.iter().find(|c| c.name == "128x128_2x2").unwrap();
    assert_eq!((c.shared_bytes(true), c.shared_bytes(false)), (49152, 32768));
    // 64x64 on AMD: two stages (16 KiB) are smaller than the epilogue's 64-channel slice
    // (64 x 68 floats), the 17408 bytes kernel-check reports for igemm_emu11_64x64_2x2.
    let n = IGEMM_MMA_CONFIGS.iter().find(|c| c.name == "64x64_2x2").unwrap();
    assert_eq!(n.shared_bytes(false), 64 * 68 * 4);
}
