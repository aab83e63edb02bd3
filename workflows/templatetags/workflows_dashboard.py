"""{% workflows_dashboard %}: the workflows panel of the console's front page."""

from django import template

from workflows.dashboard import workflows_dashboard_context

register = template.Library()


@register.inclusion_tag("admin/workflows/dashboard.html")
def workflows_dashboard():
    return workflows_dashboard_context()
