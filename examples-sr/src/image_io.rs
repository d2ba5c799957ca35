//! Images in and out: decoding through the `image` crate (PNG 8/16-bit, JPEG, WebP), the
//! interleaved RGB/RGBA buffers the upscaler works on, and encoding to a partial file
//! (`cli_support::partial`: removed on a signal) renamed over the destination only once it
//! is complete. Grey images are read as RGB (the model's input) and written back as grey.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageBuffer, ImageEncoder};

use crate::Error;

/// Sample storage of an [`Image`]: interleaved channels, rows top to bottom.
#[derive(Clone, Debug, PartialEq)]
pub enum Pixels {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

/// An RGB (3 channels) or RGBA (4 channels) image of 8- or 16-bit samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub pixels: Pixels,
    /// Read from a grey (or grey + alpha) file, its grey level replicated to R, G and B:
    /// [`save`] writes it as grey again (the luma of R, G, B), and the upscaler's output
    /// of it is grey too.
    pub grey: bool,
}

impl Image {
    /// An image from interleaved 8-bit samples; `channels` is 3 or 4.
    pub fn from_u8(width: usize, height: usize, channels: usize, data: Vec<u8>) -> Result<Image, Error> {
        Self::check(width, height, channels, data.len())?;
        Ok(Image { width, height, channels, pixels: Pixels::U8(data), grey: false })
    }

    /// An image from interleaved 16-bit samples; `channels` is 3 or 4.
    pub fn from_u16(width: usize, height: usize, channels: usize, data: Vec<u16>) -> Result<Image, Error> {
        Self::check(width, height, channels, data.len())?;
        Ok(Image { width, height, channels, pixels: Pixels::U16(data), grey: false })
    }

    fn check(width: usize, height: usize, channels: usize, len: usize) -> Result<(), Error> {
        if !(channels == 3 || channels == 4) {
            return Err(Error::Input(format!("{channels} channels: only RGB (3) and RGBA (4) images are supported")));
        }
        if width == 0 || height == 0 {
            return Err(Error::Input(format!("empty image ({width}x{height})")));
        }
        if width.checked_mul(height).and_then(|n| n.checked_mul(channels)) != Some(len) {
            return Err(Error::Input(format!("{len} samples do not make a {width}x{height}x{channels} image")));
        }
        Ok(())
    }

    /// The same image marked as grey ([`Image::grey`]).
    pub fn into_grey(self) -> Image {
        Image { grey: true, ..self }
    }

    /// 8 or 16.
    pub fn bit_depth(&self) -> u32 {
        match self.pixels {
            Pixels::U8(_) => 8,
            Pixels::U16(_) => 16,
        }
    }

    /// The largest sample value: 255 or 65535.
    pub fn max_value(&self) -> f32 {
        match self.pixels {
            Pixels::U8(_) => 255.0,
            Pixels::U16(_) => 65535.0,
        }
    }

    pub fn has_alpha(&self) -> bool {
        self.channels == 4
    }

    /// Sample `i` (interleaved index) as f32, unscaled.
    #[inline]
    pub fn sample(&self, i: usize) -> f32 {
        match &self.pixels {
            Pixels::U8(v) => v[i] as f32,
            Pixels::U16(v) => v[i] as f32,
        }
    }

    /// The same image with 8-bit samples (16-bit values rounded to the nearest 8-bit one).
    pub fn to_u8(&self) -> Image {
        match &self.pixels {
            Pixels::U8(_) => self.clone(),
            Pixels::U16(v) => Image {
                pixels: Pixels::U8(v.iter().map(|&x| ((x as u32 * 255 + 32767) / 65535) as u8).collect()),
                ..*self
            },
        }
    }

    /// The same image without its alpha channel.
    pub fn without_alpha(&self) -> Image {
        if self.channels == 3 {
            return self.clone();
        }
        fn rgb<T: Copy>(v: &[T]) -> Vec<T> {
            v.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect()
        }
        let pixels = match &self.pixels {
            Pixels::U8(v) => Pixels::U8(rgb(v)),
            Pixels::U16(v) => Pixels::U16(rgb(v)),
        };
        Image { channels: 3, pixels, ..*self }
    }
}

/// Output file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// 8- or 16-bit, with alpha.
    Png,
    /// 8-bit, no alpha (quality 95).
    Jpeg,
    /// 8-bit lossless, with alpha.
    Webp,
}

impl Format {
    /// From a file name's extension (`png`, `jpg`/`jpeg`, `webp`; any case).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Format::from_name(&ext)
    }

    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "png" => Some(Format::Png),
            "jpg" | "jpeg" => Some(Format::Jpeg),
            "webp" => Some(Format::Webp),
            _ => None,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Jpeg => "jpg",
            Format::Webp => "webp",
        }
    }
}

/// Whether `path` has an extension this tool reads.
pub fn is_supported_input(path: &Path) -> bool {
    Format::from_path(path).is_some()
}

/// Decodes an image file (format from its content). Grey images become RGB, grey+alpha
/// RGBA (marked [`Image::grey`]); 16-bit and float images are read as 16-bit, everything
/// else as 8-bit.
pub fn load(path: &Path) -> Result<Image, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    decode(&bytes, path)
}

