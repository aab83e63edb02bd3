"""The http action: SSRF refusals before connecting (and on redirects), secrets by name, URL
templates, retries on 5xx, outputs from the response JSON — through real graph runs."""

import socket

import httpx
import pytest

from graphs import http_action, services
from graphs.errors import HttpActionRefused
from graphs.models import GraphToken
from tests.graphs.helpers import doc, node


def resolver(mapping):
    def resolve(host, port, type=0):  # noqa: A002 - getaddrinfo's signature
        if host not in mapping:
            raise socket.gaierror(f"unknown host {host}")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in mapping[host]]

    return resolve


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://localhost:8000/x",
        "http://10.1.2.3/x",
        "http://192.168.0.10/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "http://100.100.100.200/latest/meta-data",  # shared address space (a cloud's metadata)
        "http://[2002:7f00:1::1]/x",  # 6to4 wrapping 127.0.0.1
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x",  # Teredo wrapping 127.0.0.1
        "http://[fec0::1]/x",  # site-local
        "http://[64:ff9b::a00:5]/x",  # NAT64 of 10.0.0.5
        "http://sneaky.test/x",  # a public-looking name that resolves to a private address
    ],
)
def test_private_loopback_and_link_local_destinations_are_refused_before_connecting(
    url, web, settings
):
    http_action.set_resolver(
        resolver({"localhost": ["127.0.0.1"], "sneaky.test": ["93.184.216.34", "10.0.0.5"]})
    )
    with pytest.raises(HttpActionRefused):
        http_action.check_destination(httpx.URL(url))
    with pytest.raises(Exception, match="refused"):
        http_action.call({"url": url, "method": "GET"}, {}, None)
    assert web.requests == []


def test_public_addresses_and_allowed_hosts_pass(web, settings):
    http_action.set_resolver(resolver({"public.test": ["93.184.216.34"]}))
    http_action.check_destination(httpx.URL("https://public.test/hook"))
    settings.GRAPHS_HTTP_ALLOWED_HOSTS = ["127.0.0.1:9999"]
    http_action.check_destination(httpx.URL("http://127.0.0.1:9999/stand-in"))
    with pytest.raises(HttpActionRefused):  # the allowance is per host:port
        http_action.check_destination(httpx.URL("http://127.0.0.1:9998/"))


def test_a_redirect_to_a_private_address_is_refused(web):
    web.on(
        "POST",
        "https://hooks.test/go",
        httpx.Response(307, headers={"location": "http://169.254.169.254/"}),
    )
    with pytest.raises(Exception, match="refused 169.254.169.254"):
        http_action.call({"url": "https://hooks.test/go"}, {}, {"a": 1})
    assert [str(r.url) for r in web.requests] == ["https://hooks.test/go"]


def test_secrets_templates_and_json_output(web, settings):
    settings.GRAPHS_HTTP_SECRETS = {"CLINIC_TOKEN": "s3cret"}
    web.on("POST", "https://hooks.test/markers/LDL%2FC", (200, {"received": True}))
    action = {
        "url": "https://hooks.test/markers/{code}",
        "headers": {"Authorization": {"secret": "CLINIC_TOKEN"}, "X-Tag": "lit"},
    }
    assert http_action.call(action, {"code": "LDL/C"}, {"v": 1}) == {"received": True}
    sent = web.requests[0]
    assert sent.headers["authorization"] == "s3cret" and sent.headers["x-tag"] == "lit"
    assert sent.content == b'{"v":1}' or b'"v"' in sent.content


def test_a_missing_secret_fails_without_sending(web, settings):
    settings.GRAPHS_HTTP_SECRETS = {}
    with pytest.raises(Exception, match="secret 'NOPE' is not set"):
        http_action.call(
            {"url": "https://hooks.test/x", "headers": {"A": {"secret": "NOPE"}}}, {}, None
        )
    assert web.requests == []


def test_http_node_in_a_run_retries_5xx_and_refuses_private_targets(web, harness):
    answers = iter([(503, {}), (200, {"id": 7})])
    web.on("POST", "https://hooks.test/notify", lambda request: next(answers))
    document = doc(
        [
            node(
                "notify",
                "http",
                action={"url": "https://hooks.test/notify", "body": "/input"},
                output_mapping={"/resp": ""},
                retries={"limit": 2, "delay": "1 second", "backoff": "constant"},
            ),
            node(
                "leak",
                "http",
                action={"url": "http://169.254.169.254/latest"},
                retries={"limit": 3, "delay": "1 second"},
            ),
        ],
        [{"from": "notify", "to": "leak"}],
    )
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=1)
    services.binding_create(name="b", definition=definition.name)
    run = services.run_create(binding_name="b", run_input={"x": 1})
    harness.run_until_idle()
    harness.advance("5 seconds")
    final = harness.status("graph-run", run.run_id)
    assert final["status"] == "errored" and "refused" in final["error"]["message"]
    run.refresh_from_db()
    assert run.context["resp"] == {"id": 7}
    assert len(web.requests) == 2  # the 503 and its retry; the private target was never sent
    leak = GraphToken.objects.get(run=run, node_ref="leak")
    assert leak.status == "failed"
    attempts = {s["name"]: s["attempts"] for s in harness.history("graph-run", run.run_id)["steps"]}
    assert attempts["1 leak"] == 1  # refusals are not retried


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        (" 120 ", 120.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a date in the past: now
        ("soon", None),
        ("-1", None),
        (None, None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(value, seconds):
    from datetime import UTC, datetime

    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    from ops.pacing import retry_after_seconds

    assert retry_after_seconds(value, now=now) == seconds
