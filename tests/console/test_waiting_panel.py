"""The front page's "waiting for a person" panel: graph human nodes and code workflows waiting
for an event, oldest first, each linking to its page."""


def panel(console) -> str:
    html = console.get("/admin/").content.decode()
    start = html.index('id="waiting-dashboard"')
    return html[start : html.index("</table>", start) if "</table>" in html[start:] else None]


def test_graph_approvals_and_workflow_event_waits_are_listed_oldest_first(
    console, harness, approval_run
):
    harness.advance("5 minutes")
    harness.create("console-approval", id="later")
    harness.advance("1 minute")  # its sleep ends: it waits for "approved"
    html = panel(console)
    assert html.index("approve / ") < html.index("console-approval / later")  # oldest first
    assert "ack (ack)" in html and "doctor approves (approved)" in html
    assert f"/admin/graphs/graphrun/{approval_run.pk}/change/" in html


def test_nothing_waiting_says_so(console, db):
    assert "Nobody is waited for" in console.get("/admin/").content.decode()


def test_answered_waits_leave_the_panel(console, harness):
    harness.create("console-approval", id="a")
    harness.advance("1 minute")
    assert "console-approval / a" in panel(console)
    harness.send_event("console-approval", "a", "approved", {"by": "dr"})
    assert "console-approval / a" not in console.get("/admin/").content.decode()
