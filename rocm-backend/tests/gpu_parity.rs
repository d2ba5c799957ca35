//! Op parity of the ROCm backend with candle's CPU backend (GPU tier, issue 8).
//!
//! Every op of the parity surface (cmp, where_cond, powf, elu, index_select, gather,
//! scatter, scatter_add, index_add with u32 and i64 indices, multi-dimension sum/max/min
//! and argmax/argmin, rms_norm, upsample_nearest1d, upsample_bilinear2d with and without
//! align_corners, and the Philox random streams) runs on the GPU over f32/f16/bf16 and the
//! integer dtypes where the op applies, through contiguous, transposed, broadcast and
//! offset (narrowed) views of fresh random inputs, and is compared with candle's CPU
//! result for the same views. The memory the outputs will land in is poisoned first
//! (freed blocks of the output's size class filled with 0xFF bytes: NaN, or the integer
//! maximum), so an element a kernel forgets to write shows up. Tolerances: f32 1e-5,
//! f16/bf16 1e-2 (relative to max(1, |cpu|)), f64 1e-12, integers exact.
//!
//! The result is an op × dtype table (pass / n.a. with the reason / FAIL with the first
//! mismatch); `ROCM_VISION_PARITY_TABLE=<path>` writes it as markdown. The test fails if
//! any cell fails. Without a device it skips with the reason (`ROCM_VISION_REQUIRE_GPU=1`
//! makes that a failure).

mod common;

use candle_core::{DType, Device, Layout, Tensor};
use kernels::ops::{CmpOp, ReduceOp, UnaryOp};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rocm_backend::indexing::{self, ScatterMode};
use rocm_backend::{DeviceArray, RocmDevice, norm, ops, random, resample};
use std::collections::BTreeMap;
use std::sync::Arc;

const DTYPES: [DType; 7] = [DType::F32, DType::F16, DType::BF16, DType::F64, DType::U8, DType::U32, DType::I64];
const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

type Res<T> = std::result::Result<T, String>;

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn upload(dev: &Arc<RocmDevice>, t: &Tensor) -> DeviceArray {
    let f = t.flatten_all().unwrap();
    match t.dtype() {
        DType::F32 => DeviceArray::from_slice(dev, &f.to_vec1::<f32>().unwrap()),
        DType::F16 => DeviceArray::from_slice(dev, &f.to_vec1::<half::f16>().unwrap()),
        DType::BF16 => DeviceArray::from_slice(dev, &f.to_vec1::<half::bf16>().unwrap()),
        DType::F64 => DeviceArray::from_slice(dev, &f.to_vec1::<f64>().unwrap()),
        DType::U8 => DeviceArray::from_slice(dev, &f.to_vec1::<u8>().unwrap()),
        DType::U32 => DeviceArray::from_slice(dev, &f.to_vec1::<u32>().unwrap()),
        DType::I64 => DeviceArray::from_slice(dev, &f.to_vec1::<i64>().unwrap()),
        other => panic!("no upload for {other:?}"),
    }
    .unwrap()
}

fn download(a: &DeviceArray, dims: &[usize]) -> Res<Tensor> {
    let cpu = Device::Cpu;
    macro_rules! d {
        ($t:ty) => {
            Tensor::from_vec(a.to_vec::<$t>().map_err(e2s)?, dims, &cpu).map_err(e2s)
        };
    }
    let n: usize = dims.iter().product();
    if a.len != n {
        return Err(format!("result holds {} elements, shape {dims:?} needs {n}", a.len));
    }
    match a.dtype {
        DType::F32 => d!(f32),
        DType::F16 => d!(half::f16),
        DType::BF16 => d!(half::bf16),
        DType::F64 => d!(f64),
        DType::U8 => d!(u8),
        DType::U32 => d!(u32),
        DType::I64 => d!(i64),
        other => Err(format!("no download for {other:?}")),
    }
}

/// Fills freed blocks of the size class of `elems` elements of `dtype` with 0xFF bytes, so
/// that the next allocations of that size reuse poisoned memory.
fn poison(dev: &Arc<RocmDevice>, dtype: DType, elems: usize) {
    let bytes = (elems * dtype.size_in_bytes()).max(1);
    let blocks: Vec<DeviceArray> =
        (0..3).map(|_| DeviceArray::from_slice(dev, &vec![0xFFu8; bytes]).unwrap()).collect();
    drop(blocks);
}

