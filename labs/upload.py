"""Reading a lab upload off the request within LAB_UPLOAD_MAX_BYTES, never holding or reading an
oversized body whole: the declared Content-Length is checked before the parser reads a byte, file
bytes are counted as the parser streams them, and a chunked body (no Content-Length) is read by
us with the same cap, because Django's multipart parser only reads up to Content-Length."""

import tempfile

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import (
    FileUploadHandler,
    MemoryFileUploadHandler,
    StopUpload,
    TemporaryFileUploadHandler,
)
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, QueryDict
from django.http.request import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.utils.datastructures import MultiValueDict
from rest_framework.exceptions import ParseError

from labs.errors import EmptyFile, ExpectedMultipart, FileTooLarge, MissingFileField

FILE_FIELD = "file"
# Room for boundaries, part headers and a long file name: the limit is on the file, not on the
# multipart envelope around it, so exactly LAB_UPLOAD_MAX_BYTES of file must fit in the body.
MULTIPART_SLACK_BYTES = 64 * 1024
_CHUNK = 64 * 1024


def max_bytes() -> int:
    return settings.LAB_UPLOAD_MAX_BYTES


def too_large() -> FileTooLarge:
    limit = max_bytes()
    return FileTooLarge(
        f"The file is larger than the {limit} byte limit.",
        max_bytes=limit,
    )


class CappedUploadHandler(FileUploadHandler):
    """First in the handler chain: refuses an oversized declared body before parsing and stops the
    parse (without draining the rest of the body) once the files' bytes pass the cap."""

    def __init__(self, request=None, *, cap: int):
        super().__init__(request)
        self.cap = cap
        self.file_bytes = 0
        self.exceeded = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length > self.cap + MULTIPART_SLACK_BYTES:
            self.exceeded = True
            return QueryDict(), MultiValueDict()  # a result here means "do not parse the body"
        return None

    def receive_data_chunk(self, raw_data, start):
        # Counted over every file part, so extra file fields cannot smuggle in more bytes.
        self.file_bytes += len(raw_data)
        if self.file_bytes > self.cap:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None


def install_upload_handlers(request: HttpRequest) -> CappedUploadHandler:
    """Must run before anything reads request.POST/FILES (DRF's session CSRF check may)."""
    capped = CappedUploadHandler(request, cap=max_bytes())
    request.upload_handlers = [
        capped,
        MemoryFileUploadHandler(request),
        TemporaryFileUploadHandler(request),
    ]
    return capped


def _spool_unsized_body(request: HttpRequest) -> None:
    """A chunked request has no Content-Length, and Django would parse it as empty: read it here,
    at most cap + slack + 1 bytes, into a temporary file the parser then reads."""
    declared = request.META.get("CONTENT_LENGTH")
    if declared not in (None, "", "0"):
        return
    if request.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return
    source = request.environ["wsgi.input"] if isinstance(request, WSGIRequest) else request._stream
    limit = max_bytes() + MULTIPART_SLACK_BYTES
    # Not a `with`: the parser reads the spool after we return. It dies with the request (a spool
    # rolled to disk is an already-unlinked temporary file, so nothing is left behind).
    spool = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE)  # noqa: SIM115
    size = 0
    while chunk := source.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            spool.close()
            raise too_large()
        spool.write(chunk)
    spool.seek(0)
    request._stream = spool  # HttpRequest.read() reads _stream; Django has no public hook
    request.META["CONTENT_LENGTH"] = str(size)


def lab_file_from_request(request) -> UploadedFile:
    """The `file` part of a DRF request, or a LabError (400/413) saying what is wrong."""
    django_request = request._request
    if not (request.content_type or "").lower().startswith("multipart/form-data"):
        raise ExpectedMultipart("Send the file as multipart/form-data.")
    capped = next(
        (h for h in django_request.upload_handlers if isinstance(h, CappedUploadHandler)), None
    ) or install_upload_handlers(django_request)
    _spool_unsized_body(django_request)
    try:
        files = request.FILES
    except ParseError as exc:
        raise ExpectedMultipart(f"The multipart body could not be parsed: {exc}") from None
    except RequestDataTooBig:  # non-file fields past DATA_UPLOAD_MAX_MEMORY_SIZE
        raise too_large() from None
    except (TooManyFieldsSent, TooManyFilesSent) as exc:
        raise ExpectedMultipart(str(exc)) from None
    if capped.exceeded:
        raise too_large()
    uploaded = files.get(FILE_FIELD)
    if uploaded is None:
        raise MissingFileField(f"The multipart body has no `{FILE_FIELD}` part.")
    if uploaded.size == 0:
        raise EmptyFile("The uploaded file is empty.")
    return uploaded
