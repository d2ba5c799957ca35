//! Every Tensor op on ROCm against the same op on the CPU, on fresh random inputs, in
//! f32/f16/bf16, through contiguous, transposed, broadcast and offset views (GPU tier).
//! Skips with a printed reason where there is no ROCm device; `ROCM_VISION_REQUIRE_GPU=1`
//! makes that a failure.

use rand::{Rng, SeedableRng, rngs::StdRng};
use rocm_vision::nn::SpatialAttention;
use rocm_vision::{Conv2dParams, DType, Device, PadMode, Tensor};

mod common;
use common::gpu;

fn rand_pair(rng: &mut StdRng, shape: &[usize], dt: DType, gpu: &Device) -> (Tensor, Tensor) {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect();
    let cpu = Tensor::from_vec(v, shape, &Device::cpu()).unwrap().to_dtype(dt).unwrap();
    let dev = cpu.to_device(gpu).unwrap();
    (cpu, dev)
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2e-5,
        DType::F16 => 4e-3,
        _ => 3e-2,
    }
}

fn close(what: &str, gpu_out: &Tensor, cpu_out: &Tensor) {
    assert_eq!(gpu_out.dims(), cpu_out.dims(), "{what}: shape");
    assert_eq!(gpu_out.dtype(), cpu_out.dtype(), "{what}: dtype");
    assert!(gpu_out.device().is_rocm(), "{what}: result left the GPU");
    let (g, c) = (gpu_out.to_vec::<f64>().unwrap(), cpu_out.to_vec::<f64>().unwrap());
    let scale = c.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let t = tol(cpu_out.dtype()) * scale;
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!(
            (a - b).abs() <= t || (a.is_nan() && b.is_nan()),
            "{what} {:?}: element {i}: gpu {a} vs cpu {b}",
            cpu_out.dtype()
        );
    }
}

/// A way of viewing a tensor (transposed, narrowed, ...) applied to both devices' copies.
type TensorView = Box<dyn Fn(&Tensor) -> Tensor>;