/// The type candle's reference of an accumulating op (sum, rms_norm) is computed in, on
/// the upcast input: f32 for the 16-bit floats (candle's own 16-bit sums accumulate in the
/// 16-bit type), f64 for f32 (so that the reference's own rounding stays well below the
/// f32 tolerance), f64 for f64.
fn wide(dt: DType) -> DType {
    if matches!(dt, DType::F16 | DType::BF16) { DType::F32 } else { DType::F64 }
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-5,
        DType::F16 | DType::BF16 => 1e-2,
        DType::F64 => 1e-12,
        _ => 0.0,
    }
}

/// Compares the GPU result with candle's, element by element; the first mismatch names
/// its index and both values.
fn compare(gpu: &Tensor, cpu: &Tensor) -> Res<()> {
    compare_tol(gpu, cpu, tol(cpu.dtype()))
}

/// [`compare`] with an explicit tolerance.
fn compare_tol(gpu: &Tensor, cpu: &Tensor, t: f64) -> Res<()> {
    if gpu.dims() != cpu.dims() {
        return Err(format!("shape {:?}, candle {:?}", gpu.dims(), cpu.dims()));
    }
    if gpu.dtype() != cpu.dtype() {
        return Err(format!("dtype {:?}, candle {:?}", gpu.dtype(), cpu.dtype()));
    }
    let g = gpu.to_dtype(DType::F64).and_then(|x| x.flatten_all()).and_then(|x| x.to_vec1::<f64>()).map_err(e2s)?;
    let c = cpu.to_dtype(DType::F64).and_then(|x| x.flatten_all()).and_then(|x| x.to_vec1::<f64>()).map_err(e2s)?;
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        let ok =
            if a.is_nan() || b.is_nan() { a.is_nan() && b.is_nan() } else { (a - b).abs() <= t * b.abs().max(1.0) };
        if !ok {
            return Err(format!("element {i}: gpu {a} vs candle {b}"));
        }
    }
    Ok(())
}

/// A tensor on both sides: candle's CPU copy and the device array with the same view.
#[derive(Clone)]
struct P {
    c: Tensor,
    a: DeviceArray,
    l: Layout,
}

impl P {
    fn new(dev: &Arc<RocmDevice>, c: Tensor) -> P {
        let a = upload(dev, &c);
        P { l: Layout::contiguous(c.dims()), c, a }
    }
    fn transpose(&self, d0: usize, d1: usize) -> P {
        P { c: self.c.transpose(d0, d1).unwrap(), a: self.a.clone(), l: self.l.transpose(d0, d1).unwrap() }
    }
    fn narrow(&self, d: usize, start: usize, len: usize) -> P {
        P { c: self.c.narrow(d, start, len).unwrap(), a: self.a.clone(), l: self.l.narrow(d, start, len).unwrap() }
    }
    fn broadcast(&self, dims: &[usize]) -> P {
        P { c: self.c.broadcast_as(dims).unwrap(), a: self.a.clone(), l: self.l.broadcast_as(dims).unwrap() }
    }
    /// candle's CPU ops want contiguous operands for several ops (gather, scatter): its
    /// reference is computed on a contiguous copy of the same view.
    fn cc(&self) -> Tensor {
        self.c.contiguous().unwrap()
    }
}

/// The views each op is checked through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Contiguous,
    /// The last two dimensions swapped (non-contiguous).
    Transposed,
    /// Dimension 0 broadcast from size 1 (stride 0).
    Broadcast,
    /// Narrowed in dimension 0 and in the last dimension: an offset, non-contiguous view.
    Narrowed,
}

const VIEWS: [View; 4] = [View::Contiguous, View::Transposed, View::Broadcast, View::Narrowed];

struct Gen<'a> {
    dev: &'a Arc<RocmDevice>,
    rng: StdRng,
    /// Round float values down to integers too (comparisons: ties happen).
    integral: bool,
}

