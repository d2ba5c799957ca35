//! Real-CUGAN super-resolution (se / pro / nose, 2x / 3x / 4x) on rocm-vision.

pub mod ncnn;