#[test]
fn every_op_matches_the_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(11);
    let mut checked = 0;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (xc, xg) = rand_pair(&mut rng, &[2, 6, 9, 7], dt, &g);
        let (yc, yg) = rand_pair(&mut rng, &[2, 6, 9, 7], dt, &g);
        let (bc, bg) = rand_pair(&mut rng, &[6, 1, 1], dt, &g);
        // Views: transposed, narrowed (offset), broadcast.
        let views: [(&str, TensorView); 3] = [
            ("contiguous", Box::new(|t: &Tensor| t.clone())),
            ("transposed", Box::new(|t: &Tensor| t.transpose(2, 3).unwrap())),
            ("narrowed", Box::new(|t: &Tensor| t.narrow(3, 2, 4).unwrap())),
        ];
        for (vname, view) in &views {
            let (xc, xg) = (view(&xc), view(&xg));
            macro_rules! un {
                ($($m:ident),*) => { $( close(&format!("{} {vname}", stringify!($m)), &xg.$m().unwrap(), &xc.$m().unwrap()); checked += 1; )* };
            }
            un!(silu, gelu, gelu_erf, relu, tanh, exp, sqr, abs, neg, sigmoid);
            close(&format!("sqrt {vname}"), &xg.abs().unwrap().sqrt().unwrap(), &xc.abs().unwrap().sqrt().unwrap());
            close(
                &format!("recip {vname}"),
                &xg.affine(1.0, 3.0).unwrap().recip().unwrap(),
                &xc.affine(1.0, 3.0).unwrap().recip().unwrap(),
            );
            close(&format!("leaky_relu {vname}"), &xg.leaky_relu(0.1).unwrap(), &xc.leaky_relu(0.1).unwrap());
            close(&format!("affine {vname}"), &xg.affine(0.5, -1.25).unwrap(), &xc.affine(0.5, -1.25).unwrap());
            close(&format!("contiguous {vname}"), &xg.contiguous().unwrap(), &xc.contiguous().unwrap());
            close(&format!("softmax {vname}"), &xg.softmax_last_dim().unwrap(), &xc.softmax_last_dim().unwrap());
            checked += 7;
        }
        for (name, f) in [
            ("add", Tensor::add as fn(&Tensor, &Tensor) -> rocm_vision::Result<Tensor>),
            ("sub", Tensor::sub),
            ("mul", Tensor::mul),
            ("maximum", Tensor::maximum),
            ("minimum", Tensor::minimum),
        ] {
            close(name, &f(&xg, &yg).unwrap(), &f(&xc, &yc).unwrap());
            close(&format!("{name} broadcast"), &f(&xg, &bg).unwrap(), &f(&xc, &bc).unwrap());
            close(
                &format!("{name} transposed"),
                &f(&xg.transpose(2, 3).unwrap(), &yg.transpose(2, 3).unwrap()).unwrap(),
                &f(&xc.transpose(2, 3).unwrap(), &yc.transpose(2, 3).unwrap()).unwrap(),
            );
            checked += 3;
        }
        let pos = |t: &Tensor| t.abs().unwrap().affine(1.0, 0.5).unwrap();
        close("div", &xg.div(&pos(&yg)).unwrap(), &xc.div(&pos(&yc)).unwrap());
        // Normalisations.
        let (wc, wg) = rand_pair(&mut rng, &[6], dt, &g);
        let (sc, sg) = rand_pair(&mut rng, &[6], dt, &g);
        close(
            "group_norm",
            &xg.group_norm(3, Some(&wg), Some(&sg), 1e-5).unwrap(),
            &xc.group_norm(3, Some(&wc), Some(&sc), 1e-5).unwrap(),
        );
        close(
            "group_norm_silu",
            &xg.group_norm_silu(2, Some(&wg), Some(&sg), 1e-6).unwrap(),
            &xc.group_norm_silu(2, Some(&wc), Some(&sc), 1e-6).unwrap(),
        );
        close(
            "group_norm no affine",
            &xg.group_norm(6, None, None, 1e-5).unwrap(),
            &xc.group_norm(6, None, None, 1e-5).unwrap(),
        );
        let (lw, lwg) = rand_pair(&mut rng, &[7], dt, &g);
        close(
            "layer_norm",
            &xg.layer_norm(Some(&lwg), None, 1e-5).unwrap(),
            &xc.layer_norm(Some(&lw), None, 1e-5).unwrap(),
        );
        // Spatial.
        close("upsample_nearest2d", &xg.upsample_nearest2d(18, 21).unwrap(), &xc.upsample_nearest2d(18, 21).unwrap());
        close("avg_pool2d", &xg.avg_pool2d(2, 2).unwrap(), &xc.avg_pool2d(2, 2).unwrap());
        close("max_pool2d", &xg.max_pool2d(3, 2).unwrap(), &xc.max_pool2d(3, 2).unwrap());
        close("mean_spatial", &xg.mean_spatial().unwrap(), &xc.mean_spatial().unwrap());
        close(
            "pad2d zeros",
            &xg.pad2d(1, 2, 3, 0, PadMode::Zeros).unwrap(),
            &xc.pad2d(1, 2, 3, 0, PadMode::Zeros).unwrap(),
        );
        close(
            "pad2d reflect",
            &xg.pad2d(2, 1, 3, 2, PadMode::Reflect).unwrap(),
            &xc.pad2d(2, 1, 3, 2, PadMode::Reflect).unwrap(),
        );
        close(
            "pad2d replicate",
            &xg.pad2d(4, 1, 0, 2, PadMode::Replicate).unwrap(),
            &xc.pad2d(4, 1, 0, 2, PadMode::Replicate).unwrap(),
        );
        // Shape.
        close("reshape", &xg.reshape(&[12, 63]).unwrap(), &xc.reshape(&[12, 63]).unwrap());
        close(
            "permute",
            &xg.permute(&[0, 2, 3, 1]).unwrap().contiguous().unwrap(),
            &xc.permute(&[0, 2, 3, 1]).unwrap().contiguous().unwrap(),
        );
        close("cat", &Tensor::cat(&[&xg, &yg, &xg], 1).unwrap(), &Tensor::cat(&[&xc, &yc, &xc], 1).unwrap());
        close(
            "cat last dim",
            &Tensor::cat(&[&xg, &yg.narrow(3, 0, 3).unwrap()], 3).unwrap(),
            &Tensor::cat(&[&xc, &yc.narrow(3, 0, 3).unwrap()], 3).unwrap(),
        );
        for to in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            close(&format!("to_dtype {to:?}"), &xg.to_dtype(to).unwrap(), &xc.to_dtype(to).unwrap());
        }
        // Matmul: batch broadcasting and a transposed operand.
        let (ac, ag) = rand_pair(&mut rng, &[3, 5, 8], dt, &g);
        let (mc, mg) = rand_pair(&mut rng, &[8, 4], dt, &g);
        close("matmul broadcast rhs", &ag.matmul(&mg).unwrap(), &ac.matmul(&mc).unwrap());
        let (nc, ng) = rand_pair(&mut rng, &[3, 4, 8], dt, &g);
        close(
            "matmul transposed rhs",
            &ag.matmul(&ng.transpose(1, 2).unwrap()).unwrap(),
            &ac.matmul(&nc.transpose(1, 2).unwrap()).unwrap(),
        );
        // Convolutions through the device's engine.
        let (kc, kg) = rand_pair(&mut rng, &[4, 6, 3, 3], dt, &g);
        let (kb, kbg) = rand_pair(&mut rng, &[4], dt, &g);
        let p = Conv2dParams::default().with_padding(1).with_stride(2);
        close("conv2d", &xg.conv2d(&kg, Some(&kbg), &p).unwrap(), &xc.conv2d(&kc, Some(&kb), &p).unwrap());
        let (tc, tg) = rand_pair(&mut rng, &[6, 3, 4, 4], dt, &g);
        let tp = Conv2dParams::default().with_padding(1).with_stride(2).with_output_padding(1);
        close(
            "conv_transpose2d",
            &xg.conv_transpose2d(&tg, None, &tp).unwrap(),
            &xc.conv_transpose2d(&tc, None, &tp).unwrap(),
        );
        // In place: a residual add into a fresh buffer, and a slice written into a larger tensor.
        close("add_assign", &xg.affine(1.0, 0.0).unwrap().add_assign(&yg).unwrap(), &xc.add(&yc).unwrap());
        let (zg, zc) = (
            Tensor::zeros(&[2, 6, 20, 7], dt, &g).unwrap(),
            Tensor::zeros(&[2, 6, 20, 7], dt, &Device::cpu()).unwrap(),
        );
        zg.slice_set(&xg, 2, 5).unwrap();
        zc.slice_set(&xc, 2, 5).unwrap();
        close("slice_set", &zg, &zc);
        checked += 27;
    }
    println!("{checked} op checks on the GPU");
}

