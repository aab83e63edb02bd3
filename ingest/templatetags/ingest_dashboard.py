"""{% ingest_dashboard %}: the ingest panel of the console's front page
(admin/ingest/dashboard_panel.html, collected by ops' {% dashboard_panels %})."""

from django import template

from ingest.admin.dashboard import dashboard_context

register = template.Library()


@register.inclusion_tag("admin/ingest/dashboard.html", takes_context=True)
def ingest_dashboard(context):
    return {**dashboard_context(), "request": context.get("request")}
