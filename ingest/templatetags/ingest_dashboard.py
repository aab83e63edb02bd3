"""{% ingest_dashboard %} on the admin index, and {% dashboard_panels %}: any installed app's
`admin/<app>/dashboard_panel.html`, so other apps add a panel without editing the index."""

from django import template
from django.apps import apps
from django.template.exceptions import TemplateDoesNotExist
from django.template.loader import select_template

from ingest.dashboard import dashboard_context

register = template.Library()


@register.inclusion_tag("admin/ingest/dashboard.html", takes_context=True)
def ingest_dashboard(context):
    return {**dashboard_context(), "request": context.get("request")}


@register.simple_tag(takes_context=True)
def dashboard_panels(context):
    html = []
    for app in apps.get_app_configs():
        if app.label == "ingest":
            continue
        try:
            panel = select_template([f"admin/{app.label}/dashboard_panel.html"])
        except TemplateDoesNotExist:
            continue
        html.append(panel.render(context.flatten(), context.get("request")))
    from django.utils.safestring import mark_safe

    return mark_safe("".join(html))  # rendered templates, already escaped
