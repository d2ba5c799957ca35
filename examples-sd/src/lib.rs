//! SD / SDXL / SD3 / FLUX VAE decoders on rocm-vision.