impl Gen<'_> {
    /// Random values of `dt` (floats in [lo, hi); integers in [max(lo, 0), hi) rounded
    /// down) viewed as `dims` through `view`.
    fn tensor(&mut self, dims: &[usize], dt: DType, view: View, (lo, hi): (f32, f32)) -> P {
        let r = dims.len();
        let mut base = dims.to_vec();
        match view {
            View::Contiguous => {}
            View::Transposed => base.swap(r - 2, r - 1),
            View::Broadcast => base[0] = 1,
            View::Narrowed => {
                base[0] += 3;
                if r > 1 {
                    base[r - 1] += 2;
                }
            }
        }
        let n: usize = base.iter().product();
        let int = !FLOATS.contains(&dt);
        let lo = if int { lo.max(0.0) } else { lo };
        let v: Vec<f32> = (0..n)
            .map(|_| {
                let x = self.rng.random_range(lo..hi);
                if int || self.integral { x.floor() } else { x }
            })
            .collect();
        let t = Tensor::from_vec(v, base.as_slice(), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
        let p = P::new(self.dev, t);
        match view {
            View::Contiguous => p,
            View::Transposed => p.transpose(r - 2, r - 1),
            View::Broadcast => p.broadcast(dims),
            View::Narrowed if r == 1 => p.narrow(0, 2, dims[0]),
            View::Narrowed => p.narrow(0, 2, dims[0]).narrow(r - 1, 1, dims[r - 1]),
        }
    }

    /// Indices of `idt` in [0, bound), with about one in eight the "no index" sentinel
    /// (`sentinel`), viewed as `dims` through `view`.
    fn ids(&mut self, dims: &[usize], idt: DType, bound: usize, sentinel: bool, view: View) -> P {
        let r = dims.len();
        let mut base = dims.to_vec();
        match view {
            View::Narrowed => base[0] += 3,
            View::Transposed if r >= 2 => base.swap(r - 2, r - 1),
            _ => {}
        }
        let n: usize = base.iter().product();
        let raw: Vec<Option<usize>> = (0..n)
            .map(|_| {
                if sentinel && self.rng.random_range(0..8) == 0 { None } else { Some(self.rng.random_range(0..bound)) }
            })
            .collect();
        let cpu = Device::Cpu;
        let t = match idt {
            DType::U32 => Tensor::from_vec(
                raw.iter().map(|x| x.map_or(u32::MAX, |v| v as u32)).collect::<Vec<_>>(),
                base.as_slice(),
                &cpu,
            ),
            _ => Tensor::from_vec(
                raw.iter().map(|x| x.map_or(i64::MAX, |v| v as i64)).collect::<Vec<_>>(),
                base.as_slice(),
                &cpu,
            ),
        }
        .unwrap();
        let p = P::new(self.dev, t);
        match view {
            View::Narrowed => p.narrow(0, 2, dims[0]),
            View::Transposed if r >= 2 => p.transpose(r - 2, r - 1),
            _ => p,
        }
    }
}

/// One cell of the table.
#[derive(Clone, Debug)]
enum Cell {
    Pass(usize),
    Na(String),
    Fail(String),
}

#[derive(Default)]
struct Table {
    rows: BTreeMap<String, BTreeMap<String, Cell>>,
    order: Vec<String>,
}

impl Table {
    fn set(&mut self, op: &str, dt: DType, cell: Cell) {
        if !self.rows.contains_key(op) {
            self.order.push(op.to_string());
        }
        self.rows.entry(op.to_string()).or_default().insert(format!("{dt:?}").to_lowercase(), cell);
    }

    fn failures(&self) -> Vec<String> {
        let mut v = Vec::new();
        for op in &self.order {
            for (dt, c) in &self.rows[op] {
                if let Cell::Fail(m) = c {
                    v.push(format!("{op} {dt}: {m}"));
                }
            }
        }
        v
    }

    fn markdown(&self, device: &str) -> String {
        let cols: Vec<String> = DTYPES.iter().map(|d| format!("{d:?}").to_lowercase()).collect();
        let mut s = format!(
            "# ROCm op parity with candle's CPU backend\n\nDevice: {device}. Generated by `rocm-backend/tests/gpu_parity.rs` \
             (`ROCM_VISION_PARITY_TABLE`). Each pass cell ran the op through every listed view (contiguous, transposed, \
             broadcast, narrowed); the number is the count of checked cases.\n\n| op | {} |\n|---|{}\n",
            cols.join(" | "),
            "---|".repeat(cols.len())
        );
        for op in &self.order {
            let row = &self.rows[op];
            let cells: Vec<String> = cols
                .iter()
                .map(|c| match row.get(c) {
                    Some(Cell::Pass(n)) => format!("pass ({n})"),
                    Some(Cell::Na(r)) => format!("n.a.: {r}"),
                    Some(Cell::Fail(m)) => format!("**FAIL**: {}", m.replace('|', "/")),
                    None => "-".into(),
                })
                .collect();
            s += &format!("| {op} | {} |\n", cells.join(" | "));
        }
        s
    }
}

