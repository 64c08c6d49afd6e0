//! Screenshots: decoding `screencap -p` PNGs, blacking out masked elements, box-filter
//! downscaling for an LLM, re-encoding.
use droidmesh_proto::v1::{Bounds, Screenshot};

use crate::error::{DeviceError, Result};

/// Fits a PNG into `max_side` (0: unchanged). Returns the PNG sent to the caller with its size
/// and the factors that map image coordinates back to device pixels.
pub fn fit_png(png_bytes: &[u8], max_side: u32) -> Result<Screenshot> {
    fit_png_masked(png_bytes, max_side, &[])
}

/// [`fit_png`] with every rectangle of `regions` (screen pixels, as a UI dump gives bounds)
/// painted black before anything else is done with the pixels.
pub fn fit_png_masked(png_bytes: &[u8], max_side: u32, regions: &[Bounds]) -> Result<Screenshot> {
    let (w, h, mut rgb) = decode_rgb(png_bytes)?;
    black_out(&mut rgb, w, h, regions);
    let longest = w.max(h);
    if max_side == 0 || longest <= max_side {
        return Ok(Screenshot {
            png: if regions.is_empty() {
                png_bytes.to_vec()
            } else {
                encode_rgb(&rgb, w, h)?
            },
            width: w,
            height: h,
            scale_x: 1.0,
            scale_y: 1.0,
        });
    }
    let ratio = f64::from(max_side) / f64::from(longest);
    let dw = ((f64::from(w) * ratio).round() as u32).clamp(1, max_side);
    let dh = ((f64::from(h) * ratio).round() as u32).clamp(1, max_side);
    let small = box_resize(&rgb, w, h, dw, dh);
    Ok(Screenshot {
        png: encode_rgb(&small, dw, dh)?,
        width: dw,
        height: dh,
        scale_x: f64::from(w) / f64::from(dw),
        scale_y: f64::from(h) / f64::from(dh),
    })
}

/// Paints each of `regions` (clipped to the image) black in `rgb`, a `w` x `h` image.
pub fn black_out(rgb: &mut [u8], w: u32, h: u32, regions: &[Bounds]) {
    let clip = |v: i32, max: u32| {
        usize::try_from(v.clamp(0, i32::try_from(max).unwrap_or(i32::MAX))).unwrap_or(0)
    };
    let width = w as usize;
    for b in regions {
        let (x0, x1) = (clip(b.left, w), clip(b.right, w));
        let (y0, y1) = (clip(b.top, h), clip(b.bottom, h));
        if x1 <= x0 {
            continue;
        }
        for y in y0..y1 {
            if let Some(row) = rgb.get_mut((y * width + x0) * 3..(y * width + x1) * 3) {
                row.fill(0);
            }
        }
    }
}

/// Decodes any PNG into 8-bit RGB (alpha dropped: screenshots are opaque).
pub fn decode_rgb(png_bytes: &[u8]) -> Result<(u32, u32, Vec<u8>)> {
    let bad = |e: &dyn std::fmt::Display| {
        DeviceError::Image(format!("screencap output is not a usable png: {e}"))
    };
    let mut decoder = png::Decoder::new(png_bytes);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| bad(&e))?;
    let mut buf = vec![0u8; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).map_err(|e| bad(&e))?;
    buf.truncate(info.buffer_size());
    let (w, h) = (info.width, info.height);
    let px = (w as usize) * (h as usize);
    let rgb = match info.color_type {
        png::ColorType::Rgb => buf,
        png::ColorType::Rgba => buf
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        png::ColorType::Grayscale => buf.iter().flat_map(|&g| [g, g, g]).collect(),
        png::ColorType::GrayscaleAlpha => buf
            .chunks_exact(2)
            .flat_map(|p| [p[0], p[0], p[0]])
            .collect(),
        png::ColorType::Indexed => return Err(bad(&"palette was not expanded")),
    };
    if rgb.len() != px * 3 {
        return Err(bad(&format!(
            "expected {} rgb bytes, decoded {}",
            px * 3,
            rgb.len()
        )));
    }
    Ok((w, h, rgb))
}

