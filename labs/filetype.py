"""Decide a lab file's type from its first bytes: the client's file name and declared mime type
are not trusted (either may lie), so the stored extension and content type come from here."""

from dataclasses import dataclass


@dataclass(frozen=True)
class FileKind:
    extension: str
    content_type: str


PDF = FileKind("pdf", "application/pdf")
PNG = FileKind("png", "image/png")
JPEG = FileKind("jpg", "image/jpeg")

# Longest signature first is not needed: none is a prefix of another.
_SIGNATURES: tuple[tuple[bytes, FileKind], ...] = (
    (b"%PDF-", PDF),
    (b"\x89PNG\r\n\x1a\n", PNG),
    (b"\xff\xd8\xff", JPEG),  # JPEG SOI marker followed by the first segment's marker byte
)

HEAD_BYTES = 16


def sniff(head: bytes) -> FileKind | None:
    """The kind named by the magic bytes at the start of `head`, or None (unsupported)."""
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    return None
