"""ops has no routes of its own yet; the admin dashboard lives in the admin site."""

urlpatterns: list = []
