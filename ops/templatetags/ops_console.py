"""{% dashboard_panels %} on the console's front page: every installed app's
`admin/<app label>/dashboard_panel.html`, in INSTALLED_APPS order, so an app adds a panel without
ops knowing it (imports go downward: ops never loads another app's tags)."""

from django import template
from django.apps import apps
from django.template.exceptions import TemplateDoesNotExist
from django.template.loader import get_template
from django.utils.safestring import mark_safe

register = template.Library()


@register.simple_tag(takes_context=True)
def dashboard_panels(context):
    html = []
    for app in apps.get_app_configs():
        try:
            panel = get_template(f"admin/{app.label}/dashboard_panel.html")
        except TemplateDoesNotExist:
            continue
        html.append(panel.render(context.flatten(), context.get("request")))
    return mark_safe("".join(html))  # rendered templates, already escaped


@register.inclusion_tag("admin/ops/dashboard.html")
def ops_dashboard():
    from ops.dashboard import ops_dashboard_context

    return ops_dashboard_context()
