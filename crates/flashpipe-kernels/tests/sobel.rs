//! Sobel against a plain reference written here from the textbook definition (floating point,
//! explicit 3x3 loops, clamped coordinates) on the shared images, plus format errors.

mod common;

use common::{run_all_ways, shared_data};
use flashpipe_kernels::error::KernelErrorKind;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::sobel::{decode_gray_png, encode_gray_png, GrayImage};

/// The reference: for each pixel, convolve the clamped 3x3 neighbourhood with Gx and Gy.
fn reference_sobel(image: &GrayImage) -> Vec<u8> {
    const GX: [[f64; 3]; 3] = [[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]];
    const GY: [[f64; 3]; 3] = [[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]];
    let (width, height) = (image.width as i64, image.height as i64);
    let mut output = Vec::with_capacity(image.pixels.len());
    for y in 0..height {
        for x in 0..width {
            let (mut gx, mut gy) = (0.0, 0.0);
            for dy in -1..=1i64 {
                for dx in -1..=1i64 {
                    let sample_y = (y + dy).clamp(0, height - 1);
                    let sample_x = (x + dx).clamp(0, width - 1);
                    let value = f64::from(image.pixels[(sample_y * width + sample_x) as usize]);
                    gx += GX[(dy + 1) as usize][(dx + 1) as usize] * value;
                    gy += GY[(dy + 1) as usize][(dx + 1) as usize] * value;
                }
            }
            output.push((gx * gx + gy * gy).sqrt().round().min(255.0) as u8);
        }
    }
    output
}

fn check_image(image: &GrayImage) {
    let png_bytes = encode_gray_png(image).expect("encodes");
    let kernel = build_kernel("sobel", &[]).expect("no options");
    let (output, _) = run_all_ways(kernel.as_ref(), &png_bytes).expect("sobel runs");
    let edges = decode_gray_png(&output).expect("output is a grayscale PNG");
    assert_eq!((edges.width, edges.height), (image.width, image.height));
    assert_eq!(
        edges.pixels,
        reference_sobel(image),
        "{}x{} image",
        image.width,
        image.height
    );
}

#[test]
#[ignore = "data test: needs ../shared/data/images (scripts/test-data runs it)"]
fn sobel_matches_the_reference_on_every_shared_image() {
    let Some(folder) = shared_data("images") else {
        return;
    };
    let kernel = build_kernel("sobel", &[]).expect("no options");
    let mut checked = 0;
    for entry in std::fs::read_dir(folder).expect("images folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|extension| extension != "png") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("image");
        let image = decode_gray_png(&bytes).expect("shared images are 8-bit grayscale");
        let mut output = Vec::new();
        let plan = flashpipe_kernels::driver::DrivePlan::single(4096);
        flashpipe_kernels::driver::run_on_bytes(
            kernel.as_ref(),
            "image.png",
            &bytes,
            plan,
            &mut output,
        )
        .expect("runs");
        let edges = decode_gray_png(&output).expect("output decodes");
        assert_eq!(edges.pixels, reference_sobel(&image), "{}", path.display());
        checked += 1;
    }
    assert!(
        checked >= 9,
        "expected the nine shared images, found {checked}"
    );
}

#[test]
fn sobel_handles_tiny_and_synthetic_images() {
    for (width, height) in [(1, 1), (1, 5), (5, 1), (2, 2), (3, 3), (17, 9)] {
        let pixels = (0..width * height)
            .map(|index| ((index * 97) % 256) as u8)
            .collect();
        check_image(&GrayImage {
            width,
            height,
            pixels,
        });
    }
    let strong_edge = GrayImage {
        width: 4,
        height: 3,
        pixels: vec![0, 0, 255, 255, 0, 0, 255, 255, 0, 0, 255, 255],
    };
    check_image(&strong_edge);
}

#[test]
fn sobel_rejects_text_empty_truncated_and_colour_input() {
    let kernel = build_kernel("sobel", &[]).expect("no options");
    let text = b"this is a text file, not an image\n".repeat(10);
    let error = run_all_ways(kernel.as_ref(), &text).expect_err("text is refused");
    assert!(
        matches!(error.kind, KernelErrorKind::WrongFormat(_)),
        "{error}"
    );
    assert!(error.to_string().contains("not a PNG"), "{error}");
    let error = run_all_ways(kernel.as_ref(), &[]).expect_err("empty file is refused");
    assert!(
        matches!(error.kind, KernelErrorKind::WrongFormat(_)),
        "{error}"
    );
    let image = GrayImage {
        width: 8,
        height: 8,
        pixels: vec![7; 64],
    };
    let png_bytes = encode_gray_png(&image).expect("encodes");
    let error =
        run_all_ways(kernel.as_ref(), &png_bytes[..png_bytes.len() / 2]).expect_err("truncated");
    assert!(
        matches!(error.kind, KernelErrorKind::WrongFormat(_)),
        "{error}"
    );
    let mut rgb = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut rgb, 2, 2);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().expect("header");
        writer.write_image_data(&[9; 12]).expect("data");
    }
    let error = run_all_ways(kernel.as_ref(), &rgb).expect_err("colour is refused");
    assert!(error.to_string().contains("grayscale"), "{error}");
}
