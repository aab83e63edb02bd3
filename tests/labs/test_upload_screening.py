"""POST /v1/labs/upload screens what it stores and forwards: location and device metadata come
out of images without touching their pixels, images are refused above LAB_UPLOAD_MAX_PIXELS from
their header, and PDFs whose streams would decode past LAB_UPLOAD_MAX_PDF_DECODED_BYTES (or that
cannot be checked) are refused. Real files built in tests/labs/samples.py."""

import base64
import hashlib
import io
import struct

import pytest
from django.core.files.storage import default_storage
from PIL import Image

from labs.models import LabUpload
from tests.conftest import load_fixture
from tests.labs import samples
from tests.labs.helpers import run_workflows, upload

TERRA_PATH = "/v2/lab-reports"
MiB = 1024 * 1024


@pytest.fixture
def terra_accepts(terra):
    terra.on("POST", TERRA_PATH, (200, load_fixture("lab_reports_upload_response.json")))
    return terra


def stored(row: LabUpload) -> bytes:
    with default_storage.open(row.storage_key, "rb") as f:
        return f.read()


def forwarded(terra) -> bytes:
    (request,) = terra.calls("POST", TERRA_PATH)
    return request.read()


def jpeg_segments(data: bytes) -> list[tuple[int, bytes]]:
    """(marker, payload) of each segment before the first scan."""
    segments, pos = [], 2
    while data[pos + 1] != 0xDA:
        (length,) = struct.unpack_from(">H", data, pos + 2)
        segments.append((data[pos + 1], data[pos + 4 : pos + 2 + length]))
        pos += 2 + length
    return segments


def png_chunk_types(data: bytes) -> list[bytes]:
    kinds, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kinds.append(data[pos + 4 : pos + 8])
        pos += 12 + length
    return kinds


def scan_data(jpeg: bytes) -> bytes:
    """Everything from the first start-of-scan marker: the compressed pixels."""
    return jpeg[jpeg.index(b"\xff\xda") :]


def test_a_jpegs_gps_and_device_exif_is_stripped_before_it_is_stored_and_forwarded(
    user_api, terra_accepts
):
    original = samples.jpeg_with_gps(orientation=6)
    assert b"iPhone 15 Pro" in original and b"GPSLatitude" in original  # the sample is real

    response = upload(user_api, original, name="photo.jpg", mime="image/jpeg")

    assert response.status_code == 202, response.json()
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    kept = stored(row)
    for secret in (b"iPhone", b"Apple", b"GPSLatitude", b"Paris clinic", b"2026:03:14"):
        assert secret not in kept
    assert set(row.metadata_removed) == {"exif", "xmp", "comment"}
    exif = Image.open(io.BytesIO(kept)).getexif()
    assert dict(exif) == {samples.ORIENTATION: 6}  # only the orientation survives
    assert exif.get_ifd(samples.GPS_IFD) == {}
    # Lossless: the compressed pixels are the same bytes, so they decode to the same pixels.
    assert scan_data(kept) == scan_data(original)
    assert Image.open(io.BytesIO(kept)).tobytes() == Image.open(io.BytesIO(original)).tobytes()
    assert row.size == len(kept) and row.sha256 == hashlib.sha256(kept).hexdigest()
    run_workflows()
    assert b"Content-Type: image/jpeg\r\n\r\n" + kept + b"\r\n" in forwarded(terra_accepts)
    assert b"iPhone" not in forwarded(terra_accepts)


def test_a_jpeg_keeps_the_segments_its_decoder_needs(user_api, terra_accepts):
    original = samples.jpeg_with_gps(orientation=1)
    response = upload(user_api, original, name="photo.jpg", mime="image/jpeg")
    kept = stored(LabUpload.objects.get(pk=response.json()["upload_id"]))
    markers = [marker for marker, _ in jpeg_segments(kept)]
    assert markers[0] == 0xE0  # JFIF
    assert 0xE1 not in markers  # orientation 1 (upright) needs no EXIF at all
    # quantization tables, frame and Huffman tables are kept byte for byte
    for marker in (0xDB, 0xC0, 0xC4):
        assert [p for m, p in jpeg_segments(kept) if m == marker] == [
            p for m, p in jpeg_segments(original) if m == marker
        ]


def test_png_text_time_and_exif_chunks_are_stripped_losslessly(user_api, terra_accepts):
    original = samples.png_with_metadata()
    assert {b"tEXt", b"iTXt", b"zTXt", b"tIME", b"eXIf"} <= set(png_chunk_types(original))

    response = upload(user_api, original, name="scan.png", mime="image/png")

    assert response.status_code == 202, response.json()
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    kept = stored(row)
    assert png_chunk_types(kept) == [b"IHDR", b"IDAT", b"IEND"]
    assert set(row.metadata_removed) == {"tEXt", "iTXt", "zTXt", "tIME", "eXIf"}
    assert b"Dr. Example" not in kept and b"48.8582" not in kept
    assert Image.open(io.BytesIO(kept)).tobytes() == Image.open(io.BytesIO(original)).tobytes()
    run_workflows()
    assert kept in forwarded(terra_accepts)


@pytest.mark.parametrize("content", [samples.png_plain(), samples.jpeg_plain()])
def test_an_image_without_metadata_is_stored_byte_for_byte(user_api, terra_accepts, content):
    response = upload(user_api, content, name="scan", mime="image/png")
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert stored(row) == content
    assert row.metadata_removed == []


def test_the_upload_api_says_what_metadata_was_removed(user_api, terra_accepts):
    upload_id = upload(user_api, samples.jpeg_with_gps(), mime="image/jpeg").json()["upload_id"]
    detail = user_api.get(f"/v1/labs/uploads/{upload_id}").json()
    assert set(detail["metadata_removed"]) == {"exif", "xmp", "comment"}


