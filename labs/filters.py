"""Query filters shared by the labs API."""

import django_filters

from labs.models import BiomarkerWide


class BiomarkerWideFilter(django_filters.FilterSet):
    date_from = django_filters.DateFilter(field_name="date", lookup_expr="gte")
    date_to = django_filters.DateFilter(field_name="date", lookup_expr="lte")

    class Meta:
        model = BiomarkerWide
        fields = ["date_from", "date_to"]
