"""Fingerprints of workflow code: the sha256 of a workflow function's source text.

An instance records the fingerprint of the code its run started on; a runner that resumes it
on code with another fingerprint says so (engine/code_changes.py). The source is hashed, not
the bytecode, so an interpreter upgrade does not look like a code change; a function with no
source file (built at run time) falls back to its marshalled code object. Only the workflow
function itself is covered, not the helpers it calls.
"""

import hashlib
import inspect
import marshal
from functools import cache


@cache
def code_fingerprint(fn) -> str:
    try:
        material = b"source:" + inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        material = b"code:" + (marshal.dumps(code) if code is not None else repr(fn).encode())
    return hashlib.sha256(material).hexdigest()
