"""What a lab file must pass before it is stored or forwarded: images lose their location and
device metadata (losslessly: labs.imagemeta) and are refused above LAB_UPLOAD_MAX_PIXELS; PDFs
are refused when encrypted, when an image in them is over that bound, or when their streams
decode to more than LAB_UPLOAD_MAX_PDF_DECODED_BYTES (labs.pdfscan). Nothing is decoded whole."""

from dataclasses import dataclass

from django.conf import settings

from labs import filetype, imagemeta, pdfscan
from labs.errors import (
    FileMalformed,
    ImageTooLarge,
    PdfDecodedTooLarge,
    PdfEncrypted,
    PdfUncheckable,
)


@dataclass(frozen=True)
class Screened:
    content: bytes  # what is stored and forwarded
    metadata_removed: list[str]  # kinds of metadata taken out ([] when there was none)


def _image(content: bytes, kind: filetype.FileKind) -> Screened:
    clean = imagemeta.jpeg_clean if kind == filetype.JPEG else imagemeta.png_clean
    try:
        cleaned = clean(content)
    except imagemeta.Malformed as exc:
        raise FileMalformed(f"The {kind.extension.upper()} file cannot be read: {exc}.") from None
    limit = settings.LAB_UPLOAD_MAX_PIXELS
    if cleaned.width * cleaned.height > limit:
        raise ImageTooLarge(
            f"The image is {cleaned.width} x {cleaned.height} pixels; at most {limit} pixels "
            "are accepted.",
            width=cleaned.width,
            height=cleaned.height,
            max_pixels=limit,
        )
    return Screened(content=cleaned.data, metadata_removed=cleaned.removed)


_PDF_ERRORS = {
    "decoded_too_large": PdfDecodedTooLarge,
    "image_too_large": ImageTooLarge,
    "encrypted": PdfEncrypted,
    "uncheckable": PdfUncheckable,
}


def _pdf(content: bytes) -> Screened:
    try:
        pdfscan.pdf_check(
            content,
            max_decoded=settings.LAB_UPLOAD_MAX_PDF_DECODED_BYTES,
            max_pixels=settings.LAB_UPLOAD_MAX_PIXELS,
        )
    except pdfscan.PdfRefused as exc:
        hint = {
            "encrypted": " Upload an unencrypted copy (print it to PDF).",
            "uncheckable": " Upload it printed to a new PDF.",
        }.get(exc.reason, "")
        raise _PDF_ERRORS[exc.reason](f"{exc}{hint}", **exc.facts) from None
    return Screened(content=content, metadata_removed=[])


def lab_file_screen(*, content: bytes, kind: filetype.FileKind) -> Screened:
    """The bytes to store and forward, or a LabError (422) saying why the file is refused."""
    if kind == filetype.PDF:
        return _pdf(content)
    return _image(content, kind)
