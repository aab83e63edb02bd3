"""Strip location and device metadata from JPEG and PNG files without touching their image data,
and read their dimensions from the header (nothing is decoded). Pure functions over bytes.

JPEG: segments are copied as they are, except metadata segments (EXIF, XMP, IPTC/Photoshop,
comments, MPF and every other application segment but the three a decoder needs: JFIF, ICC
profile, Adobe colour transform), a JFIF thumbnail and bytes after the end of the image. The
EXIF orientation is kept in a minimal EXIF segment of its own, so a rotated photo still shows
upright. PNG: critical chunks and the ancillary chunks that change how pixels look (transparency,
gamma, colour) are kept; text, time, EXIF and every other ancillary chunk are dropped.
"""

import struct
from dataclasses import dataclass, field


class Malformed(ValueError):
    """The file does not have the structure its signature promises."""


@dataclass
class Cleaned:
    data: bytes
    width: int
    height: int
    removed: list[str] = field(default_factory=list)  # what was taken out, by kind

    def note(self, kind: str) -> None:
        if kind not in self.removed:
            self.removed.append(kind)


# --- JPEG -------------------------------------------------------------------------------------

_SOI, _EOI, _SOS, _DNL, _COM = 0xD8, 0xD9, 0xDA, 0xDC, 0xFE
_APP0, _APP1, _APP2, _APP13, _APP14 = 0xE0, 0xE1, 0xE2, 0xED, 0xEE
# Start-of-frame markers (C0-CF but DHT C4, JPG C8, DAC CC): they carry the dimensions.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM, RST0-7: no length field
_ORIENTATION_TAG = 0x0112


def _app_kind(marker: int, payload: bytes) -> str | None:
    """None to keep the segment, else the kind of metadata it is."""
    if marker == _APP0:
        return None if payload.startswith(b"JFIF\0") else "jfif_extension"
    if marker == _APP1:
        return "exif" if payload.startswith(b"Exif\0") else "xmp"
    if marker == _APP2:
        return None if payload.startswith(b"ICC_PROFILE\0") else "app2"
    if marker == _APP14:
        return None if payload.startswith(b"Adobe") else "app14"
    if marker == _APP13:
        return "iptc"
    return f"app{marker - _APP0}"


def _exif_orientation(payload: bytes) -> int | None:
    """The orientation tag of IFD0 in an EXIF payload ("Exif\\0\\0" + TIFF), or None."""
    tiff = payload[6:]
    if tiff[:2] == b"II":
        order = "<"
    elif tiff[:2] == b"MM":
        order = ">"
    else:
        return None
    try:
        (ifd,) = struct.unpack_from(order + "I", tiff, 4)
        (count,) = struct.unpack_from(order + "H", tiff, ifd)
        for i in range(count):
            tag, kind, _, value = struct.unpack_from(order + "HHIH", tiff, ifd + 2 + 12 * i)
            if tag == _ORIENTATION_TAG and kind == 3:
                return value if 1 <= value <= 8 else None
    except struct.error:
        return None
    return None


def _orientation_segment(orientation: int) -> bytes:
    """An APP1 EXIF segment holding only IFD0's orientation (big-endian TIFF)."""
    tiff = (
        b"MM\0*"
        + struct.pack(">I", 8)
        + struct.pack(">HHHIHHI", 1, _ORIENTATION_TAG, 3, 1, orientation, 0, 0)
    )
    payload = b"Exif\0\0" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def _jfif_without_thumbnail(segment: bytes, payload: bytes, cleaned: Cleaned) -> bytes:
    # JFIF APP0: identifier(5) version(2) units(1) density(4) thumbnail width, height(2), RGB.
    if len(payload) >= 14 and (payload[12] or payload[13] or len(payload) > 14):
        cleaned.note("jfif_thumbnail")
        body = payload[:12] + b"\0\0"
        return b"\xff\xe0" + struct.pack(">H", len(body) + 2) + body
    return segment


def _scan_end(data: bytes, pos: int) -> int:
    """Where the entropy-coded data starting at `pos` ends: the next marker that is not a
    stuffed 0xFF00 or a restart marker (which belong to the scan)."""
    n = len(data)
    while True:
        i = data.find(b"\xff", pos)
        if i < 0 or i + 1 >= n:
            return n
        nxt = data[i + 1]
        if nxt == 0x00 or 0xD0 <= nxt <= 0xD7 or nxt == 0xFF:
            pos = i + 1 if nxt == 0xFF else i + 2
            continue
        return i


