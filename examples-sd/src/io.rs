//! Latents in and out (safetensors or .npy), images in (PNG, JPEG, WebP; the encoder's
//! input) and out (PNG).

use crate::error::{Result, SdError};
use rocm_vision::{DType, Device, Tensor, Weights};
use std::path::{Path, PathBuf};

/// Keys tried, in order, when a latents file holds several tensors and none was named.
pub const LATENT_KEYS: [&str; 4] = ["latents", "latent", "samples", "z"];

/// Loads latents as f32: a `.npy` array, or a tensor of a safetensors file (`key`, else the
/// only tensor, else the first of [`LATENT_KEYS`] present).
pub fn load_latents(path: &Path, key: Option<&str>, device: &Device) -> Result<Tensor> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let t = match ext.as_deref() {
        Some("npy") => {
            // Checked against the file's length before anything is allocated (crate::npy).
            let bytes = std::fs::read(path).map_err(|source| SdError::Io { path: path.to_path_buf(), source })?;
            let t = crate::npy::read(&bytes)
                .map_err(|e| SdError::Latents(format!("{}: cannot read .npy: {e}", path.display())))?;
            Tensor::from_candle(t, device)?
        }
        Some("safetensors") => {
            let w = Weights::open(path, device)?;
            // Said here, in terms of latents (the library's message speaks of model weights).
            let float = |name: &str| -> Result<String> {
                match w.info(name) {
                    Some((_, dt)) if !dt.is_float() => Err(SdError::Latents(format!(
                        "{}: tensor {name:?} has dtype {dt:?}; latents must be floating point (f32, f16, bf16 or f64)",
                        path.display()
                    ))),
                    _ => Ok(name.to_string()),
                }
            };
            let keys: Vec<&str> = w.keys().collect();
            let name = match key {
                Some(k) if w.contains(k) => k.to_string(),
                Some(k) => {
                    return Err(SdError::Latents(format!(
                        "{}: no tensor {k:?}; the file has {:?}",
                        path.display(),
                        &keys[..keys.len().min(10)]
                    )));
                }
                None if keys.len() == 1 => keys[0].to_string(),
                None => match LATENT_KEYS.iter().find(|k| w.contains(k)) {
                    Some(k) => k.to_string(),
                    None => {
                        return Err(SdError::Latents(format!(
                            "{}: {} tensors and none named {:?}; pick one with --latent-key (the file has {:?})",
                            path.display(),
                            keys.len(),
                            LATENT_KEYS,
                            &keys[..keys.len().min(10)]
                        )));
                    }
                },
            };
            w.get_unchecked_shape(&float(&name)?)?
        }
        _ => {
            return Err(SdError::Latents(format!("{}: expected a .safetensors or .npy file", path.display())));
        }
    };
    Ok(t.to_dtype(DType::F32)?)
}

/// Decoded bytes any image file may ask for (the rule of examples-sr's `decode_limits`:
/// 64 MiB, plus 1100 bytes per byte of file beyond it), so a small file that claims a
/// huge image fails before allocating it.
fn image_limits(file_len: u64) -> image::Limits {
    let mut l = image::Limits::default();
    l.max_alloc = Some((64u64 << 20).saturating_add(file_len.saturating_mul(1100)) / 2);
    l
}

