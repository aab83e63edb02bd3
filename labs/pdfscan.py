"""Bound what a PDF's streams decode to without ever holding a decoded stream: each stream runs
through its filter chain in pieces of at most 64 KiB (zlib's decompressobj with max_length, and
streaming LZW, RunLength, ASCIIHex and ASCII85 decoders), and the bytes that come out are
counted until the document's total passes the bound. Image XObjects' dimensions are read from
their dictionaries. Pure functions over bytes; nothing here parses more of a PDF than that.

Streams are found by their `stream` keyword anywhere in the file (a reader finds them through
the cross-reference table; scanning everything finds at least those). A stream's data runs to
the furthest of its /Length and its `endstream`: every decoder here is prefix-monotonic, so
feeding more never counts less than a reader would decode.
"""

import base64
import bisect
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

CHUNK = 64 * 1024
MAX_FILTER_CANDIDATES = 8
# A stream dictionary longer than this is refused rather than searched (a reader would still
# see a /Filter hidden past any window we cut).
MAX_DICT_BYTES = 64 * 1024


class PdfRefused(ValueError):
    """reason: decoded_too_large | image_too_large | encrypted | uncheckable."""

    def __init__(self, reason: str, message: str, **facts):
        super().__init__(message)
        self.reason = reason
        self.facts = facts


@dataclass
class PdfReport:
    streams: int
    decoded_bytes: int
    largest_image_pixels: int


# --- streaming decoders: each maps an iterator of byte chunks to one of chunks <= CHUNK-ish ---

Chunks = Iterable[bytes]


def _inflate(chunks: Chunks) -> Iterator[bytes]:
    d = zlib.decompressobj()
    for chunk in chunks:
        while True:
            try:
                out = d.decompress(chunk, CHUNK)
            except zlib.error:
                return  # a reader stops here too; what came out so far was counted
            if out:
                yield out
            if d.eof:
                return
            chunk = d.unconsumed_tail
            if not chunk and len(out) < CHUNK:
                break  # input used up and no output pending: next chunk


def _lzw(chunks: Chunks) -> Iterator[bytes]:
    """PDF's LZW: MSB-first codes of 9-12 bits, 256 clears, 257 ends, EarlyChange 1."""
    table: list[bytes] = []
    bits, prev, acc, nacc = 9, None, 0, 0
    out = bytearray()

    def reset():
        table[:] = [bytes((i,)) for i in range(256)] + [b"", b""]
        return 9, None

    bits, prev = reset()
    for chunk in chunks:
        for byte in chunk:
            acc, nacc = (acc << 8) | byte, nacc + 8
            while nacc >= bits:
                nacc -= bits
                code = acc >> nacc
                acc &= (1 << nacc) - 1
                if code == 256:
                    bits, prev = reset()
                    continue
                if code == 257:
                    yield bytes(out)
                    return
                if prev is None and code > 255 or prev is not None and code > len(table):
                    yield bytes(out)
                    return  # a code no reader could decode: it stops here too
                if prev is None:
                    entry = table[code]
                elif code < len(table):
                    entry = table[code]
                    if len(table) < 4096:
                        table.append(prev + entry[:1])
                else:  # the entry being defined by this very code
                    entry = prev + prev[:1]
                    if len(table) < 4096:
                        table.append(entry)
                out += entry
                prev = entry
                if len(table) + 1 >= (1 << bits) and bits < 12:
                    bits += 1
                if len(out) >= CHUNK:
                    yield bytes(out)
                    out.clear()
    yield bytes(out)


def _runlength(chunks: Chunks) -> Iterator[bytes]:
    pending = b""
    out = bytearray()
    for chunk in chunks:
        buf, i = pending + chunk, 0
        while i < len(buf):
            length = buf[i]
            if length == 128:
                yield bytes(out)
                return
            if length < 128:
                if i + length + 2 > len(buf):
                    break
                out += buf[i + 1 : i + length + 2]
                i += length + 2
            else:
                if i + 2 > len(buf):
                    break
                out += buf[i + 1 : i + 2] * (257 - length)
                i += 2
            if len(out) >= CHUNK:
                yield bytes(out)
                out.clear()
        pending = buf[i:]
    yield bytes(out)


_WHITESPACE = b" \t\r\n\f\0"


