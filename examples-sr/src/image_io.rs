//! Images in and out: decoding through the `image` crate (PNG 8/16-bit, JPEG, WebP), the
//! interleaved RGB/RGBA buffers the upscaler works on, and encoding to a temporary file
//! renamed over the destination only once it is complete.

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
}

impl Image {
    /// An image from interleaved 8-bit samples; `channels` is 3 or 4.
    pub fn from_u8(width: usize, height: usize, channels: usize, data: Vec<u8>) -> Result<Image, Error> {
        Self::check(width, height, channels, data.len())?;
        Ok(Image { width, height, channels, pixels: Pixels::U8(data) })
    }

    /// An image from interleaved 16-bit samples; `channels` is 3 or 4.
    pub fn from_u16(width: usize, height: usize, channels: usize, data: Vec<u16>) -> Result<Image, Error> {
        Self::check(width, height, channels, data.len())?;
        Ok(Image { width, height, channels, pixels: Pixels::U16(data) })
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
/// RGBA; 16-bit and float images are read as 16-bit, everything else as 8-bit.
pub fn load(path: &Path) -> Result<Image, Error> {
    let bad = |msg: String| Error::Image { path: path.to_path_buf(), msg };
    let reader = image::ImageReader::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let mut reader = reader.with_guessed_format().map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    // No allocation beyond what the file's length justifies (crate::decode_limits).
    let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    reader.limits(crate::decode_limits::limits(file_len));
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
    match (sixteen, alpha) {
        (false, false) => Image::from_u8(w, h, 3, img.into_rgb8().into_raw()),
        (false, true) => Image::from_u8(w, h, 4, img.into_rgba8().into_raw()),
        (true, false) => Image::from_u16(w, h, 3, img.into_rgb16().into_raw()),
        (true, true) => Image::from_u16(w, h, 4, img.into_rgba16().into_raw()),
    }
}

fn to_dynamic(img: &Image) -> Result<DynamicImage, Error> {
    let (w, h) = (img.width as u32, img.height as u32);
    let wrong = || Error::Internal(format!("{}x{}x{} buffer of the wrong size", img.width, img.height, img.channels));
    Ok(match (&img.pixels, img.channels) {
        (Pixels::U8(v), 3) => DynamicImage::ImageRgb8(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U8(v), _) => DynamicImage::ImageRgba8(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U16(v), 3) => DynamicImage::ImageRgb16(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
        (Pixels::U16(v), _) => DynamicImage::ImageRgba16(ImageBuffer::from_raw(w, h, v.clone()).ok_or_else(wrong)?),
    })
}

/// The temporary file an output is written to before the rename: hidden, next to the
/// destination (same file system, so the rename is atomic), unique to this process.
pub fn temp_path_for(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    dest.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Encodes `img` as `format` into a temporary file beside `dest`, then renames it to
/// `dest`: an interrupted or failed write never leaves a partial file at `dest`. JPEG and
/// WebP get 8-bit samples; JPEG drops the alpha channel (the format has none).
pub fn save(img: &Image, dest: &Path, format: Format) -> Result<(), Error> {
    let tmp = temp_path_for(dest);
    let result = write_file(img, &tmp, format)
        .and_then(|()| std::fs::rename(&tmp, dest).map_err(|source| Error::Io { path: dest.to_path_buf(), source }));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_file(img: &Image, path: &Path, format: Format) -> Result<(), Error> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let enc = |e: image::ImageError| Error::Image { path: path.to_path_buf(), msg: format!("cannot encode: {e}") };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = BufWriter::new(file);
    match format {
        Format::Png => {
            to_dynamic(img)?.write_to(&mut out, image::ImageFormat::Png).map_err(enc)?;
        }
        Format::Jpeg => {
            let rgb = img.to_u8().without_alpha();
            let Pixels::U8(data) = &rgb.pixels else { return Err(Error::Internal("8-bit conversion".into())) };
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 95)
                .write_image(data, rgb.width as u32, rgb.height as u32, image::ExtendedColorType::Rgb8)
                .map_err(enc)?;
        }
        Format::Webp => {
            let img8 = img.to_u8();
            let Pixels::U8(data) = &img8.pixels else { return Err(Error::Internal("8-bit conversion".into())) };
            let color =
                if img8.channels == 4 { image::ExtendedColorType::Rgba8 } else { image::ExtendedColorType::Rgb8 };
            image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(data, img8.width as u32, img8.height as u32, color)
                .map_err(enc)?;
        }
    }
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    drop(file);
    Ok(())
}