#[test]
fn attention_and_to_device_round_trip() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(12);
    let c = 16;
    let mk = |rng: &mut StdRng, shape: &[usize]| {
        let n: usize = shape.iter().product();
        Tensor::from_vec((0..n).map(|_| rng.random_range(-0.5f32..0.5)).collect::<Vec<_>>(), shape, &Device::cpu())
            .unwrap()
    };
    let lin = |rng: &mut StdRng| rocm_vision::nn::Linear::new(mk(rng, &[c, c]), Some(mk(rng, &[c])));
    let norm =
        rocm_vision::nn::GroupNorm { groups: 4, weight: mk(&mut rng, &[c]), bias: mk(&mut rng, &[c]), eps: 1e-6 };
    let cpu_attn = SpatialAttention {
        norm,
        q: lin(&mut rng),
        k: lin(&mut rng),
        v: lin(&mut rng),
        out: lin(&mut rng),
        max_score_bytes: 4 * 60 * 20,
    };
    let to_gpu = |t: &Tensor| t.to_device(&g).unwrap();
    let l = |x: &rocm_vision::nn::Linear| rocm_vision::nn::Linear::new(to_gpu(&x.weight), x.bias.as_ref().map(to_gpu));
    let gpu_attn = SpatialAttention {
        norm: rocm_vision::nn::GroupNorm {
            groups: 4,
            weight: to_gpu(&cpu_attn.norm.weight),
            bias: to_gpu(&cpu_attn.norm.bias),
            eps: 1e-6,
        },
        q: l(&cpu_attn.q),
        k: l(&cpu_attn.k),
        v: l(&cpu_attn.v),
        out: l(&cpu_attn.out),
        max_score_bytes: cpu_attn.max_score_bytes,
    };
    let x = mk(&mut rng, &[2, c, 6, 10]);
    close("attention", &gpu_attn.forward(&to_gpu(&x)).unwrap(), &cpu_attn.forward(&x).unwrap());
    let back = to_gpu(&x).to_device(&Device::cpu()).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
}

