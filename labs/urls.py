"""labs routes."""

urlpatterns: list = []