/// Runs `case` for every view and records the cell: the first failure, or the count.
fn cell(table: &mut Table, op: &str, dt: DType, views: &[View], mut case: impl FnMut(View) -> Res<()>) {
    let mut n = 0;
    for &v in views {
        if let Err(m) = case(v) {
            table.set(op, dt, Cell::Fail(format!("{v:?}: {m}")));
            return;
        }
        n += 1;
    }
    table.set(op, dt, Cell::Pass(n));
}

fn float_op(table: &mut Table, op: &str, dt: DType) -> bool {
    if FLOATS.contains(&dt) {
        return true;
    }
    table.set(op, dt, Cell::Na("float op (candle: float only)".into()));
    false
}

/// candle's op for `op`.
fn candle_cmp(op: CmpOp) -> candle_core::op::CmpOp {
    use candle_core::op::CmpOp as Candle;
    match op {
        CmpOp::Eq => Candle::Eq,
        CmpOp::Ne => Candle::Ne,
        CmpOp::Lt => Candle::Lt,
        CmpOp::Le => Candle::Le,
        CmpOp::Gt => Candle::Gt,
        CmpOp::Ge => Candle::Ge,
    }
}

fn check_cmp(table: &mut Table, g: &mut Gen, dt: DType) {
    let dims = [3, 5, 7];
    for op in CmpOp::ALL {
        cell(table, &format!("cmp_{}", op.name()), dt, &VIEWS, |v| {
            // Small integers, so that ties (eq, le, ge) happen often.
            g.integral = true;
            let x = g.tensor(&dims, dt, v, (-3.0, 4.0));
            let y = g.tensor(&dims, dt, View::Contiguous, (-3.0, 4.0));
            g.integral = false;
            // Broadcast also on the right: a row broadcast over dimension 1.
            let y = if v == View::Broadcast { y.narrow(1, 0, 1).broadcast(&dims) } else { y };
            poison(g.dev, DType::U8, x.l.shape().elem_count());
            let out = rocm_backend::compare::cmp(op, &x.a, &x.l, &y.a, &y.l).map_err(e2s)?;
            compare(&download(&out, &dims)?, &x.c.cmp(&y.c, candle_cmp(op)).map_err(e2s)?)
        });
    }
}

fn check_where(table: &mut Table, g: &mut Gen, dt: DType) {
    let dims = [4, 6, 5];
    cell(table, "where_cond", dt, &VIEWS, |v| {
        let m = g.tensor(&dims, DType::U8, v, (0.0, 3.0));
        let t = g.tensor(&dims, dt, v, (-5.0, 20.0));
        let f = g.tensor(&dims, dt, if v == View::Broadcast { View::Contiguous } else { v }, (-5.0, 20.0));
        poison(g.dev, dt, m.l.shape().elem_count());
        let out = rocm_backend::compare::where_cond(&m.a, &m.l, &t.a, &t.l, &f.a, &f.l).map_err(e2s)?;
        compare(&download(&out, &dims)?, &m.c.where_cond(&t.c, &f.c).map_err(e2s)?)
    });
}

fn check_unary_param(table: &mut Table, g: &mut Gen, dt: DType) {
    let dims = [5, 4, 9];
    if float_op(table, "powf(2.5)", dt) {
        cell(table, "powf(2.5)", dt, &VIEWS, |v| {
            let x = g.tensor(&dims, dt, v, (0.05, 3.0));
            poison(g.dev, dt, x.l.shape().elem_count());
            let out = ops::unary(UnaryOp::Powf, &x.a, &x.l, 2.5).map_err(e2s)?;
            compare(&download(&out, &dims)?, &x.c.powf(2.5).map_err(e2s)?)
        });
    }
    if float_op(table, "elu(0.7)", dt) {
        cell(table, "elu(0.7)", dt, &VIEWS, |v| {
            let x = g.tensor(&dims, dt, v, (-4.0, 4.0));
            poison(g.dev, dt, x.l.shape().elem_count());
            let out = ops::unary(UnaryOp::Elu, &x.a, &x.l, 0.7).map_err(e2s)?;
            compare(&download(&out, &dims)?, &x.c.elu(0.7).map_err(e2s)?)
        });
    }
}