/// The candle-parity ops of `Tensor` (comparison, selection, indexing, reductions over
/// several dimensions, 1-D / bilinear resampling, RMS norm, random) on ROCm against the CPU.
#[test]
fn parity_ops_match_the_cpu() {
    use rocm_vision::{CmpOp, ReduceOp};
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    let mut rng = StdRng::seed_from_u64(23);
    let mut checked = 0;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (xc, xg) = rand_pair(&mut rng, &[2, 5, 6, 7], dt, &g);
        let (yc, yg) = rand_pair(&mut rng, &[2, 5, 6, 7], dt, &g);
        let (bc, bg) = rand_pair(&mut rng, &[5, 1, 7], dt, &g);
        for op in CmpOp::ALL {
            close(&format!("cmp {op:?}"), &xg.cmp(op, &yg).unwrap(), &xc.cmp(op, &yc).unwrap());
            close(&format!("cmp {op:?} broadcast"), &xg.cmp(op, &bg).unwrap(), &xc.cmp(op, &bc).unwrap());
            checked += 2;
        }
        let (mc, mg) = (xc.cmp(CmpOp::Gt, &yc).unwrap(), xg.cmp(CmpOp::Gt, &yg).unwrap());
        close("where_cond", &mg.where_cond(&xg, &yg).unwrap(), &mc.where_cond(&xc, &yc).unwrap());
        let xt = |t: &Tensor| t.transpose(2, 3).unwrap();
        close("powf", &xg.abs().unwrap().powf(1.7).unwrap(), &xc.abs().unwrap().powf(1.7).unwrap());
        close("elu transposed", &xt(&xg).elu(0.8).unwrap(), &xt(&xc).elu(0.8).unwrap());
        checked += 3;
        for (dims, keep) in [(vec![1usize], true), (vec![3, 1], false), (vec![0, 2, 3], true)] {
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                close(
                    &format!("reduce {op:?} {dims:?} keepdim {keep}"),
                    &xg.reduce(op, &dims, keep).unwrap(),
                    &xc.reduce(op, &dims, keep).unwrap(),
                );
                checked += 1;
            }
        }
        for op in [ReduceOp::ArgMax, ReduceOp::ArgMin] {
            close(
                &format!("{op:?} narrowed"),
                &xg.narrow(3, 1, 5).unwrap().reduce(op, &[3], false).unwrap(),
                &xc.narrow(3, 1, 5).unwrap().reduce(op, &[3], false).unwrap(),
            );
            checked += 1;
        }
        // Indexing with u32 and i64 ids.
        let ids_u32: Vec<u32> = (0..4).map(|_| rng.random_range(0..6u32)).collect();
        let ids_i64: Vec<i64> = ids_u32.iter().map(|&v| v as i64).collect();
        for (ic, ig) in [
            (
                Tensor::from_vec(ids_u32.clone(), &[4], &cpu).unwrap(),
                Tensor::from_vec(ids_u32.clone(), &[4], &g).unwrap(),
            ),
            (
                Tensor::from_vec(ids_i64.clone(), &[4], &cpu).unwrap(),
                Tensor::from_vec(ids_i64.clone(), &[4], &g).unwrap(),
            ),
        ] {
            close("index_select", &xg.index_select(&ig, 2).unwrap(), &xc.index_select(&ic, 2).unwrap());
            let (sc, sg) = rand_pair(&mut rng, &[2, 5, 4, 7], dt, &g);
            close("index_add", &xg.index_add(&ig, &sg, 2).unwrap(), &xc.index_add(&ic, &sc, 2).unwrap());
            checked += 2;
        }
        let gids: Vec<u32> = (0..2 * 5 * 3 * 7).map(|_| rng.random_range(0..6u32)).collect();
        let (gc, gg) = (
            Tensor::from_vec(gids.clone(), &[2, 5, 3, 7], &cpu).unwrap(),
            Tensor::from_vec(gids, &[2, 5, 3, 7], &g).unwrap(),
        );
        close("gather", &xg.gather(&gg, 2).unwrap(), &xc.gather(&gc, 2).unwrap());
        let (sc, sg) = rand_pair(&mut rng, &[2, 5, 3, 7], dt, &g);
        close("scatter_add", &xg.scatter(&gg, &sg, 2, true).unwrap(), &xc.scatter(&gc, &sc, 2, true).unwrap());
        checked += 2;
        // Scatter-set with distinct ids per column (duplicates are order-dependent in candle too).
        let perm: Vec<u32> = (0..2 * 5 * 3 * 7).map(|i| ((i / 7) % 3) as u32 * 2).collect();
        let (pc, pg) = (
            Tensor::from_vec(perm.clone(), &[2, 5, 3, 7], &cpu).unwrap(),
            Tensor::from_vec(perm, &[2, 5, 3, 7], &g).unwrap(),
        );
        close("scatter", &xg.scatter(&pg, &sg, 2, false).unwrap(), &xc.scatter(&pc, &sc, 2, false).unwrap());
        let (wc, wg) = rand_pair(&mut rng, &[7], dt, &g);
        close("rms_norm", &xg.rms_norm(Some(&wg), 1e-6).unwrap(), &xc.rms_norm(Some(&wc), 1e-6).unwrap());
        close(
            "upsample_nearest1d",
            &xg.reshape(&[2, 30, 7]).unwrap().upsample_nearest1d(17).unwrap(),
            &xc.reshape(&[2, 30, 7]).unwrap().upsample_nearest1d(17).unwrap(),
        );
        for align in [false, true] {
            close(
                &format!("upsample_bilinear2d align_corners {align}"),
                &xg.upsample_bilinear2d(11, 5, align).unwrap(),
                &xc.upsample_bilinear2d(11, 5, align).unwrap(),
            );
        }
        close(
            "rand_uniform",
            &Tensor::rand_uniform(&[3, 50], (-1.0, 2.0), 7, 5, dt, &g).unwrap(),
            &Tensor::rand_uniform(&[3, 50], (-1.0, 2.0), 7, 5, dt, &cpu).unwrap(),
        );
        close(
            "rand_normal",
            &Tensor::rand_normal(&[3, 50], (0.5, 2.0), 9, 4, dt, &g).unwrap(),
            &Tensor::rand_normal(&[3, 50], (0.5, 2.0), 9, 4, dt, &cpu).unwrap(),
        );
        checked += 7;
    }
    println!("{checked} parity checks passed");
}

