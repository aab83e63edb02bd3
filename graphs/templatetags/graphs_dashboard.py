"""{% waiting_panel %}: the "waiting for a person" panel of the console's front page."""

from django import template

from graphs.waiting import waiting_for_a_person

register = template.Library()


@register.inclusion_tag("admin/graphs/waiting_panel.html")
def waiting_panel():
    return {"rows": waiting_for_a_person()}
