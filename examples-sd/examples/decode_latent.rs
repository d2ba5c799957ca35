//! Decode a latent held in a candle tensor to an image, in about ten lines.
//!
//! ```sh
//! cargo run -p examples-sd --example decode_latent                 # the tiny test VAE (CPU, a second)
//! cargo run -p examples-sd --example decode_latent -- vae.safetensors sdxl out.png
//! ```
//!
//! With no arguments it uses the reduced SD VAE of the fixtures (`fixtures/`), so it runs
//! anywhere in about a second. Only `rocm-vision` (which re-exports candle) and
//! `examples-sd` are needed.

use examples_sd::{Decoder, Model, VaeConfig, io};
use rocm_vision::prelude::*;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut args = std::env::args().skip(1);
    let vae = args.next().map_or(fixtures.join("sd_vae_diffusers.safetensors"), PathBuf::from);
    let config = match args.next() {
        Some(model) => model.parse::<Model>()?.config(),
        None => VaeConfig::from_diffusers_json(&fixtures.join("sd_config.json"))?,
    };
    let out = args.next().map_or(std::env::temp_dir().join("decode_latent.png"), PathBuf::from);

    // The ten lines: a device, the weights, the decoder, a latent from candle, the image.
    let (device, _) = Device::auto();
    let weights = Weights::open(&vae, &device)?;
    let decoder = Decoder::load(&weights, &config, DType::F32)?;
    let c = config.latent_channels;
    let latent = candle_core::Tensor::randn(0f32, 1.0, (1, c, 16, 16), &candle_core::Device::Cpu)?;
    let image = decoder.decode(&Tensor::from_candle(latent, &device)?, &mut |_, _| {})?;
    io::write_png(&image, &out, true)?;

    let v = image.to_vec::<f32>()?;
    let (lo, hi) = v.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    if v.iter().any(|x| !x.is_finite()) {
        return Err("the decoded image holds NaN or infinite values".into());
    }
    println!(
        "decoded {:?} on {device} to {:?} (values {lo:.3}..{hi:.3}): {}",
        [1, c, 16, 16],
        image.dims(),
        out.display()
    );
    Ok(())
}