fn idx_name(idt: DType) -> &'static str {
    if idt == DType::U32 { "u32" } else { "i64" }
}

fn check_indexing(table: &mut Table, g: &mut Gen, dt: DType) {
    let vals = (-4.0, 20.0);
    for idt in [DType::U32, DType::I64] {
        let ix = idx_name(idt);
        for dim in [0usize, 1, 2] {
            let src_dims = [5, 6, 4];
            cell(table, &format!("index_select[{ix}] dim {dim}"), dt, &VIEWS, |v| {
                let s = g.tensor(&src_dims, dt, v, vals);
                let ids = g.ids(&[7], idt, src_dims[dim], true, if v == View::Narrowed { v } else { View::Contiguous });
                let mut od = src_dims.to_vec();
                od[dim] = 7;
                poison(g.dev, dt, od.iter().product());
                let (out, shape) = indexing::index_select(&s.a, &s.l, &ids.a, &ids.l, dim).map_err(e2s)?;
                if shape != od {
                    return Err(format!("shape {shape:?}, expected {od:?}"));
                }
                compare(&download(&out, &od)?, &s.cc().index_select(&ids.cc(), dim).map_err(e2s)?)
            });
        }
        for dim in [0usize, 2] {
            let src_dims = [5, 6, 4];
            cell(table, &format!("gather[{ix}] dim {dim}"), dt, &VIEWS, |v| {
                let s = g.tensor(&src_dims, dt, v, vals);
                let mut id = src_dims.to_vec();
                id[dim] = 3;
                let ids = g.ids(&id, idt, src_dims[dim], true, if v == View::Broadcast { View::Contiguous } else { v });
                poison(g.dev, dt, id.iter().product());
                let (out, shape) = indexing::gather(&s.a, &s.l, &ids.a, &ids.l, dim).map_err(e2s)?;
                compare(&download(&out, &shape)?, &s.cc().gather(&ids.cc(), dim).map_err(e2s)?)
            });
        }
        for (name, mode) in [("scatter", ScatterMode::Set), ("scatter_add", ScatterMode::Add)] {
            for dim in [0usize, 1] {
                let dst_dims = [5, 6, 4];
                cell(table, &format!("{name}[{ix}] dim {dim}"), dt, &VIEWS, |v| {
                    let d = g.tensor(&dst_dims, dt, v, vals);
                    let mut sd = dst_dims.to_vec();
                    sd[dim] = 3;
                    let src = g.tensor(&sd, dt, if v == View::Broadcast { View::Contiguous } else { v }, vals);
                    let ids = g.ids(&sd, idt, dst_dims[dim], true, View::Contiguous);
                    poison(g.dev, dt, dst_dims.iter().product());
                    let out = indexing::scatter(&d.a, &d.l, &ids.a, &ids.l, &src.a, &src.l, dim, mode).map_err(e2s)?;
                    let cpu = match mode {
                        ScatterMode::Set => d.cc().scatter(&ids.cc(), &src.cc(), dim),
                        ScatterMode::Add => d.cc().scatter_add(&ids.cc(), &src.cc(), dim),
                    }
                    .map_err(e2s)?;
                    compare(&download(&out, &dst_dims)?, &cpu)
                });
            }
        }
        for dim in [0usize, 2] {
            let dst_dims = [5, 6, 4];
            cell(table, &format!("index_add[{ix}] dim {dim}"), dt, &VIEWS, |v| {
                let d = g.tensor(&dst_dims, dt, v, vals);
                let mut sd = dst_dims.to_vec();
                sd[dim] = 7;
                let src = g.tensor(&sd, dt, if v == View::Broadcast { View::Contiguous } else { v }, vals);
                let ids = g.ids(&[7], idt, dst_dims[dim], true, if v == View::Narrowed { v } else { View::Contiguous });
                poison(g.dev, dt, dst_dims.iter().product());
                let out = indexing::index_add(&d.a, &d.l, &ids.a, &ids.l, &src.a, &src.l, dim).map_err(e2s)?;
                compare(&download(&out, &dst_dims)?, &d.cc().index_add(&ids.cc(), &src.cc(), dim).map_err(e2s)?)
            });
        }
    }
}

