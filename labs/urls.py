"""labs routes (included at the root by config.urls)."""

from django.urls import path

from labs import views

urlpatterns = [
    path("v1/labs/upload", views.LabUploadView.as_view(), name="labs-upload"),
    path("v1/labs/uploads", views.LabUploadListView.as_view(), name="labs-uploads"),
    path(
        "v1/labs/uploads/<uuid:upload_id>",
        views.LabUploadDetailView.as_view(),
        name="labs-upload-detail",
    ),
    path("v1/biomarkers/wide", views.BiomarkerWideView.as_view(), name="biomarkers-wide"),
]