def assert_refused(response, status: int, code: str, terra) -> dict:
    assert response.status_code == status, response.json()
    body = response.json()
    assert body["code"] == code and body["message"]
    assert LabUpload.objects.count() == 0
    assert not default_storage.exists("lab-uploads/alice")
    assert terra.calls("POST", TERRA_PATH) == []
    return body


def test_a_400_megapixel_png_is_refused_from_its_header(user_api, terra):
    response = upload(user_api, samples.png_400_megapixels(), name="huge.png", mime="image/png")
    body = assert_refused(response, 422, "image_too_large", terra)
    assert (body["width"], body["height"]) == (20_000, 20_000)
    assert body["max_pixels"] == 100_000_000


def test_the_pixel_bound_is_a_setting_and_applies_to_jpegs(user_api, terra, settings):
    settings.LAB_UPLOAD_MAX_PIXELS = 64 * 48 - 1
    response = upload(user_api, samples.jpeg_plain(), name="photo.jpg", mime="image/jpeg")
    assert_refused(response, 422, "image_too_large", terra)
    settings.LAB_UPLOAD_MAX_PIXELS = 64 * 48
    assert upload(user_api, samples.jpeg_plain(), mime="image/jpeg").status_code == 202


def test_a_pdf_whose_nested_flate_streams_inflate_to_1_gib_is_refused(user_api, terra):
    bomb = samples.pdf_nested_flate_bomb()
    assert len(bomb) < 4096  # 1 GiB of zeros, deflated twice
    response = upload(user_api, bomb, name="report.pdf")
    body = assert_refused(response, 422, "pdf_decoded_too_large", terra)
    assert body["max_decoded_bytes"] == 256 * MiB


def test_a_pdf_within_the_bound_is_stored_as_it_is(user_api, terra_accepts):
    report = samples.pdf_report()
    response = upload(user_api, report, name="report.pdf")
    assert response.status_code == 202, response.json()
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert stored(row) == report and row.metadata_removed == []


@pytest.mark.parametrize(
    "data,filters",
    [
        (samples.zeros_deflated(2 * MiB), b"/FlateDecode"),
        (samples.zeros_deflated(2 * MiB), b"/Fl"),
        (samples.zeros_deflated(2 * MiB), b"/Fl#61teDecode"),  # a name spelled with an escape
        (samples.lzw_encode(bytes(2 * MiB)), b"/LZWDecode"),
        (samples.runlength_encode(bytes(2 * MiB)), b"/RunLengthDecode"),
        (
            base64.a85encode(samples.zeros_deflated(2 * MiB)) + b"~>",
            b"[/ASCII85Decode /FlateDecode]",
        ),
        (samples.zeros_deflated(2 * MiB).hex().encode() + b">", b"[/AHx /Fl]"),
    ],
)
def test_every_expanding_filter_is_decoded_within_the_bound(
    user_api, terra, settings, data, filters
):
    settings.LAB_UPLOAD_MAX_PDF_DECODED_BYTES = 1 * MiB
    response = upload(user_api, samples.pdf_with_stream(data, filters), name="report.pdf")
    assert_refused(response, 422, "pdf_decoded_too_large", terra)


def test_the_decoded_bound_counts_every_stream_of_the_document(user_api, terra, settings):
    settings.LAB_UPLOAD_MAX_PDF_DECODED_BYTES = 3 * MiB
    page = samples.stream(samples.zeros_deflated(2 * MiB), b"/Filter /FlateDecode ")
    one = samples.pdf([*samples.PAGE_OBJECTS, page])
    assert upload(user_api, one, name="one.pdf").status_code == 202
    two = samples.pdf([*samples.PAGE_OBJECTS, page, page])
    refused = upload(user_api, two, name="two.pdf")
    assert refused.status_code == 422
    assert refused.json()["code"] == "pdf_decoded_too_large"
    assert LabUpload.objects.count() == 1


def test_an_encrypted_pdf_is_refused_because_its_streams_cannot_be_checked(user_api, terra):
    response = upload(user_api, samples.pdf_encrypted(), name="locked.pdf")
    assert_refused(response, 422, "pdf_encrypted", terra)


def test_an_image_in_a_pdf_over_the_pixel_bound_is_refused(user_api, terra):
    response = upload(user_api, samples.pdf_with_image(20_000, 20_000), name="scan.pdf")
    body = assert_refused(response, 422, "image_too_large", terra)
    assert body["pixels"] == 400_000_000
    assert upload(user_api, samples.pdf_with_image(2_550, 3_300), name="ok.pdf").status_code == 202


def test_an_expanding_filter_behind_one_that_cannot_be_checked_is_refused(user_api, terra):
    pdf = samples.pdf_with_stream(b"\0" * 64, b"[/JBIG2Decode /FlateDecode]")
    assert_refused(upload(user_api, pdf, name="odd.pdf"), 422, "pdf_uncheckable", terra)


@pytest.mark.parametrize(
    "content",
    [
        samples.jpeg_plain()[:200] + b"\x00\x00",  # a segment cut off
        samples.jpeg_plain()[:3] + b"\x00" * 30,  # a marker that is not one
        b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 32,  # zero dimensions
        samples.png_plain()[:40],  # a chunk cut off
    ],
)
def test_an_image_that_cannot_be_read_is_refused(user_api, terra, content):
    response = upload(user_api, content, name="broken.png", mime="image/png")
    assert_refused(response, 422, "file_malformed", terra)
