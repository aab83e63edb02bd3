"""workflows routes."""

urlpatterns: list = []
