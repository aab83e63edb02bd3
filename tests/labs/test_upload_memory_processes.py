"""A real gunicorn worker checking hostile uploads keeps its memory bounded: refusing a PDF whose
streams inflate to 1 GiB and a 400-megapixel PNG raises its peak RSS (VmHWM) by a few MiB, not by
what they decode to."""

import os
from pathlib import Path

import httpx
import pytest

from ops.services import user_token_create
from tests.factories import UserFactory
from tests.labs import samples
from tests.ops.live_server import gunicorn_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
MiB = 1024 * 1024


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _worker_pid() -> int:
    (master,) = [p for p in _children(os.getpid()) if b"gunicorn" in _cmdline(p)]
    (worker,) = _children(master)
    return worker


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def _upload(base: str, token: str, content: bytes, name: str) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/labs/upload",
        headers={"Authorization": f"Bearer {token}"},
        files={"file": (name, content)},
        timeout=120,
    )


def test_refusing_a_1_gib_pdf_bomb_and_a_400_megapixel_png_keeps_the_worker_small(tmp_path):
    _, token = user_token_create(user=UserFactory(username="alice"))
    bomb, png = samples.pdf_nested_flate_bomb(), samples.png_400_megapixels()
    with gunicorn_server(tmp_path, workers=1, env={"TERRA_API_KEY": ""}) as base:
        # Warm up (imports, connections) with the same kinds of files, within their bounds.
        assert _upload(base, token, samples.pdf_report(), "ok.pdf").status_code == 202
        assert _upload(base, token, samples.png_plain(), "ok.png").status_code == 202
        worker = _worker_pid()
        before = _peak_rss(worker)
        refused_pdf = _upload(base, token, bomb, "bomb.pdf")
        after_pdf = _peak_rss(worker)
        refused_png = _upload(base, token, png, "huge.png")
        after_png = _peak_rss(worker)
    assert refused_pdf.json()["code"] == "pdf_decoded_too_large"
    assert refused_png.json()["code"] == "image_too_large"
    print(
        f"\nworker peak RSS: {before / MiB:.1f} MiB warm, {after_pdf / MiB:.1f} MiB after the "
        f"1 GiB PDF bomb, {after_png / MiB:.1f} MiB after the 400 MP PNG"
    )
    # Decoding either whole would take 256 MiB (the bound) to 1 GiB; streaming takes 64 KiB
    # pieces. 32 MiB of room for the interpreter's own churn.
    assert after_png - before < 32 * MiB