/// The elementwise kernels' vector paths (issue 12): contiguous operands with a tail past
/// the last whole vector, a per-channel bias and a scalar broadcast along rows that hold
/// whole vectors, a row view whose start is not vector-aligned, in-place add and casts;
/// each against the CPU.
#[test]
fn elementwise_vector_paths_match_the_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(12);
    let mut checked = 0;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        // 3·5·7·19 = 1995 values: no vector width divides it.
        let (xc, xg) = rand_pair(&mut rng, &[3, 5, 7, 19], dt, &g);
        let (yc, yg) = rand_pair(&mut rng, &[3, 5, 7, 19], dt, &g);
        close("add, tail", &xg.add(&yg).unwrap(), &xc.add(&yc).unwrap());
        close("leaky_relu, tail", &xg.leaky_relu(0.1).unwrap(), &xc.leaky_relu(0.1).unwrap());
        close("affine, tail", &xg.affine(0.5, -1.0).unwrap(), &xc.affine(0.5, -1.0).unwrap());
        // Rows of 32: whole vectors of every width; a bias per channel and one scalar.
        let (ac, ag) = rand_pair(&mut rng, &[2, 6, 3, 32], dt, &g);
        let (bc, bg) = rand_pair(&mut rng, &[6, 1, 1], dt, &g);
        let (sc, sg) = rand_pair(&mut rng, &[1], dt, &g);
        close("bias broadcast", &ag.add(&bg).unwrap(), &ac.add(&bc).unwrap());
        close("scalar broadcast", &ag.mul(&sg).unwrap(), &ac.mul(&sc).unwrap());
        close("bias broadcast, lhs", &bg.sub(&ag).unwrap(), &bc.sub(&ac).unwrap());
        // Rows of 32 starting one element in: contiguous rows, misaligned starts.
        let (wc, wg) = rand_pair(&mut rng, &[2, 6, 3, 33], dt, &g);
        let (vc, vg) = (wc.narrow(3, 1, 32).unwrap(), wg.narrow(3, 1, 32).unwrap());
        close("misaligned rows + bias", &vg.add(&bg).unwrap(), &vc.add(&bc).unwrap());
        close("misaligned rows, unary", &vg.silu().unwrap(), &vc.silu().unwrap());
        close("misaligned rows + rows", &vg.add(&ag).unwrap(), &vc.add(&ac).unwrap());
        // In place, and casts both ways.
        let sum_c = xc.add(&yc).unwrap();
        let sum_g = xg.contiguous().unwrap().add_assign(&yg).unwrap();
        close("add_assign", &sum_g, &sum_c);
        for to in [DType::F32, DType::F16, DType::BF16] {
            close(&format!("cast to {to:?}"), &xg.to_dtype(to).unwrap(), &xc.to_dtype(to).unwrap());
            close(&format!("cast rows to {to:?}"), &vg.to_dtype(to).unwrap(), &vc.to_dtype(to).unwrap());
        }
        checked += 1;
    }
    assert_eq!(checked, 3);
}