/// Reads an image (PNG, JPEG or WebP, by content) as the encoder takes it: `[1, 3, H, W]`
/// f32 in [-1, 1], as diffusers' `VaeImageProcessor` makes it (`v / 255 · 2 − 1` per
/// 8-bit value, `v / 65535` for 16-bit images). Grey images become RGB; an alpha channel
/// is dropped (`.convert("RGB")`, as diffusers' `load_image`). Also returns whether the
/// file had an alpha channel.
pub fn load_image(path: &Path, device: &Device) -> Result<(Tensor, bool)> {
    let bad = |msg: String| SdError::Image { path: path.to_path_buf(), msg };
    let bytes = std::fs::read(path).map_err(|source| SdError::Io { path: path.to_path_buf(), source })?;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(&bytes));
    if let Ok(format) = image::ImageFormat::from_path(path) {
        reader.set_format(format);
    }
    let mut reader = reader.with_guessed_format().map_err(|source| SdError::Io { path: path.to_path_buf(), source })?;
    reader.limits(image_limits(bytes.len() as u64));
    if reader.format().is_none() {
        return Err(bad("not a recognised image format (PNG, JPEG and WebP are read)".into()));
    }
    let img = reader.decode().map_err(|e| bad(format!("cannot decode: {e}")))?;
    let alpha = img.color().has_alpha();
    let (w, h) = (img.width() as usize, img.height() as usize);
    let sixteen = img.color().bytes_per_pixel() / img.color().channel_count() > 1;
    // Interleaved values in [0, 1] (f32 arithmetic, as numpy's on a float32 array).
    let unit: Vec<f32> = if sixteen {
        img.into_rgb16().into_raw().into_iter().map(|v| v as f32 / 65535.0).collect()
    } else {
        img.into_rgb8().into_raw().into_iter().map(|v| v as f32 / 255.0).collect()
    };
    let mut planar = vec![0f32; 3 * h * w];
    for (i, px) in unit.chunks_exact(3).enumerate() {
        for c in 0..3 {
            planar[c * h * w + i] = 2.0 * px[c] - 1.0;
        }
    }
    Ok((Tensor::from_vec(planar, &[1, 3, h, w], device)?, alpha))
}

/// Fails, before any work, if `path` is not a `.safetensors` or `.npy` path in a writable
/// folder, or exists and `force` is off.
pub fn check_latents_output(path: &Path, force: bool) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("safetensors" | "npy")) {
        return Err(SdError::Output(format!(
            "{}: the latents are written as .safetensors or .npy (by the extension)",
            path.display()
        )));
    }
    let dir = parent_dir(path);
    if let Err(why) = cli_support::check_writable_dir(&dir) {
        return Err(SdError::Output(format!("{}: output folder {}: {why}", path.display(), dir.display())));
    }
    if path.is_dir() {
        return Err(SdError::Output(format!("{} is a directory", path.display())));
    }
    if path.exists() && !force {
        return Err(SdError::OutputExists { path: path.to_path_buf() });
    }
    Ok(())
}

/// Writes latents `[N, C, h, w]` as f32: a `.safetensors` file with the one tensor
/// `latents` (what [`load_latents`] and `sd-vae-decode` read back) or a `.npy` array,
/// through a partial file renamed into place (as [`write_png`]).
pub fn write_latents(latents: &Tensor, path: &Path, force: bool) -> Result<()> {
    check_latents_output(path, true)?;
    let t = latents.to_dtype(DType::F32)?;
    let npy = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    let io = |source| SdError::Io { path: path.to_path_buf(), source };
    let mut partial = cli_support::partial::Partial::create(path).map_err(io)?;
    if npy {
        let bytes = crate::npy::write_f32(t.dims(), &t.to_vec::<f32>()?);
        std::io::Write::write_all(partial.file(), &bytes).map_err(io)?;
    } else {
        // candle writes the file itself: over the (empty) partial file, renamed below.
        let map = std::collections::HashMap::from([("latents".to_string(), t.to_candle()?)]);
        candle_core::safetensors::save(&map, partial.path())?;
    }
    partial.commit(path, force).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => SdError::OutputExists { path: path.to_path_buf() },
        _ => io(e),
    })
}

/// The files a batch of `n` images is written to: `out` itself for one image, else
/// `<stem>_<i>.<ext>` next to it.
pub fn output_paths(out: &Path, n: usize) -> Vec<PathBuf> {
    if n == 1 {
        return vec![out.to_path_buf()];
    }
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = out.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    (0..n).map(|i| out.with_file_name(format!("{stem}_{i}{ext}"))).collect()
}

/// Fails, before any work, if an output is not a `.png` path in an existing directory,
/// or exists and `force` is off.
pub fn check_outputs(paths: &[PathBuf], force: bool) -> Result<()> {
    for p in paths {
        let ext = p.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if ext.as_deref() != Some("png") {
            return Err(SdError::Output(format!("{}: the output must be a .png file", p.display())));
        }
        if p.file_name().is_none() {
            return Err(SdError::Output(format!("{}: not a file path", p.display())));
        }
        let dir = parent_dir(p);
        if let Err(why) = cli_support::check_writable_dir(&dir) {
            return Err(SdError::Output(format!("{}: output folder {}: {why}", p.display(), dir.display())));
        }
        if p.is_dir() {
            return Err(SdError::Output(format!("{} is a directory", p.display())));
        }
        if p.exists() && !force {
            return Err(SdError::OutputExists { path: p.clone() });
        }
    }
    Ok(())
}