/// Reduction through the device ops as `RocmTensor::reduce_dims` does it: reduced
/// dimensions moved last, one pass over `[outer, len]`.
fn reduce_gpu(x: &P, op: ReduceOp, dims: &[usize]) -> Res<DeviceArray> {
    let r = x.l.dims().len();
    let kept: Vec<usize> = (0..r).filter(|i| !dims.contains(i)).collect();
    let perm: Vec<usize> = kept.iter().chain(dims).copied().collect();
    let l = x.l.permute(&perm).map_err(e2s)?;
    let c = ops::contiguous(&x.a, &l).map_err(e2s)?;
    let outer: usize = kept.iter().map(|&i| x.l.dims()[i]).product();
    let len: usize = dims.iter().map(|&i| x.l.dims()[i]).product();
    ops::reduce(op, &c, outer, len, 1).map_err(e2s)
}

fn check_reduce(table: &mut Table, g: &mut Gen, dt: DType) {
    let dims = [4, 5, 6];
    let cases: [(&str, ReduceOp, &[usize]); 6] = [
        ("sum_keepdim(0, 2)", ReduceOp::Sum, &[0, 2]),
        ("max_keepdim(1, 2)", ReduceOp::Max, &[1, 2]),
        ("min_keepdim(0)", ReduceOp::Min, &[0]),
        ("sum_keepdim(2)", ReduceOp::Sum, &[2]),
        ("argmax_keepdim(1)", ReduceOp::ArgMax, &[1]),
        ("argmin_keepdim(2)", ReduceOp::ArgMin, &[2]),
    ];
    for (name, op, rdims) in cases {
        if !FLOATS.contains(&dt) {
            table.set(name, dt, Cell::Na("not implemented: the reduce kernels are float-only".into()));
            continue;
        }
        cell(table, name, dt, &VIEWS, |v| {
            let x = g.tensor(&dims, dt, v, (-3.0, 3.0));
            let out_dims: Vec<usize> =
                dims.iter().enumerate().map(|(i, &d)| if rdims.contains(&i) { 1 } else { d }).collect();
            let n = out_dims.iter().product();
            poison(g.dev, if op.is_arg() { DType::U32 } else { dt }, n);
            let out = reduce_gpu(&x, op, rdims)?;
            // candle's CPU on the upcast input for sums (see `wide`), on the dtype itself
            // for the exact ops.
            let c = &x.c;
            let cpu = match op {
                ReduceOp::Sum => c.to_dtype(wide(dt)).and_then(|t| t.sum_keepdim(rdims)).and_then(|t| t.to_dtype(dt)),
                ReduceOp::Max => rdims.iter().try_fold(c.clone(), |t, &d| t.max_keepdim(d)),
                ReduceOp::Min => rdims.iter().try_fold(c.clone(), |t, &d| t.min_keepdim(d)),
                ReduceOp::ArgMax => c.argmax_keepdim(rdims[0]),
                ReduceOp::ArgMin => c.argmin_keepdim(rdims[0]),
            }
            .map_err(e2s)?;
            compare(&download(&out, &out_dims)?, &cpu)
        });
    }
}

fn check_rms_norm(table: &mut Table, g: &mut Gen, dt: DType) {
    if !float_op(table, "rms_norm", dt) {
        return;
    }
    let dims = [6, 3, 40];
    // The row-norm kernel computes its statistics and the scaling in f32 for every dtype
    // (documented in kernels/src/norm.hip): f64 rows are held to the f32 tolerance.
    let name = if dt == DType::F64 { "rms_norm (f64: f32 arithmetic, tol 1e-5)" } else { "rms_norm" };
    let t = if dt == DType::F64 { 1e-5 } else { tol(dt) };
    if dt == DType::F64 {
        for other in [DType::F32, DType::F16, DType::BF16] {
            table.set(name, other, Cell::Na("see the rms_norm row".into()));
        }
        table.set("rms_norm", dt, Cell::Na("see the f64 row below".into()));
    }
    cell(table, name, dt, &VIEWS, |v| {
        let x = g.tensor(&dims, dt, v, (-2.0, 2.0));
        let w = g.tensor(&[40], dt, View::Contiguous, (0.5, 1.5));
        let xc = ops::contiguous(&x.a, &x.l).map_err(e2s)?;
        poison(g.dev, dt, xc.len);
        let out = norm::rms_norm(&xc, 18, 40, Some(&w.a), None, 1e-5).map_err(e2s)?;
        // candle_nn::ops::rms_norm's definition, on the upcast input (see `wide`).
        let f = x.c.to_dtype(wide(dt)).map_err(e2s)?;
        let ms = f.sqr().and_then(|t| t.mean_keepdim(2)).map_err(e2s)?;
        let cpu = f
            .broadcast_div(&(ms + 1e-5).and_then(|t| t.sqrt()).map_err(e2s)?)
            .and_then(|t| t.broadcast_mul(&w.c.to_dtype(wide(dt))?))
            .and_then(|t| t.to_dtype(dt))
            .map_err(e2s)?;
        compare_tol(&download(&out, &dims)?, &cpu, t)
    });
}