def _asciihex(chunks: Chunks) -> Iterator[bytes]:
    pending = b""
    for chunk in chunks:
        end = chunk.find(b">")
        digits = pending + (chunk if end < 0 else chunk[:end]).translate(None, _WHITESPACE)
        even = len(digits) - len(digits) % 2
        try:
            yield bytes.fromhex(digits[:even].decode("ascii"))
            if end >= 0:
                if even < len(digits):
                    yield bytes.fromhex(digits[even:].decode("ascii") + "0")
                return
        except (ValueError, UnicodeDecodeError):
            return
        pending = digits[even:]


def _a85_groups(text: bytes) -> tuple[bytes, bytes]:
    """Decode the whole 5-character groups (and `z`s) at the start of `text`; (out, rest)."""
    out, i = [], 0
    while True:
        z = text.find(b"z", i)
        stop = len(text) if z < 0 else z
        whole = i + (stop - i) // 5 * 5
        if whole > i:
            out.append(base64.a85decode(text[i:whole]))
        if z < 0 or whole != z:
            return b"".join(out), text[whole:]
        out.append(b"\0\0\0\0")
        i = z + 1


def _ascii85(chunks: Chunks) -> Iterator[bytes]:
    pending = b""
    for chunk in chunks:
        end = chunk.find(b"~")
        text = pending + (chunk if end < 0 else chunk[:end]).translate(None, _WHITESPACE)
        try:
            out, pending = _a85_groups(text)
            yield out
            if end >= 0:
                if pending:
                    yield base64.a85decode(pending)
                return
        except ValueError:
            return


_DECODERS: dict[str, Callable[[Chunks], Iterator[bytes]]] = {
    "FlateDecode": _inflate,
    "Fl": _inflate,
    "LZWDecode": _lzw,
    "LZW": _lzw,
    "RunLengthDecode": _runlength,
    "RL": _runlength,
    "ASCIIHexDecode": _asciihex,
    "AHx": _asciihex,
    "ASCII85Decode": _ascii85,
    "A85": _ascii85,
}
_EXPANDING = {"FlateDecode", "Fl", "LZWDecode", "LZW", "RunLengthDecode", "RL"}


# --- finding streams, their filters and their images ---------------------------------------------

_TOKEN = re.compile(rb"\bobj\b|>>\s*stream(?:\r\n|\n|\r)|/Encrypt\s*(?:\d+\s+\d+\s+R|<<)")
_FILTER = re.compile(rb"/Filter\s*(\[[^\]]*\]|/[^\s/\[\]<>()]+|\d+\s+\d+\s+R)")
_NAME = re.compile(rb"/([^\s/\[\]<>()]+)")
_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
_LENGTH = re.compile(rb"/Length\s+(\d+)(\s+(\d+)\s+R)?")
_IMAGE = re.compile(rb"/Subtype\s*/Image\b")
_WIDTH = re.compile(rb"/Width\s+(\d+)\b(?!\s+\d+\s+R)")
_HEIGHT = re.compile(rb"/Height\s+(\d+)\b(?!\s+\d+\s+R)")


def _name(raw: bytes) -> str:
    # Readers decode #xx escapes in names: /Fl#61teDecode is FlateDecode.
    return _NAME_ESCAPE.sub(lambda m: bytes((int(m.group(1), 16),)), raw).decode("latin-1")


class _File:
    """What the checks look up more than once, each found in one pass over the file."""

    def __init__(self, data: bytes):
        self.data = data
        self._simple: dict[tuple[bytes, bytes], bytes] | None = None
        self._ends: list[int] | None = None

    def simple_object(self, ref: bytes) -> bytes | None:
        """The text of object `N G` when it is a bare number, name or array (a stream's
        /Length or /Filter), unless it sits inside an object stream."""
        if self._simple is None:
            self._simple = {
                (m.group(1), m.group(2)): m.group(3) for m in _SIMPLE_OBJECT.finditer(self.data)
            }
        number, generation = ref.split()[:2]
        return self._simple.get((number, generation))

    def endstream_after(self, start: int) -> int:
        if self._ends is None:
            self._ends = [m.start() for m in re.finditer(rb"endstream", self.data)]
        i = bisect.bisect_left(self._ends, start)
        return self._ends[i] if i < len(self._ends) else len(self.data)


