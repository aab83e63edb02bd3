"""What the ingest bench compares the webhook with, behind the same gunicorn (bench/ingest.py):

- `bare`: a WSGI callable answering a fixed JSON body, no Django at all (gunicorn's own cost);
- `django_empty`: an empty Django view with the project's settings and middleware, routed at
  /webhook/terra (what any Django request costs before the webhook does anything).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

_ANSWER = b'{"ok": true}'


def bare(environ, start_response):
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(_ANSWER)))]
    )
    return [_ANSWER]


@csrf_exempt
def empty(request):
    return JsonResponse({"ok": True})


urlpatterns = [path("webhook/terra", empty)]
settings.ROOT_URLCONF = __name__
# The whole middleware stack, as any Django view gets it (the webhook's shortcut would hand the
# POST to the real webhook).
settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "ingest.webhook.WebhookShortcut"]
django_empty = get_wsgi_application()
