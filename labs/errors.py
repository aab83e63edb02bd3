"""Labs' domain errors: every refusal is a LabError with a stable `code` and an HTTP `status`
hint, like workflows.errors. LabError derives from ops.errors.ApiError, so the shared DRF
exception handler renders it as `{"code", "message", ...}` with its status."""

from ops.errors import ApiError, ErrorCode


class LabError(ApiError):
    code = "lab_error"
    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(self.status, self.code, message, **extra)


class ExpectedMultipart(LabError):
    code = "expected_multipart"


class MissingFileField(LabError):
    code = "missing_file_field"


class EmptyFile(LabError):
    code = "empty_file"


class UnsupportedFileType(LabError):
    code = "unsupported_file_type"
    status = 415


class FileTooLarge(LabError):
    code = "file_too_large"
    status = 413


class ImageTooLarge(LabError):
    code = ErrorCode.IMAGE_TOO_LARGE
    status = 422


class PdfDecodedTooLarge(LabError):
    code = ErrorCode.PDF_DECODED_TOO_LARGE
    status = 422


class PdfEncrypted(LabError):
    code = ErrorCode.PDF_ENCRYPTED
    status = 422


class PdfUncheckable(LabError):
    code = ErrorCode.PDF_UNCHECKABLE
    status = 422


class FileMalformed(LabError):
    code = ErrorCode.FILE_MALFORMED
    status = 422