fn check_resample(table: &mut Table, g: &mut Gen, dt: DType) {
    for (l, target) in [(7usize, 16usize), (9, 4), (5, 5)] {
        cell(table, &format!("upsample_nearest1d {l}->{target}"), dt, &VIEWS, |v| {
            let x = g.tensor(&[2, 3, l], dt, v, (-5.0, 50.0));
            poison(g.dev, dt, 6 * target);
            let out = resample::upsample_nearest1d(&x.a, &x.l, target).map_err(e2s)?;
            compare(&download(&out, &[2, 3, target])?, &x.c.upsample_nearest1d(target).map_err(e2s)?)
        });
    }
    for align in [false, true] {
        for (h, w, oh, ow) in [(5usize, 7usize, 11usize, 9usize), (8, 6, 3, 4), (1, 4, 3, 1)] {
            let name = format!("upsample_bilinear2d {h}x{w}->{oh}x{ow} align_corners={align}");
            if !float_op(table, &name, dt) {
                continue;
            }
            cell(table, &name, dt, &VIEWS, |v| {
                let x = g.tensor(&[2, 3, h, w], dt, v, (-3.0, 3.0));
                poison(g.dev, dt, 6 * oh * ow);
                let out = resample::upsample_bilinear2d(&x.a, &x.l, oh, ow, align).map_err(e2s)?;
                compare(&download(&out, &[2, 3, oh, ow])?, &x.c.upsample_bilinear2d(oh, ow, align).map_err(e2s)?)
            });
        }
    }
}