def jpeg_clean(data: bytes) -> Cleaned:
    if not data.startswith(b"\xff\xd8"):
        raise Malformed("a JPEG starts with the SOI marker")
    cleaned = Cleaned(data=b"", width=0, height=0)
    out: list[bytes] = [b"\xff\xd8"]
    jfif_at = None  # where the minimal EXIF goes: after JFIF's APP0 when there is one
    orientation = None
    pos, n = 2, len(data)
    while pos < n:
        if data[pos] != 0xFF:
            raise Malformed(f"expected a marker at byte {pos}")
        while pos < n and data[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= n:
            break
        marker = data[pos]
        pos += 1
        if marker == _EOI:
            out.append(b"\xff\xd9")
            if pos < n:
                cleaned.note("trailer")  # appended data (a second image, a video, a vendor blob)
            break
        if marker in _STANDALONE:
            out.append(bytes((0xFF, marker)))
            continue
        if pos + 2 > n:
            raise Malformed("a segment is cut off")
        (length,) = struct.unpack_from(">H", data, pos)
        if length < 2 or pos + length > n:
            raise Malformed(f"segment 0x{marker:02X} has a bad length")
        payload = data[pos + 2 : pos + length]
        segment = b"\xff" + bytes((marker,)) + data[pos : pos + length]
        pos += length
        if marker in _SOF:
            if len(payload) < 5:
                raise Malformed("a frame header is cut off")
            cleaned.height, cleaned.width = struct.unpack_from(">HH", payload, 1)
        elif marker == _DNL and len(payload) >= 2 and cleaned.height == 0:
            (cleaned.height,) = struct.unpack_from(">H", payload, 0)
        if marker == _COM or _APP0 <= marker <= 0xEF:
            kind = "comment" if marker == _COM else _app_kind(marker, payload)
            if kind == "exif" and orientation is None:
                orientation = _exif_orientation(payload)
            if kind is not None:
                cleaned.note(kind)
                continue
            if marker == _APP0:
                segment = _jfif_without_thumbnail(segment, payload, cleaned)
                jfif_at = len(out) + 1
        out.append(segment)
        if marker == _SOS:
            end = _scan_end(data, pos)
            out.append(data[pos:end])
            pos = end
    if cleaned.width == 0 or cleaned.height == 0:
        raise Malformed("no frame header with the image's dimensions")
    if orientation not in (None, 1):
        out.insert(jfif_at or 1, _orientation_segment(orientation))
    cleaned.data = b"".join(out)
    return cleaned


# --- PNG --------------------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Ancillary chunks that change how the pixels look; every other ancillary chunk is dropped.
_PNG_RENDERING = {
    b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"pHYs", b"cICP", b"mDCV", b"mDCv",
    b"cLLI", b"cLLi",
}  # fmt: skip


def png_clean(data: bytes) -> Cleaned:
    if not data.startswith(PNG_SIGNATURE):
        raise Malformed("a PNG starts with its signature")
    cleaned = Cleaned(data=b"", width=0, height=0)
    out: list[bytes] = [PNG_SIGNATURE]
    pos, n = len(PNG_SIGNATURE), len(data)
    first = True
    while pos < n:
        if pos + 8 > n:
            raise Malformed("a chunk header is cut off")
        length, kind = struct.unpack_from(">I4s", data, pos)
        end = pos + 12 + length
        if length > 0x7FFFFFFF or end > n or not kind.isalpha():
            raise Malformed(f"chunk at byte {pos} is malformed")
        if first:
            if kind != b"IHDR" or length != 13:
                raise Malformed("a PNG's first chunk is IHDR")
            cleaned.width, cleaned.height = struct.unpack_from(">II", data, pos + 8)
            first = False
        ancillary = bool(kind[0] & 0x20)
        if ancillary and kind not in _PNG_RENDERING:
            cleaned.note(kind.decode("ascii"))
        else:
            out.append(data[pos:end])
        pos = end
        if kind == b"IEND":
            if pos < n:
                cleaned.note("trailer")
            break
    if first:
        raise Malformed("a PNG has an IHDR chunk")
    if cleaned.width == 0 or cleaned.height == 0:
        raise Malformed("a PNG has non-zero dimensions")
    cleaned.data = b"".join(out)
    return cleaned
