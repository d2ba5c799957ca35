//! Issue 13, item 1: no plan the executors cannot run. `Plan` and `ConvProblem` keep their
//! fields private (the doc tests on them show that forging one does not compile), so the
//! only way to name an algorithm is `Dispatcher::plan_with`, which asks the catalog and
//! answers a structured error instead of a plan that would read past the input (Gemm1x1),
//! panic inside candle (Im2colGemm) or reach `unreachable!` (Winograd, Miopen).

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_engine::{Algorithm, Budget, Chunking, Conv2dParams, ConvError, ConvProblem, Padding2d};

fn tensors(p: &ConvProblem) -> (Tensor, Tensor) {
    let dt = p.dtype().to_candle();
    let x = Tensor::ones(p.input_shape(), dt, &Device::Cpu).unwrap();
    let w = Tensor::ones(p.weight_shape(), dt, &Device::Cpu).unwrap();
    (x, w)
}

fn problem(input: &[usize], weight: &[usize], dt: DType, params: Conv2dParams) -> ConvProblem {
    ConvProblem::conv2d(input, weight, dt, dt, &params).unwrap()
}

fn assert_unsupported(e: ConvError, algorithm: &str) {
    match &e {
        ConvError::AlgorithmUnsupported { algorithm: a, requires, .. } => {
            assert_eq!(*a, algorithm, "{e}");
            assert!(!requires.is_empty());
            let msg = e.to_string();
            assert!(msg.contains(algorithm) && msg.contains("cannot run it"), "{msg}");
        }
        other => panic!("expected AlgorithmUnsupported for {algorithm}, got {other:?}"),
    }
}

