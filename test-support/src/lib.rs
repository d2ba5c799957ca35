//! Test and benchmark support for every crate of the workspace, taken as a dev-dependency
//! only: the counting global allocator ([`CountingAlloc`]), the seeded mutation fuzzer of
//! the loaders ([`fuzz`]), the models' fault-injection loop ([`fail_every_allocation`]), random convolution problems ([`RandomConv2d`],
//! [`random_geometry`]), the epilogue's activations in f64 ([`activation_f64`]) and the one
//! way a test says it checked nothing ([`skipped`], [`device_or_skip`]).
//!
//! The conv-specific generators and [`skipped`] are defined in `conv_engine::testing` and
//! re-exported here, because `rocm-backend`'s tests still name that path; see its module
//! documentation.

mod counting_alloc;
mod faults;
pub mod fuzz;

pub use conv_engine::testing::{Channels, RandomConv2d, activation_f64, device_or_skip, skipped};
pub use counting_alloc::{CountingAlloc, Realloc};
pub use faults::fail_every_allocation;

use conv_engine::geometry::{ConvGeometry, ConvKind};
use rand::{Rng, rngs::StdRng};

/// A random valid convolution geometry (forward in 65% of draws, else transposed; up to 3
/// groups, strides, dilations and asymmetric padding), for the executors' index math.
pub fn random_geometry(rng: &mut StdRng) -> ConvGeometry {
    let kind = if rng.random_bool(0.35) { ConvKind::Transposed } else { ConvKind::Forward };
    loop {
        let groups = [1, 1, 1, 2, 3][rng.random_range(0..5)];
        let g = ConvGeometry {
            kind,
            batch: rng.random_range(1..3),
            in_channels: groups * rng.random_range(1..6),
            in_size: [rng.random_range(1..12), rng.random_range(1..20)],
            out_channels: groups * rng.random_range(1..14),
            kernel: [rng.random_range(1..5), rng.random_range(1..5)],
            stride: [rng.random_range(1..4), rng.random_range(1..4)],
            pad_begin: [rng.random_range(0..3), rng.random_range(0..3)],
            pad_end: [rng.random_range(0..3), rng.random_range(0..3)],
            dilation: [rng.random_range(1..3), rng.random_range(1..3)],
            output_padding: [0, 0],
            groups,
        };
        if g.out_size().is_some() {
            return g;
        }
    }
}
