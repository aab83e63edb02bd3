"""factory-boy factories shared by every test folder."""

import hashlib
from datetime import date

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from ingest.models import RawEvent, TerraConnection


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")


class TerraConnectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TerraConnection

    user = factory.SubFactory(UserFactory)
    terra_user_id = factory.Faker("uuid4")
    provider = "GARMIN"
    reference_id = factory.LazyAttribute(lambda c: c.user.username)
    scopes = "ACTIVITY_EXPORT,HEALTH_EXPORT"


class RawEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RawEvent

    event_type = "daily"
    terra_user_id = factory.Faker("uuid4")
    provider = "GARMIN"
    payload = factory.LazyFunction(lambda: {"type": "daily", "data": []})
    signature_verified = True
    dedup_key = factory.Sequence(lambda n: hashlib.sha256(f"body-{n}".encode()).hexdigest())
    received_at = factory.LazyFunction(timezone.now)


def day(offset: int = 0) -> date:
    return timezone.now().date() - timezone.timedelta(days=offset)
