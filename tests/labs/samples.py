"""Real lab files for upload tests, built here: photos with GPS EXIF, PNGs with text and time
chunks, a 400-megapixel PNG, PDFs whose streams inflate to 1 GiB, encrypted and image PDFs."""

import functools
import io
import struct
import zlib

from PIL import Image, PngImagePlugin

GPS_IFD, MAKE, MODEL, ORIENTATION, DATETIME, SOFTWARE = (
    0x8825,
    0x010F,
    0x0110,
    0x0112,
    0x0132,
    0x0131,
)
MiB = 1024 * 1024


def picture(width: int = 64, height: int = 48, mode: str = "RGB") -> Image.Image:
    """A small image with structure (not a flat colour) so pixel comparisons mean something."""
    image = Image.new(mode, (width, height))
    image.putdata(
        [
            ((x * 4) % 256, (y * 5) % 256, (x * y) % 256) if mode == "RGB" else (x * y) % 256
            for y in range(height)
            for x in range(width)
        ]
    )
    return image


def exif_with_gps(orientation: int = 6) -> Image.Exif:
    exif = Image.Exif()
    exif[MAKE] = "Apple"
    exif[MODEL] = "iPhone 15 Pro"
    exif[SOFTWARE] = "17.4.1"
    exif[DATETIME] = "2026:03:14 09:26:53"
    exif[ORIENTATION] = orientation
    gps = exif.get_ifd(GPS_IFD)
    gps.update({1: "N", 2: (48.0, 51.0, 29.1), 3: "E", 4: (2.0, 17.0, 40.2)})
    return exif


XMP = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/'
    b'22-rdf-syntax-ns#"><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" '
    b'exif:GPSLatitude="48,51.485N" exif:GPSLongitude="2,17.67E"/></rdf:RDF></x:xmpmeta>'
)


def jpeg_with_gps(orientation: int = 6) -> bytes:
    """A camera-like JPEG: EXIF with GPS, make, model and orientation; XMP with GPS; a comment."""
    out = io.BytesIO()
    picture().save(
        out, "JPEG", quality=90, exif=exif_with_gps(orientation), xmp=XMP, comment=b"Paris clinic"
    )
    return out.getvalue()


def jpeg_plain() -> bytes:
    out = io.BytesIO()
    picture().save(out, "JPEG", quality=90)
    return out.getvalue()


def png_with_metadata() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "Dr. Example")
    info.add_itxt("Location", "48.8582 N, 2.2945 E", lang="en")
    info.add_text("Comment", "scanned at home " * 20, zip=True)  # a zTXt chunk
    info.add(b"tIME", struct.pack(">HBBBBB", 2026, 3, 14, 9, 26, 53))
    out = io.BytesIO()
    picture().save(out, "PNG", pnginfo=info, exif=exif_with_gps(1))
    return out.getvalue()


def png_plain(mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    picture(mode=mode).save(out, "PNG")
    return out.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.cache
def png_400_megapixels() -> bytes:
    """A real 20,000 x 20,000 PNG (1-bit grey, all black): 400 MP in about 60 KB."""
    width = height = 20_000
    row = b"\0" + bytes(width // 8)  # filter byte + packed pixels
    deflate = zlib.compressobj(9)
    idat = b"".join(deflate.compress(row * 1000) for _ in range(height // 1000)) + deflate.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@functools.cache
def zeros_deflated(size: int) -> bytes:
    """A zlib stream of `size` zero bytes (a multiple of 1 MiB), built without compressing them
    all: after a full flush every MiB of zeros compresses to the same bytes, so they repeat."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = raw.compress(bytes(MiB)) + raw.flush(zlib.Z_FULL_FLUSH)
    again = raw.compress(bytes(MiB)) + raw.flush(zlib.Z_FULL_FLUSH)
    end = raw.flush()
    adler = 1
    for _ in range(size // MiB):
        adler = zlib.adler32(bytes(MiB), adler)
    body = first + again * (size // MiB - 1) + end
    return b"\x78\xda" + body + struct.pack(">I", adler)


def pdf(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    """A PDF with a cross-reference table: objects numbered from 1, the first is the catalog."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n"
        % (len(objects) + 1, trailer_extra, xref)
    )
    return out.getvalue()


def stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), entries) + data + b"\nendstream"


PAGE_OBJECTS = [
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
]
CONTENT = b"BT /F1 12 Tf 72 712 Td (HbA1c 6.9 %) Tj ET\n" * 200


def pdf_report() -> bytes:
    """A one-page report whose content stream is Flate-compressed (as most PDFs' are)."""
    return pdf([*PAGE_OBJECTS, stream(zlib.compress(CONTENT), b"/Filter /FlateDecode ")])


@functools.cache
def pdf_nested_flate_bomb(size: int = 1024 * MiB) -> bytes:
    """A page whose content stream is Flate inside Flate and inflates to `size` bytes."""
    data = zlib.compress(zeros_deflated(size), 9)
    return pdf([*PAGE_OBJECTS, stream(data, b"/Filter [/FlateDecode /FlateDecode] ")])


def pdf_with_stream(data: bytes, filters: bytes) -> bytes:
    return pdf([*PAGE_OBJECTS, stream(data, b"/Filter " + filters + b" ")])


def pdf_encrypted() -> bytes:
    objects = [*PAGE_OBJECTS, stream(b"\x8f\x12" * 50, b"/Filter /FlateDecode ")]
    objects.append(b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -3904 /O <00> /U <00> >>")
    return pdf(objects, trailer_extra=b"/Encrypt 5 0 R /ID [<01><01>] ")


def pdf_with_image(width: int, height: int) -> bytes:
    """An image XObject whose dictionary says width x height (its JPEG data is a stub)."""
    image = stream(
        b"\xff\xd8\xff\xd9",
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
        b"/BitsPerComponent 8 /Filter /DCTDecode " % (width, height),
    )
    return pdf([*PAGE_OBJECTS, stream(b"q Q"), image])


def lzw_encode(data: bytes) -> bytes:
    """PDF LZW (EarlyChange 1) for tests: clear, codes, end of data."""
    table = {bytes((i,)): i for i in range(256)}
    bits, codes, word = 9, [(256, 9)], b""
    for value in data:
        candidate = word + bytes((value,))
        if candidate in table:
            word = candidate
            continue
        codes.append((table[word], bits))
        if len(table) + 2 < 4096:
            table[candidate] = len(table) + 2
            if len(table) + 2 >= (1 << bits) and bits < 12:
                bits += 1
        word = bytes((value,))
    if word:
        codes.append((table[word], bits))
    codes.append((257, bits))
    acc, nacc, out = 0, 0, bytearray()
    for code, width in codes:
        acc, nacc = (acc << width) | code, nacc + width
        while nacc >= 8:
            nacc -= 8
            out.append((acc >> nacc) & 0xFF)
    if nacc:
        out.append((acc << (8 - nacc)) & 0xFF)
    return bytes(out)


def runlength_encode(data: bytes) -> bytes:
    """Runs of up to 128 equal bytes as (257 - n, byte); the end-of-data byte 128."""
    out, i = bytearray(), 0
    while i < len(data):
        run = 1
        while i + run < len(data) and run < 128 and data[i + run] == data[i]:
            run += 1
        if run > 1:
            out += bytes((257 - run, data[i]))
        else:
            out += bytes((0, data[i]))
        i += run
    return bytes(out + b"\x80")