/// Encodes RGB pixels as PNG with fast compression.
pub fn encode_rgb(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>> {
    let err = |e: png::EncodingError| DeviceError::Image(format!("png encoding failed: {e}"));
    let mut out = Vec::with_capacity(rgb.len() / 4);
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(out)
}

/// Area-averaging resize: each output pixel is the mean of the source pixels it covers.
pub fn box_resize(src: &[u8], w: u32, h: u32, dw: u32, dh: u32) -> Vec<u8> {
    let (w, h, dw, dh) = (
        w as usize,
        h as usize,
        dw.max(1) as usize,
        dh.max(1) as usize,
    );
    let span = |i: usize, n: usize, dn: usize| {
        let a = i * n / dn;
        let b = ((i + 1) * n / dn).max(a + 1).min(n);
        (a, b)
    };
    let xs: Vec<(usize, usize)> = (0..dw).map(|x| span(x, w, dw)).collect();
    let mut out = vec![0u8; dw * dh * 3];
    let mut acc = vec![0u32; dw * 3];
    for y in 0..dh {
        let (y0, y1) = span(y, h, dh);
        acc.iter_mut().for_each(|a| *a = 0);
        for sy in y0..y1 {
            let row = &src[sy * w * 3..(sy + 1) * w * 3];
            for (x, &(x0, x1)) in xs.iter().enumerate() {
                let (mut r, mut g, mut b) = (0u32, 0u32, 0u32);
                for p in row[x0 * 3..x1 * 3].chunks_exact(3) {
                    r += u32::from(p[0]);
                    g += u32::from(p[1]);
                    b += u32::from(p[2]);
                }
                acc[x * 3] += r;
                acc[x * 3 + 1] += g;
                acc[x * 3 + 2] += b;
            }
        }
        let rows = y1 - y0;
        for (x, &(x0, x1)) in xs.iter().enumerate() {
            let n = u32::try_from(rows * (x1 - x0)).unwrap_or(u32::MAX).max(1);
            for c in 0..3 {
                out[(y * dw + x) * 3 + c] = u8::try_from(acc[x * 3 + c] / n).unwrap_or(u8::MAX);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_png(w: u32, h: u32) -> Vec<u8> {
        let mut rgb = Vec::new();
        for y in 0..h {
            for x in 0..w {
                rgb.extend_from_slice(&[if x < w / 2 { 255 } else { 0 }, (y % 256) as u8, 7]);
            }
        }
        encode_rgb(&rgb, w, h).unwrap()
    }

    #[test]
    fn downscale_keeps_aspect_and_reports_scale() {
        let png = test_png(1080, 2400);
        let s = fit_png(&png, 1024).unwrap();
        assert_eq!((s.width, s.height), (461, 1024));
        assert!((s.scale_y - 2400.0 / 1024.0).abs() < 1e-9);
        assert!((s.scale_x - 1080.0 / 461.0).abs() < 1e-9);
        let (w, h, rgb) = decode_rgb(&s.png).unwrap();
        assert_eq!((w, h), (461, 1024));
        // Left half stays red, right half black.
        assert_eq!(rgb[0], 255);
        assert_eq!(rgb[(460) * 3], 0);
    }

    #[test]
    fn small_images_and_zero_are_unchanged() {
        let png = test_png(100, 50);
        let s = fit_png(&png, 0).unwrap();
        assert_eq!((s.width, s.height, s.scale_x), (100, 50, 1.0));
        assert_eq!(s.png, png);
        assert_eq!(fit_png(&png, 200).unwrap().png, png);
    }

    #[test]
    fn regions_are_black_and_nothing_else_changes() {
        let png = test_png(100, 50);
        let region = Bounds {
            left: 10,
            top: 5,
            right: 30,
            bottom: 20,
        };
        // One region reaching past the image is clipped to it.
        let past = Bounds {
            left: 90,
            top: 40,
            right: 200,
            bottom: 90,
        };
        let s = fit_png_masked(&png, 0, &[region, past]).unwrap();
        let (_, _, before) = decode_rgb(&png).unwrap();
        let (w, h, after) = decode_rgb(&s.png).unwrap();
        assert_eq!((w, h), (100, 50));
        let inside =
            |b: &Bounds, x: i32, y: i32| x >= b.left && x < b.right && y >= b.top && y < b.bottom;
        for y in 0..50 {
            for x in 0..100 {
                let i = ((y * 100 + x) * 3) as usize;
                if inside(&region, x, y) || inside(&past, x, y) {
                    assert_eq!(after[i..i + 3], [0, 0, 0], "({x}, {y})");
                } else {
                    assert_eq!(after[i..i + 3], before[i..i + 3], "({x}, {y})");
                }
            }
        }
    }

    #[test]
    fn box_filter_averages() {
        let src = [0, 0, 0, 255, 255, 255, 0, 0, 0, 255, 255, 255];
        assert_eq!(box_resize(&src, 2, 2, 1, 1), vec![127, 127, 127]);
    }

    #[test]
    fn garbage_is_an_image_error() {
        for bytes in [&b""[..], b"\x89PNG\r\n\x1a\n", b"not a png at all"] {
            assert!(matches!(fit_png(bytes, 512), Err(DeviceError::Image(_))));
        }
        let png = test_png(20, 20);
        assert!(fit_png(&png[..png.len() / 2], 8).is_err());
    }
}
