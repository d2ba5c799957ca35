//! How much memory decoding an image file may take, from the file's length: what keeps a
//! 100-byte file that claims a 30000x30000 image from allocating half a gigabyte before
//! its first pixel is read (issue 13; found by `tests/fuzz_loaders.rs`).
//!
//! Any image up to [`FLOOR`] bytes decoded is allowed whatever its compression (a 4096x4096
//! RGBA image, even a solid one of a few hundred bytes); beyond it the file must be at
//! least 1/[`MAX_RATIO`] of the decoded size, above what deflate (PNG) or JPEG reach on
//! real images.

/// Decoded bytes any file may ask for: 64 MiB.
pub const FLOOR: u64 = 64 << 20;
/// Decoded bytes per byte of file allowed beyond [`FLOOR`] (deflate's limit is ~1032).
pub const MAX_RATIO: u64 = 1100;

/// The largest allocation decoding a `file_len`-byte image may make.
pub fn max_decode_bytes(file_len: u64) -> u64 {
    FLOOR.saturating_add(file_len.saturating_mul(MAX_RATIO))
}

/// The `image` crate's limits for a `file_len`-byte file: half of
/// [`max_decode_bytes`] for the decoded buffer, since the crate checks that buffer and a
/// decoder's own working buffers (JPEG planes, WebP rows) come on top of it.
pub fn limits(file_len: u64) -> image::Limits {
    let mut l = image::Limits::default();
    l.max_alloc = Some(max_decode_bytes(file_len) / 2);
    l
}
