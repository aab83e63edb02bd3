"""The format walkers under the upload's screening, on files other encoders made: a progressive
JPEG's scans all survive stripping, a rotated photo still shows upright, and the LZW decoder
reads what libtiff wrote (Pillow's TIFF LZW is PDF's LZW with EarlyChange 1)."""

import io

from PIL import Image, ImageOps

from labs import imagemeta, pdfscan
from tests.labs import samples


def test_a_progressive_jpeg_keeps_every_scan_and_loses_its_exif():
    out = io.BytesIO()
    samples.picture(200, 120).save(
        out, "JPEG", quality=85, progressive=True, exif=samples.exif_with_gps(1)
    )
    original = out.getvalue()
    assert original.count(b"\xff\xda") > 1  # several scans, with tables between them

    cleaned = imagemeta.jpeg_clean(original)

    assert cleaned.removed == ["exif"]
    assert cleaned.data.count(b"\xff\xda") == original.count(b"\xff\xda")
    assert (cleaned.width, cleaned.height) == (200, 120)
    before, after = Image.open(io.BytesIO(original)), Image.open(io.BytesIO(cleaned.data))
    assert after.tobytes() == before.tobytes()


def test_a_rotated_photo_still_shows_upright_after_stripping():
    original = samples.jpeg_with_gps(orientation=8)
    cleaned = imagemeta.jpeg_clean(original).data
    upright = ImageOps.exif_transpose(Image.open(io.BytesIO(original)))
    assert ImageOps.exif_transpose(Image.open(io.BytesIO(cleaned))).tobytes() == upright.tobytes()
    assert upright.size == (48, 64)


def test_the_lzw_decoder_reads_what_libtiff_wrote():
    image = samples.picture(300, 200)
    out = io.BytesIO()
    image.save(out, "TIFF", compression="tiff_lzw")
    tiff = Image.open(io.BytesIO(out.getvalue()))
    raw = out.getvalue()
    strips = zip(tiff.tag_v2[273], tiff.tag_v2[279], strict=True)  # offsets, byte counts
    decoded = b"".join(b"".join(pdfscan._lzw([raw[at : at + size]])) for at, size in strips)
    assert decoded == image.tobytes()


def test_a_pdf_report_is_checked_stream_by_stream():
    report = pdfscan.pdf_check(samples.pdf_report(), max_decoded=1 << 20, max_pixels=10**8)
    assert report.streams == 1
    assert report.decoded_bytes == len(samples.CONTENT)