/// The folder of `p` (`.` for a bare file name).
pub fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// diffusers' image post-processing: `round(clamp(x / 2 + 0.5, 0, 1) · 255)` per value,
/// rounding half to even as numpy's `round` does; channel-planar in, interleaved out.
pub fn to_pixels(planar: &[f32], channels: usize, h: usize, w: usize) -> Vec<u8> {
    let mut out = vec![0u8; channels * h * w];
    for c in 0..channels {
        for (i, &x) in planar[c * h * w..(c + 1) * h * w].iter().enumerate() {
            let v = ((x / 2.0 + 0.5).clamp(0.0, 1.0) * 255.0).round_ties_even();
            // NaN casts to 0.
            out[i * channels + c] = v as u8;
        }
    }
    out
}

/// Writes one `[C, H, W]` or `[1, C, H, W]` image (C = 1, 3 or 4) in about [-1, 1] as a
/// PNG: to a partial file in the target directory (`.NAME.partial-PID`, removed on failure
/// and by the CLI's signal handler, `cli_support::partial`), then renamed into place, so a
/// failed or interrupted run never leaves a partial image under the requested name.
pub fn write_png(image: &Tensor, path: &Path, force: bool) -> Result<()> {
    let d = image.dims().to_vec();
    let (c, h, w) = match d[..] {
        [1, c, h, w] | [c, h, w] => (c, h, w),
        _ => return Err(SdError::Output(format!("an image must be [C, H, W], got {d:?}"))),
    };
    let color = match c {
        1 => image::ColorType::L8,
        3 => image::ColorType::Rgb8,
        4 => image::ColorType::Rgba8,
        _ => return Err(SdError::Output(format!("cannot write a {c}-channel image as PNG (1, 3 or 4)"))),
    };
    let (Ok(w32), Ok(h32)) = (u32::try_from(w), u32::try_from(h)) else {
        return Err(SdError::Output(format!("image {w}x{h} is too large for PNG")));
    };
    let pixels = to_pixels(&image.to_dtype(DType::F32)?.to_vec::<f32>()?, c, h, w);
    let io = |source| SdError::Io { path: path.to_path_buf(), source };
    let mut partial = cli_support::partial::Partial::create(path).map_err(io)?;
    let tmp = partial.path().to_path_buf();
    {
        let mut out = std::io::BufWriter::new(partial.file());
        image::write_buffer_with_format(&mut out, &pixels, w32, h32, color, image::ImageFormat::Png)
            .map_err(|e| SdError::Image { path: path.to_path_buf(), msg: format!("writing {}: {e}", tmp.display()) })?;
        std::io::Write::flush(&mut out).map_err(io)?;
    }
    // Not replaced without `force`, even if it appeared while decoding.
    partial.commit(path, force).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => SdError::OutputExists { path: path.to_path_buf() },
        _ => io(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_follow_diffusers_rounding() {
        // x = -1 → 0, 1 → 255, 0 → 127.5 → 128, out of range clamps, NaN → 0.
        let v = [-1.0f32, 1.0, 0.0, 5.0, -3.0, f32::NAN, -0.5, 0.1];
        assert_eq!(to_pixels(&v, 1, 1, 8), vec![0, 255, 128, 255, 0, 0, 64, 140]);
        // Planar to interleaved.
        assert_eq!(to_pixels(&[-1.0, 1.0, 1.0, -1.0], 2, 1, 2), vec![0, 255, 255, 0]);
    }

    #[test]
    fn batch_outputs_are_numbered() {
        let p = output_paths(Path::new("dir/out.png"), 3);
        assert_eq!(p, vec![PathBuf::from("dir/out_0.png"), "dir/out_1.png".into(), "dir/out_2.png".into()]);
        assert_eq!(output_paths(Path::new("out.png"), 1), vec![PathBuf::from("out.png")]);
    }
}