/// The UB case: Gemm1x1 named for a 3x3 problem read past the end of the input.
#[test]
fn gemm1x1_on_a_3x3_problem_is_refused() {
    let engine = CpuConv::new(Budget::bytes(1 << 30));
    let p = problem(&[1, 4, 10, 10], &[8, 4, 3, 3], DType::F32, Conv2dParams::default().with_padding(1));
    let e = engine.dispatcher().plan_with(&p, Algorithm::Gemm1x1, None, engine.budget_state()).unwrap_err();
    assert_unsupported(e, "Gemm1x1");
    // Strided and padded 1x1 problems are not Gemm1x1's either.
    for params in [Conv2dParams::default().with_stride(2), Conv2dParams::default().with_padding(1)] {
        let p = problem(&[1, 4, 10, 10], &[8, 4, 1, 1], DType::F32, params);
        let e = engine.dispatcher().plan_with(&p, Algorithm::Gemm1x1, None, engine.budget_state()).unwrap_err();
        assert_unsupported(e, "Gemm1x1");
    }
    // Where it applies, the forced plan runs and agrees with Direct, whole and by rows.
    let p = problem(&[2, 4, 5, 7], &[6, 4, 1, 1], DType::F32, Conv2dParams::default());
    let (x, w) = tensors(&p);
    let want = engine.dispatcher().plan_with(&p, Algorithm::Direct, None, engine.budget_state()).unwrap();
    let want = engine.run_plan(&want, &x, &w, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    for chunking in [None, Some(Chunking { batch_per_chunk: 1, rows_per_chunk: 2 })] {
        let plan = engine.dispatcher().plan_with(&p, Algorithm::Gemm1x1, chunking, engine.budget_state()).unwrap();
        assert_eq!(plan.algorithm(), Algorithm::Gemm1x1);
        let got = engine.run_plan(&plan, &x, &w, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(got, want, "{chunking:?}");
    }
}

/// Im2colGemm (candle's conv) panicked inside candle on problems it does not take.
#[test]
fn im2col_where_candle_cannot_is_refused() {
    let engine = CpuConv::new(Budget::bytes(1 << 30));
    let grouped = problem(&[1, 4, 9, 9], &[4, 2, 3, 3], DType::F32, Conv2dParams::default().with_groups(2));
    let bf16 = problem(&[1, 4, 9, 9], &[4, 4, 3, 3], DType::BF16, Conv2dParams::default());
    let per_axis =
        problem(&[1, 4, 9, 9], &[4, 4, 3, 3], DType::F32, Conv2dParams { stride: [1, 2], ..Default::default() });
    for p in [grouped, bf16, per_axis] {
        let e = engine.dispatcher().plan_with(&p, Algorithm::Im2colGemm, None, engine.budget_state()).unwrap_err();
        assert_unsupported(e, "Im2colGemm");
    }
    // A transposed conv in row chunks: candle runs transposed convs whole only.
    let t = ConvProblem::conv_transpose2d(
        &[1, 4, 6, 6],
        &[4, 3, 3, 3],
        DType::F32,
        DType::F32,
        &Conv2dParams::default().with_stride(2),
    )
    .unwrap();
    let rows = Some(Chunking { batch_per_chunk: 1, rows_per_chunk: 2 });
    let e = engine.dispatcher().plan_with(&t, Algorithm::Im2colGemm, rows, engine.budget_state()).unwrap_err();
    assert_unsupported(e, "Im2colGemm");
    assert!(e_string(&engine, &t).contains("2 rows"));
    // Whole, it runs.
    let plan = engine.dispatcher().plan_with(&t, Algorithm::Im2colGemm, None, engine.budget_state()).unwrap();
    let (x, w) = tensors(&t);
    assert_eq!(engine.run_plan(&plan, &x, &w, None).unwrap().dims(), t.output_shape());
}

fn e_string(engine: &CpuConv, t: &ConvProblem) -> String {
    let rows = Some(Chunking { batch_per_chunk: 1, rows_per_chunk: 2 });
    engine.dispatcher().plan_with(t, Algorithm::Im2colGemm, rows, engine.budget_state()).unwrap_err().to_string()
}

/// Winograd reached an `expect`, Miopen an `unreachable!`, on the CPU.
#[test]
fn winograd_and_miopen_where_they_do_not_apply_are_refused() {
    let engine = CpuConv::new(Budget::bytes(1 << 30));
    for (params, kernel) in [
        (Conv2dParams::default().with_padding(2), 5),
        (Conv2dParams::default().with_stride(2), 3),
        (Conv2dParams::default().with_dilation(2), 3),
    ] {
        let p = problem(&[1, 4, 12, 12], &[4, 4, kernel, kernel], DType::F32, params);
        let e = engine.dispatcher().plan_with(&p, Algorithm::Winograd, None, engine.budget_state()).unwrap_err();
        assert_unsupported(e, "Winograd");
    }
    let p = problem(&[1, 4, 12, 12], &[4, 4, 3, 3], DType::F32, Conv2dParams::default().with_padding(1));
    let e = engine.dispatcher().plan_with(&p, Algorithm::Miopen, None, engine.budget_state()).unwrap_err();
    match &e {
        ConvError::AlgorithmNotOffered { algorithm, device } => {
            assert_eq!(*algorithm, "Miopen");
            assert!(device.starts_with("cpu/"), "{device}");
        }
        other => panic!("expected AlgorithmNotOffered, got {other:?}"),
    }
    assert!(e.to_string().contains("Miopen") && e.to_string().contains("cpu/"), "{e}");
}

/// groups = 3 with 4 input channels cannot become a problem (the issue edited the public
/// field into one; it is private now), neither through `ConvProblem` nor through tensors.
#[test]
fn an_impossible_problem_cannot_be_built() {
    let e = ConvProblem::conv2d(
        &[1, 4, 8, 8],
        &[3, 1, 3, 3],
        DType::F32,
        DType::F32,
        &Conv2dParams::default().with_groups(3),
    )
    .unwrap_err();
    match &e {
        ConvError::Parameter { param, value, .. } => assert_eq!((*param, value.as_str()), ("groups", "3")),
        other => panic!("expected a groups Parameter error, got {other:?}"),
    }
    assert!(e.to_string().contains("does not divide the input channels"), "{e}");
    let x = Tensor::ones((1, 4, 8, 8), DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::ones((3, 1, 3, 3), DType::F32, &Device::Cpu).unwrap();
    let e = CpuConv::default().conv2d(&x, &w, None, &Conv2dParams::default().with_groups(3)).unwrap_err();
    assert!(matches!(e, ConvError::Parameter { param: "groups", .. }), "{e:?}");
    // Sub-problems are validated too.
    let p = problem(&[2, 4, 8, 8], &[4, 4, 3, 3], DType::F32, Conv2dParams::default());
    assert!(matches!(p.with_batch(0), Err(ConvError::Parameter { param: "batch", .. })));
    assert!(matches!(p.output_rows(3..3), Err(ConvError::Parameter { param: "output rows", .. })));
    assert!(matches!(p.output_rows(0..7), Err(ConvError::Parameter { param: "output rows", .. })));
    assert_eq!(p.output_rows(0..6).unwrap().0.output_shape(), vec![2, 4, 6, 6]);
}

/// Chunkings a plan cannot have (empty chunks divided by zero in `step_by`), and forced
/// plans past the budget.
#[test]
fn empty_chunks_and_budget_are_checked() {
    let engine = CpuConv::new(Budget::bytes(1 << 30));
    let p = problem(
        &[1, 4, 12, 12],
        &[4, 4, 3, 3],
        DType::F32,
        Conv2dParams { padding: Padding2d::tblr(1, 0, 2, 1), ..Default::default() },
    );
    for c in [Chunking { batch_per_chunk: 0, rows_per_chunk: 1 }, Chunking { batch_per_chunk: 1, rows_per_chunk: 0 }] {
        let e = engine.dispatcher().plan_with(&p, Algorithm::Direct, Some(c), engine.budget_state()).unwrap_err();
        assert!(matches!(e, ConvError::Parameter { param: "chunking", .. }), "{e:?}");
    }
    let tiny = CpuConv::new(Budget::bytes(16));
    let e = tiny.dispatcher().plan_with(&p, Algorithm::Im2colGemm, None, tiny.budget_state()).unwrap_err();
    match e {
        ConvError::BudgetExceeded { needed, available, .. } => assert!(needed > available && available == 16),
        other => panic!("expected BudgetExceeded, got {other:?}"),
    }
    // Direct needs nothing: a forced plan within a 16-byte budget runs.
    let plan = tiny.dispatcher().plan_with(&p, Algorithm::Direct, None, tiny.budget_state()).unwrap();
    let (x, w) = tensors(&p);
    assert_eq!(tiny.run_plan(&plan, &x, &w, None).unwrap().dims(), p.output_shape());
}

/// A plan is checked against the tensors it is run on: shapes, dtype and bias.
#[test]
fn a_plan_run_on_other_tensors_is_an_error() {
    let engine = CpuConv::new(Budget::bytes(1 << 30));
    let p = problem(&[1, 4, 6, 6], &[6, 4, 1, 1], DType::F32, Conv2dParams::default());
    let plan = engine.dispatcher().plan_with(&p, Algorithm::Gemm1x1, None, engine.budget_state()).unwrap();
    let small = Tensor::ones((1, 4, 2, 2), DType::F32, &Device::Cpu).unwrap();
    let (x, w) = tensors(&p);
    let e = engine.run_plan(&plan, &small, &w, None).unwrap_err();
    assert!(e.to_string().contains("[1, 4, 2, 2]"), "{e}");
    let e = engine.run_plan(&plan, &x.to_dtype(DType::F16).unwrap(), &w, None).unwrap_err();
    assert!(matches!(e, ConvError::DTypeMismatch { .. }), "{e:?}");
    let bias = Tensor::ones(5, DType::F32, &Device::Cpu).unwrap();
    let e = engine.run_plan(&plan, &x, &w, Some(&bias)).unwrap_err();
    assert!(matches!(e, ConvError::BiasShape { channels: 6, .. }), "{e:?}");
}