/// The random streams have no candle counterpart to compare with (candle draws from its
/// own CPU generator): they are checked against the host implementation of the same
/// Philox stream (bit for bit for the raw words and f32 uniforms), for determinism, and
/// for their statistics.
fn check_random(table: &mut Table, dev: &Arc<RocmDevice>, dt: DType) {
    let n = 100_003;
    if dt == DType::U32 {
        cell(table, "rand_bits (Philox4x32-10)", dt, &[View::Contiguous], |_| {
            for (seed, offset) in [(0u64, 0u64), (0xdead_beef_0123_4567, 5), (7, (1u64 << 34) + 3)] {
                poison(dev, DType::U32, n);
                let got = random::rand_bits(dev, n, seed, offset).map_err(e2s)?.to_vec::<u32>().map_err(e2s)?;
                let want = random::reference_bits(seed, offset, n);
                if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
                    return Err(format!(
                        "seed {seed} offset {offset}: word {i}: gpu {:#x}, host {:#x}",
                        got[i], want[i]
                    ));
                }
            }
            // The known answer for counter 0, key 0, through the device.
            let w = random::rand_bits(dev, 4, 0, 0).map_err(e2s)?.to_vec::<u32>().map_err(e2s)?;
            if w != [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8] {
                return Err(format!("known answer: {w:x?}"));
            }
            Ok(())
        });
        table.set("rand_uniform", dt, Cell::Na("float op".into()));
        table.set("rand_normal", dt, Cell::Na("float op".into()));
        return;
    }
    if !FLOATS.contains(&dt) {
        table.set("rand_uniform", dt, Cell::Na("float op".into()));
        table.set("rand_normal", dt, Cell::Na("float op".into()));
        table.set("rand_bits (Philox4x32-10)", dt, Cell::Na("u32 words".into()));
        return;
    }
    table.set("rand_bits (Philox4x32-10)", dt, Cell::Na("u32 words".into()));
    let as_f64 = |a: &DeviceArray| -> Res<Vec<f64>> {
        download(a, &[a.len])?.to_dtype(DType::F64).and_then(|t| t.to_vec1::<f64>()).map_err(e2s)
    };
    cell(table, "rand_uniform", dt, &[View::Contiguous], |_| {
        poison(dev, dt, n);
        let a = as_f64(&random::rand_uniform(dev, dt, n, -1.0, 3.0, 11, 6).map_err(e2s)?)?;
        let b = as_f64(&random::rand_uniform(dev, dt, n, -1.0, 3.0, 11, 6).map_err(e2s)?)?;
        if a != b {
            return Err("two draws with one seed and offset differ".into());
        }
        // f64 draws use the whole 32-bit word, the others its top 24 bits.
        let want = if dt == DType::F64 {
            let w = random::reference_bits(11, 6, n);
            let v: Vec<f64> = w.iter().map(|&w| -1.0 + 4.0 * (f64::from(w) / 4_294_967_296.0)).collect();
            Tensor::new(v.as_slice(), &Device::Cpu).map_err(e2s)?
        } else {
            let v = random::reference_uniform_f32(11, 6, n, -1.0, 3.0);
            Tensor::new(v.as_slice(), &Device::Cpu).and_then(|t| t.to_dtype(dt)).map_err(e2s)?
        };
        compare(&Tensor::new(a.as_slice(), &Device::Cpu).and_then(|t| t.to_dtype(dt)).map_err(e2s)?, &want)?;
        if a.iter().any(|&x| !(-1.0..=3.0).contains(&x)) {
            return Err("a value outside [-1, 3]".into());
        }
        let mean = a.iter().sum::<f64>() / n as f64;
        if (mean - 1.0).abs() > 0.02 {
            return Err(format!("mean {mean}, expected 1"));
        }
        let c = as_f64(&random::rand_uniform(dev, dt, n, -1.0, 3.0, 12, 6).map_err(e2s)?)?;
        if c == a {
            return Err("another seed gave the same numbers".into());
        }
        Ok(())
    });
    cell(table, "rand_normal", dt, &[View::Contiguous], |_| {
        poison(dev, dt, n);
        let a = as_f64(&random::rand_normal(dev, dt, n, 2.0, 0.5, 5, 1).map_err(e2s)?)?;
        let b = as_f64(&random::rand_normal(dev, dt, n, 2.0, 0.5, 5, 1).map_err(e2s)?)?;
        if a != b {
            return Err("two draws with one seed and offset differ".into());
        }
        let want = random::reference_normal(5, 1, n, 2.0, 0.5);
        let t = if dt == DType::F64 { 1e-5 } else { tol(dt) };
        if let Some(i) = (0..n).find(|&i| (a[i] - want[i]).abs() > t * want[i].abs().max(1.0)) {
            return Err(format!("element {i}: gpu {} vs host {}", a[i], want[i]));
        }
        let mean = a.iter().sum::<f64>() / n as f64;
        let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        if (mean - 2.0).abs() > 0.01 || (var - 0.25).abs() > 0.01 {
            return Err(format!("mean {mean}, variance {var}; expected 2, 0.25"));
        }
        Ok(())
    });
}

#[test]
fn ops_match_candle_cpu() {
    let Some(dev) = common::device() else { return };
    let mut g = Gen { dev: &dev, rng: StdRng::seed_from_u64(8), integral: false };
    let mut table = Table::default();
    for dt in DTYPES {
        check_cmp(&mut table, &mut g, dt);
        check_where(&mut table, &mut g, dt);
        check_unary_param(&mut table, &mut g, dt);
        check_indexing(&mut table, &mut g, dt);
        check_reduce(&mut table, &mut g, dt);
        check_rms_norm(&mut table, &mut g, dt);
        check_resample(&mut table, &mut g, dt);
        check_random(&mut table, &dev, dt);
    }
    let md = table.markdown(&format!("{:?}", dev.info()));
    println!("{md}");
    if let Ok(path) = std::env::var("ROCM_VISION_PARITY_TABLE") {
        std::fs::write(&path, &md).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    let failures = table.failures();
    assert!(failures.is_empty(), "{} cell(s) failed:\n{}", failures.len(), failures.join("\n"));
}
