"""Terra webhook routes (every path Terra has been pointed at)."""

urlpatterns: list = []
