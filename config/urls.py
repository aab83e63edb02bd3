"""URL map: the API under /v1, the Terra webhook on every path Terra has been pointed at, the admin."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("ops.urls")),
    path("", include("workflows.urls")),
    path("", include("graphs.urls")),
    path("", include("ingest.urls")),
    path("", include("labs.urls")),
]

handler400 = "ops.errors.json_400"
handler403 = "ops.errors.json_403"
handler404 = "ops.errors.json_404"
handler500 = "ops.errors.json_500"