/// Per-channel exact sums on the GPU equal the CPU's bit for bit, whole maps, regions and
/// strided views, in every dtype, with a non-finite value flagged on both.
#[test]
fn channel_exact_sums_match_the_cpu_bit_for_bit() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(13);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (xc, xg) = rand_pair(&mut rng, &[1, 5, 67, 131], dt, &g);
        let views: [(&str, Tensor, Tensor, usize, usize); 3] = [
            ("whole", xc.clone(), xg.clone(), 67, 131),
            ("region", xc.clone(), xg.clone(), 40, 77),
            ("transposed", xc.transpose(2, 3).unwrap(), xg.transpose(2, 3).unwrap(), 131, 67),
        ];
        for (what, c, gt, rows, cols) in views {
            let (sc, sg) = (c.channel_exact_sums(rows, cols).unwrap(), gt.channel_exact_sums(rows, cols).unwrap());
            assert_eq!(sc.len(), sg.len());
            for (ch, (a, b)) in sc.iter().zip(&sg).enumerate() {
                assert_eq!(
                    a.sum().to_bits(),
                    b.sum().to_bits(),
                    "{what} {dt:?} channel {ch}: {} vs {}",
                    a.sum(),
                    b.sum()
                );
                assert_eq!(a.count(), b.count(), "{what} {dt:?} channel {ch}");
                assert!(!b.saw_non_finite());
            }
        }
    }
    // f16's whole range in one map large enough for many blocks per channel (the f16
    // kernel sums in fixed point): the largest values, subnormals, both signs.
    let n = 3 * 300 * 300;
    let v: Vec<f32> = (0..n)
        .map(|i| match i % 5 {
            0 => 65504.0,
            1 => -6.0e-8,
            2 => -65504.0 * ((i % 7) as f32 / 7.0),
            3 => 5.96e-8 * (i % 13) as f32,
            _ => (i % 101) as f32 - 50.0,
        })
        .collect();
    let c = Tensor::from_vec(v, &[1, 3, 300, 300], &Device::cpu()).unwrap().to_dtype(DType::F16).unwrap();
    let gt = c.to_device(&g).unwrap();
    for (a, b) in c.channel_exact_sums(300, 300).unwrap().iter().zip(&gt.channel_exact_sums(300, 300).unwrap()) {
        assert_eq!(a.sum().to_bits(), b.sum().to_bits(), "f16 extremes: {} vs {}", a.sum(), b.sum());
    }
    for dt in [DType::F32, DType::F16] {
        let mut v = vec![0.5f32; 2 * 4 * 4];
        v[17] = f32::INFINITY;
        let t = Tensor::from_vec(v, &[1, 2, 4, 4], &g).unwrap().to_dtype(dt).unwrap();
        let s = t.channel_exact_sums(4, 4).unwrap();
        assert!(!s[0].saw_non_finite() && s[1].saw_non_finite(), "{dt:?}");
    }
}

