"""Small builders for labs tests: file contents with real magic bytes and multipart bodies."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import encode_multipart

from tests.labs.samples import jpeg_plain, png_plain

PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
PNG = png_plain()  # real images without metadata: stored as they are
JPEG = jpeg_plain()
BOUNDARY = "labsTestBoundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
UPLOAD_URL = "/v1/labs/upload"


def sized(head: bytes, size: int) -> bytes:
    """`size` bytes starting with `head` (a file of exactly that size with real magic bytes)."""
    return head + b"\x00" * (size - len(head))


def upload(client, content: bytes, name: str = "report.pdf", mime: str = "application/pdf"):
    return client.post(
        UPLOAD_URL, {"file": SimpleUploadedFile(name, content, mime)}, format="multipart"
    )


def multipart_body(content: bytes, name: str = "report.pdf", field: str = "file") -> bytes:
    return encode_multipart(BOUNDARY, {field: SimpleUploadedFile(name, content, "application/pdf")})


def run_workflows() -> int:
    """Run due workflow work (the upload's lab-report instance) in this thread, until idle."""
    from workflows.engine import tick

    total = 0
    while done := tick(max_instances=50, threaded=False):
        total += done
    return total