/// [`load`] of a file's bytes already in memory; `path` names it in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Image, Error> {
    let bad = |msg: String| Error::Image { path: path.to_path_buf(), msg };
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes));
    // The extension's format, unless the content says otherwise (as ImageReader::open).
    if let Ok(format) = image::ImageFormat::from_path(path) {
        reader.set_format(format);
    }
    let mut reader = reader.with_guessed_format().map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    // No allocation beyond what the file's length justifies (crate::decode_limits).
    reader.limits(crate::decode_limits::limits(bytes.len() as u64));
    if reader.format().is_none() {
        return Err(bad("not a recognised image format (PNG, JPEG and WebP are supported)".into()));
    }
    let img = reader.decode().map_err(|e| bad(format!("cannot decode: {e}")))?;
    from_dynamic(img).map_err(|e| bad(e.to_string()))
}

fn from_dynamic(img: DynamicImage) -> Result<Image, Error> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let alpha = img.color().has_alpha();
    let sixteen = img.color().bytes_per_pixel() / img.color().channel_count() > 1;
    let grey = !img.color().has_color();
    let rgb = match (sixteen, alpha) {
        (false, false) => Image::from_u8(w, h, 3, img.into_rgb8().into_raw()),
        (false, true) => Image::from_u8(w, h, 4, img.into_rgba8().into_raw()),
        (true, false) => Image::from_u16(w, h, 3, img.into_rgb16().into_raw()),
        (true, true) => Image::from_u16(w, h, 4, img.into_rgba16().into_raw()),
    }?;
    Ok(if grey { rgb.into_grey() } else { rgb })
}

/// The image as the `image` crate's; a [grey](Image::grey) one as L / LA (the luma of R,
/// G, B, by the `image` crate's conversion), at the same bit depth.
fn to_dynamic(img: &Image) -> Result<DynamicImage, Error> {
    let (w, h) = (img.width as u32, img.height as u32);
    let wrong = || Error::Internal(format!("{}x{}x{} buffer of the wrong size", img.width, img.height, img.channels));
    let rgb = match (&img.pixels, img.channels) {
        (Pixels::U8(v), 3) => DynamicImage::ImageRgb8(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U8(v), _) => DynamicImage::ImageRgba8(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U16(v), 3) => DynamicImage::ImageRgb16(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U16(v), _) => DynamicImage::ImageRgba16(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
    };
    if !img.grey {
        return Ok(rgb);
    }
    Ok(match (&img.pixels, img.channels) {
        (Pixels::U8(_), 3) => DynamicImage::ImageLuma8(rgb.into_luma8()),
        (Pixels::U8(_), _) => DynamicImage::ImageLumaA8(rgb.into_luma_alpha8()),
        (Pixels::U16(_), 3) => DynamicImage::ImageLuma16(rgb.into_luma16()),
        (Pixels::U16(_), _) => DynamicImage::ImageLumaA16(rgb.into_luma_alpha16()),
    })
}

/// The temporary file an output is written to before the rename: hidden, next to the
/// destination (same file system, so the rename is atomic), unique to this process
/// (`.NAME.partial-PID`).
pub fn temp_path_for(dest: &Path) -> PathBuf {
    cli_support::partial::partial_path(dest)
}

/// Encodes `img` as `format` into a partial file beside `dest`, then renames it to
/// `dest`: an interrupted or failed write never leaves a partial file at `dest`, and the
/// CLI's signal handler removes the partial file ([`cli_support::partial`]). JPEG and WebP
/// get 8-bit samples; JPEG drops the alpha channel (the format has none). A [grey]
/// (Image::grey) image is written as grey (L or LA).
pub fn save(img: &Image, dest: &Path, format: Format) -> Result<(), Error> {
    save_as(img, dest, format, true)
}

/// [`save`]; unless `replace`, a `dest` that exists when the file is complete (it appeared
/// while the image was computed) is left alone and the result is an error saying so.
pub fn save_as(img: &Image, dest: &Path, format: Format, replace: bool) -> Result<(), Error> {
    let io = |source| Error::Io { path: dest.to_path_buf(), source };
    let mut partial = cli_support::partial::Partial::create(dest).map_err(io)?;
    write_file(img, partial.file(), dest, format)?;
    partial.commit(dest, replace).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::Image {
            path: dest.to_path_buf(),
            msg: "appeared while upscaling and was not replaced (use --force to replace it)".into(),
        },
        _ => io(e),
    })
}

fn write_file(img: &Image, file: &mut std::fs::File, path: &Path, format: Format) -> Result<(), Error> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let enc = |e: image::ImageError| Error::Image { path: path.to_path_buf(), msg: format!("cannot encode: {e}") };
    let mut out = BufWriter::new(file);
    match format {
        Format::Png => {
            to_dynamic(img)?.write_to(&mut out, image::ImageFormat::Png).map_err(enc)?;
        }
        Format::Jpeg => {
            let d = to_dynamic(&img.to_u8().without_alpha())?;
            let (w, h) = (d.width(), d.height());
            let color = if img.grey { image::ExtendedColorType::L8 } else { image::ExtendedColorType::Rgb8 };
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 95)
                .write_image(d.as_bytes(), w, h, color)
                .map_err(enc)?;
        }
        Format::Webp => {
            let d = to_dynamic(&img.to_u8())?;
            let (w, h) = (d.width(), d.height());
            let color = match (img.grey, img.channels) {
                (false, 3) => image::ExtendedColorType::Rgb8,
                (false, _) => image::ExtendedColorType::Rgba8,
                (true, 3) => image::ExtendedColorType::L8,
                (true, _) => image::ExtendedColorType::La8,
            };
            image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(d.as_bytes(), w, h, color)
                .map_err(enc)?;
        }
    }
    use std::io::Write;
    out.flush().map_err(io)?;
    Ok(())
}