_SIMPLE_OBJECT = re.compile(rb"\b(\d+)\s+(\d+)\s+obj\s*(\[[^\]]*\]|/[^\s/\[\]<>()]+|\d+)\s*endobj")


def _filter_chains(file: _File, head: bytes) -> list[list[str]]:
    """Every /Filter entry of a stream's dictionary text (nested dictionaries included: one of
    them is the one a reader applies). Indirect ones are looked up."""
    chains = []
    for match in _FILTER.finditer(head):
        value = match.group(1)
        if value.endswith(b"R"):
            value = file.simple_object(value)
            if value is None or value[:1] not in (b"[", b"/"):
                raise PdfRefused(
                    "uncheckable", "A stream's filters could not be found in the file."
                )
        chains.append([_name(n) for n in _NAME.findall(value)])
        if len(chains) > MAX_FILTER_CANDIDATES:
            raise PdfRefused("uncheckable", "A stream's dictionary names too many filters.")
    return chains


def _data_end(file: _File, head: bytes, start: int) -> int:
    end = start
    length = _LENGTH.search(head)
    if length is not None:
        if length.group(2):
            value = file.simple_object(length.group(1) + b" " + length.group(3))
            if value is not None and value.isdigit():
                end = start + int(value)
        else:
            end = start + int(length.group(1))
    return min(max(end, file.endstream_after(start)), len(file.data))


def _decoded(data: bytes, start: int, end: int, chain: list[str], budget: int) -> int:
    """Bytes the chain's decodable stages make of data[start:end], counted up to budget + 1."""
    chunks: Iterable[bytes] = (data[i : min(i + CHUNK, end)] for i in range(start, end, CHUNK))
    decoding = False
    for k, name in enumerate(chain):
        if name == "Crypt":
            raise PdfRefused("encrypted", "The PDF's streams are encrypted.")
        decoder = _DECODERS.get(name)
        if decoder is None:
            # An image codec or an unknown filter: what it makes is bounded by the image check;
            # an expanding stage after it would decode what this check cannot see.
            if any(later in _EXPANDING for later in chain[k + 1 :]):
                raise PdfRefused(
                    "uncheckable", f"A stream decodes with {name} before an expanding filter."
                )
            break
        chunks = decoder(chunks)
        decoding = True
    if not decoding:
        return 0
    total = 0
    for piece in chunks:
        total += len(piece)
        if total > budget:
            return total
    return total


def _image_pixels(head: bytes) -> int:
    if not _IMAGE.search(head):
        return 0
    width, height = _WIDTH.search(head), _HEIGHT.search(head)
    if width is None or height is None:
        return 0
    return int(width.group(1)) * int(height.group(1))


def pdf_check(data: bytes, *, max_decoded: int, max_pixels: int) -> PdfReport:
    """Raise PdfRefused when the PDF is encrypted, an image is over `max_pixels`, or its streams
    decode to more than `max_decoded` bytes in total; else say what was checked."""
    report = PdfReport(streams=0, decoded_bytes=0, largest_image_pixels=0)
    file = _File(data)
    head_start = 0
    for token in _TOKEN.finditer(data):
        text = token.group()
        if text.startswith(b"/Encrypt"):
            raise PdfRefused("encrypted", "The PDF is encrypted.")
        if text == b"obj":
            head_start = token.end()
            continue
        if token.start() - head_start > MAX_DICT_BYTES:
            raise PdfRefused("uncheckable", "A stream's dictionary is too long to check.")
        head = data[head_start : token.start() + 2]
        start = token.end()
        report.streams += 1
        pixels = _image_pixels(head)
        report.largest_image_pixels = max(report.largest_image_pixels, pixels)
        if pixels > max_pixels:
            raise PdfRefused(
                "image_too_large",
                f"An image in the PDF has {pixels} pixels.",
                pixels=pixels,
            )
        end = _data_end(file, head, start)
        budget = max_decoded - report.decoded_bytes
        most = 0
        for chain in _filter_chains(file, head):
            most = max(most, _decoded(data, start, end, chain, budget))
            if most > budget:
                raise PdfRefused(
                    "decoded_too_large",
                    f"The PDF's streams decode to more than {max_decoded} bytes.",
                    max_decoded_bytes=max_decoded,
                )
        report.decoded_bytes += most
    return report