/// `ChannelSums` accumulating the parts of a map on the GPU (one readback for all of
/// them) equals the CPU's sums of the whole map bit for bit, with the count of all parts,
/// in every dtype; a map of another channel count or device is an error.
#[test]
fn channel_sums_accumulated_on_the_device_match_the_whole_map() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(29);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (xc, xg) = rand_pair(&mut rng, &[1, 6, 90, 130], dt, &g);
        let whole = xc.channel_exact_sums(90, 130).unwrap();
        let mut acc = rocm_vision::ChannelSums::new(6, &g).unwrap();
        // Four parts that partition the map: views of the device tensor, as tiles are.
        for (r0, r1, c0, c1) in [(0, 40, 0, 70), (0, 40, 70, 130), (40, 90, 0, 70), (40, 90, 70, 130)] {
            let part = xg.narrow(2, r0, r1 - r0).unwrap().narrow(3, c0, c1 - c0).unwrap();
            acc.add(&part, r1 - r0, c1 - c0).unwrap();
        }
        let wrong = Tensor::zeros(&[1, 5, 4, 4], dt, &g).unwrap();
        assert!(acc.add(&wrong, 4, 4).is_err(), "5 channels into 6-channel sums");
        let cpu_part = Tensor::zeros(&[1, 6, 4, 4], dt, &Device::cpu()).unwrap();
        assert!(acc.add(&cpu_part, 4, 4).is_err(), "a CPU map into device sums");
        let got = acc.finish().unwrap();
        for (ch, (a, b)) in whole.iter().zip(&got).enumerate() {
            assert_eq!(a.sum().to_bits(), b.sum().to_bits(), "{dt:?} channel {ch}: {} vs {}", a.sum(), b.sum());
            assert_eq!(a.count(), b.count(), "{dt:?} channel {ch}");
            assert!(!b.saw_non_finite());
        }
    }
}

#[test]
fn pixel_shuffle_add_matches_the_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(17);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (yc, yg) = rand_pair(&mut rng, &[1, 12, 5, 7], dt, &g);
        let (bc, bg) = rand_pair(&mut rng, &[1, 5, 13, 17], dt, &g);
        // The residual is a crop (a strided view with an offset), as in Real-CUGAN.
        let crop = |t: &Tensor| t.narrow(1, 1, 3).unwrap().narrow(2, 2, 10).unwrap().narrow(3, 3, 14).unwrap();
        let oc = yc.pixel_shuffle_add(2, &crop(&bc)).unwrap();
        let og = yg.pixel_shuffle_add(2, &crop(&bg)).unwrap();
        close("pixel_shuffle_add", &og, &oc);
        // Additions are exact-rounded on both devices: the same bits.
        assert_eq!(og.to_vec::<f32>().unwrap(), oc.to_vec::<f32>().unwrap(), "pixel_shuffle_add {dt:?} bits");
    }
}

