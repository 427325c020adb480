//! Sobel edge detection on 8-bit grayscale PNG images (RAD's second kernel), PNG in, PNG out.
//!
//! The gradient uses the usual 3x3 kernels Gx = [-1 0 1; -2 0 2; -1 0 1] and Gy = its transpose;
//! border pixels replicate the nearest edge pixel; the output pixel is
//! `min(255, round(sqrt(Gx^2 + Gy^2)))`, computed with integer arithmetic. Only 8-bit grayscale
//! input is accepted (anything else is a clear error, never a silent conversion). Output PNGs use
//! the `png` crate's `Fast` compression (fdeflate), which keeps encoding from dominating.
//!
//! A PNG must be decoded as a whole, so the job gathers the file's chunks in order (schedule
//! `chunks-in-order`) and files run in parallel; the PNG signature is checked on the first chunk
//! so a wrong file fails before it is read to the end.

use std::io::Cursor;
use std::sync::Arc;

use crate::api::{Chunk, FileInfo, FileJob, Kernel, OutputSink, SequentialJob, Summary};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::KernelOptions;

/// The eight bytes every PNG file starts with.
pub const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// Largest image accepted (pixels), a guard against decompression bombs.
pub const MAX_PIXEL_COUNT: u64 = 1 << 28;

/// A grayscale image, one byte per pixel, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrayImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width * height` pixels.
    pub pixels: Vec<u8>,
}

/// Decodes an 8-bit grayscale PNG; any other format is a [`KernelErrorKind::WrongFormat`].
pub fn decode_gray_png(bytes: &[u8]) -> Result<GrayImage, KernelErrorKind> {
    if !bytes.starts_with(&PNG_SIGNATURE) {
        return Err(KernelErrorKind::WrongFormat(
            "not a PNG file (bad signature)".into(),
        ));
    }
    let limits = png::Limits {
        bytes: MAX_PIXEL_COUNT as usize,
    };
    let decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    let bad_png =
        |error: png::DecodingError| KernelErrorKind::WrongFormat(format!("bad PNG: {error}"));
    let mut reader = decoder.read_info().map_err(bad_png)?;
    let info = reader.info();
    if info.color_type != png::ColorType::Grayscale || info.bit_depth != png::BitDepth::Eight {
        return Err(KernelErrorKind::WrongFormat(format!(
            "Sobel takes 8-bit grayscale PNG; this one is {} at {} bits per sample (convert it first, e.g. `convert IN.png -colorspace Gray -depth 8 OUT.png`)",
            colour_name(info.color_type),
            info.bit_depth as u8
        )));
    }
    let (width, height) = (info.width as usize, info.height as usize);
    let buffer_size = reader
        .output_buffer_size()
        .ok_or_else(|| KernelErrorKind::WrongFormat("image too large".into()))?;
    let mut pixels = vec![0u8; buffer_size];
    let frame = reader.next_frame(&mut pixels).map_err(bad_png)?;
    pixels.truncate(frame.buffer_size());
    if pixels.len() != width * height {
        return Err(KernelErrorKind::WrongFormat(format!(
            "decoded {} bytes for {width}x{height} pixels",
            pixels.len()
        )));
    }
    Ok(GrayImage {
        width,
        height,
        pixels,
    })
}

/// Encodes an 8-bit grayscale PNG.
pub fn encode_gray_png(image: &GrayImage) -> Result<Vec<u8>, KernelErrorKind> {
    assert_eq!(
        image.pixels.len(),
        image.width * image.height,
        "image buffer matches its size"
    );
    let mut output = Vec::new();
    let mut encoder = png::Encoder::new(&mut output, image.width as u32, image.height as u32);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let encode_error = |error: png::EncodingError| {
        KernelErrorKind::Internal(format!("PNG encoding failed: {error}"))
    };
    let mut writer = encoder.write_header().map_err(encode_error)?;
    writer
        .write_image_data(&image.pixels)
        .map_err(encode_error)?;
    writer.finish().map_err(encode_error)?;
    Ok(output)
}

/// `round(sqrt(value))` in integers, capped at 255.
fn rounded_magnitude(value: u32) -> u8 {
    let root = value.isqrt();
    let rounded = if value - root * root > root {
        root + 1
    } else {
        root
    };
    rounded.min(255) as u8
}

/// The Sobel gradient magnitude of `image` (same size; edges replicated).
pub fn sobel(image: &GrayImage) -> GrayImage {
    let (width, height) = (image.width, image.height);
    let mut output = vec![0u8; width * height];
    if width == 0 || height == 0 {
        return GrayImage {
            width,
            height,
            pixels: output,
        };
    }
    for y in 0..height {
        let row_above = &image.pixels[y.saturating_sub(1) * width..][..width];
        let row = &image.pixels[y * width..][..width];
        let row_below = &image.pixels[(y + 1).min(height - 1) * width..][..width];
        let output_row = &mut output[y * width..][..width];
        for (x, output_pixel) in output_row.iter_mut().enumerate() {
            let left = x.saturating_sub(1);
            let right = (x + 1).min(width - 1);
            let pixel = |row: &[u8], column: usize| i32::from(row[column]);
            let gradient_x =
                (pixel(row_above, right) + 2 * pixel(row, right) + pixel(row_below, right))
                    - (pixel(row_above, left) + 2 * pixel(row, left) + pixel(row_below, left));
            let gradient_y =
                (pixel(row_below, left) + 2 * pixel(row_below, x) + pixel(row_below, right))
                    - (pixel(row_above, left) + 2 * pixel(row_above, x) + pixel(row_above, right));
            *output_pixel =
                rounded_magnitude((gradient_x * gradient_x + gradient_y * gradient_y) as u32);
        }
    }
    GrayImage {
        width,
        height,
        pixels: output,
    }
}

/// Sobel over PNG files.
#[derive(Debug, Default)]
pub struct SobelKernel;

impl SobelKernel {
    /// Builds from (empty) options.
    pub fn from_options(_options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        Ok(Arc::new(Self))
    }
}

struct SobelJob {
    file: FileInfo,
    gathered: Vec<u8>,
}

impl SequentialJob for SobelJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let signature_end = PNG_SIGNATURE
            .len()
            .min(self.gathered.len() + chunk.data.len());
        self.gathered.extend_from_slice(chunk.data);
        if self.gathered[..signature_end] != PNG_SIGNATURE[..signature_end] {
            return Err(self.file.error_at(
                0,
                KernelErrorKind::WrongFormat("not a PNG file (bad signature)".into()),
            ));
        }
        Ok(())
    }

    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let located = |kind| self.file.error_at(0, kind);
        let image = decode_gray_png(&self.gathered).map_err(located)?;
        let edges = sobel(&image);
        let encoded = encode_gray_png(&edges).map_err(located)?;
        sink.write_output(&encoded)?;
        Ok(Summary::Stream {
            output_bytes: encoded.len() as u64,
        })
    }
}

impl Kernel for SobelKernel {
    fn name(&self) -> &'static str {
        "sobel"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Sequential(Box::new(SobelJob {
            file: file.clone(),
            gathered: Vec::with_capacity(file.size_bytes.min(1 << 30) as usize),
        })))
    }
}

/// A PNG colour type as its specification names it.
fn colour_name(colour: png::ColorType) -> &'static str {
    match colour {
        png::ColorType::Grayscale => "grayscale",
        png::ColorType::Rgb => "RGB",
        png::ColorType::Indexed => "indexed colour",
        png::ColorType::GrayscaleAlpha => "grayscale with alpha",
        png::ColorType::Rgba => "RGBA",
    }
}
