"""The API's JSON parser: ops/strict_json.py's rules, refused as 400 invalid_json with a reason."""

from rest_framework.parsers import JSONParser

from ops import strict_json
from ops.errors import ApiError, ErrorCode


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            return strict_json.loads(raw)
        except strict_json.InvalidJson as exc:
            raise ApiError(
                400, ErrorCode.INVALID_JSON, f"Invalid JSON: {exc.message}.", reason=exc.reason
            ) from None