/// An index out of range is an error on the GPU as on the CPU, naming the index, for each
/// indexing op and both index types; candle's "no index" sentinel (the type's maximum) is
/// not one, and gives the CPU's result.
#[test]
fn out_of_range_indices_are_errors_as_on_the_cpu() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    let x = |d: &Device| Tensor::ones(&[2, 5, 3], DType::F32, d).unwrap();
    for d in [&cpu, &g] {
        let bad_u32 = Tensor::from_vec(vec![0u32, 5, 1], &[3], d).unwrap();
        let bad_i64 = Tensor::from_vec(vec![0i64, -1, 1], &[3], d).unwrap();
        let src = Tensor::ones(&[2, 3, 3], DType::F32, d).unwrap();
        for ids in [&bad_u32, &bad_i64] {
            assert!(x(d).index_select(ids, 1).is_err(), "{d}: index_select");
            assert!(x(d).index_add(ids, &src, 1).is_err(), "{d}: index_add");
        }
        let gather_ids = Tensor::from_vec(vec![7u32; 2 * 3 * 3], &[2, 3, 3], d).unwrap();
        assert!(x(d).gather(&gather_ids, 1).is_err(), "{d}: gather");
        assert!(x(d).scatter(&gather_ids, &src, 1, true).is_err(), "{d}: scatter");
    }
    let e = x(&g).index_select(&Tensor::from_vec(vec![0u32, 5, 1], &[3], &g).unwrap(), 1).unwrap_err().to_string();
    assert!(e.contains("index 5") && e.contains("length 5"), "{e}");
    // The sentinel selects nothing (zeros) on both devices.
    let none = |d: &Device| Tensor::from_vec(vec![u32::MAX, 2], &[2], d).unwrap();
    let (c, gg) = (x(&cpu).index_select(&none(&cpu), 1).unwrap(), x(&g).index_select(&none(&g), 1).unwrap());
    assert_eq!(c.to_vec::<f32>().unwrap(), gg.to_vec::<f32>().unwrap());
}

/// Real-CUGAN's GPU input and output paths: 8-bit interleaved pixels padded into planes on
/// the GPU (channel narrow, transpose, reflect pad) equal the CPU's; a read-back into
/// page-locked memory (`Device::host_buffer`) gives the tensor's bytes and leaves the rest
/// of a larger, poisoned buffer alone.
#[test]
fn u8_planes_padded_on_the_gpu_and_read_back_into_page_locked_memory() {
    let Some(g) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(31);
    let (h, w, ch) = (37, 53, 4);
    let data: Vec<u8> = (0..h * w * ch).map(|_| rng.random()).collect();
    let planes = |d: &Device| {
        Tensor::from_slice(&data, &[h, w, ch], d)
            .unwrap()
            .narrow(2, 0, 3)
            .unwrap()
            .permute(&[2, 0, 1])
            .unwrap()
            .pad2d(7, 9, 7, 11, PadMode::Reflect)
            .unwrap()
    };
    let (on_gpu, on_cpu) = (planes(&g), planes(&Device::cpu()));
    assert_eq!(on_gpu.dims(), [3, h + 16, w + 18]);
    let want = on_cpu.to_vec::<u8>().unwrap();
    let mut buf = g.host_buffer(want.len() + 100).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a new host buffer is zeroed");
    buf.fill(0xA5);
    on_gpu.to_slice(&mut buf[..want.len()]).unwrap();
    assert!(buf[..want.len()] == want[..], "padded planes differ from the CPU's");
    assert!(buf[want.len()..].iter().all(|&b| b == 0xA5), "the read-back wrote past its slice");
}
