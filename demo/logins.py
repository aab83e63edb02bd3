"""The demo's logins (`make run`): the operator's password, the demo user's bearer token and an
operator API key, made fresh at each start (the previous ones stop working) and written to a
file only its owner can read, in shell syntax: `. var/demo-logins.env` sets BASE, TOKEN, KEY."""

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from ops.models import ApiKey, UserToken
from ops.services import api_key_create, user_token_create

FILE_NAME = "demo-logins.env"
TOKEN_NAME = "rundemo"
API_KEY_NAME = "rundemo-operator"


@dataclass(frozen=True)
class Logins:
    operator: str
    password: str
    token: str
    admin_key: str


@transaction.atomic
def logins_create(*, operator: str, demo_user: str) -> Logins:
    """A superuser `operator` with a new password, and a new token and key (old ones deleted)."""
    User = get_user_model()
    password = secrets.token_urlsafe(9)
    admin, _ = User.objects.get_or_create(username=operator, defaults={"email": "admin@localhost"})
    admin.is_staff = admin.is_superuser = True
    admin.set_password(password)
    admin.save()
    demo, _ = User.objects.get_or_create(username=demo_user)
    UserToken.objects.filter(user=demo, name=TOKEN_NAME).delete()
    _, token = user_token_create(user=demo, name=TOKEN_NAME)
    ApiKey.objects.filter(name=API_KEY_NAME).delete()
    _, key = api_key_create(name=API_KEY_NAME, scopes=["*"])
    return Logins(operator=operator, password=password, token=token, admin_key=key)


def logins_write(logins: Logins, *, base: str, folder: Path) -> Path:
    """Write the logins to `folder`/demo-logins.env, mode 0600 (replaced whole, never widened);
    returns its path. Every value is URL-safe text, so the file is valid shell as it stands."""
    path = Path(folder) / FILE_NAME
    lines = [
        f"# vitalflow demo logins, written by `make run` at {timezone.now():%Y-%m-%d %H:%M} UTC;",
        f"# new ones at every start. In a shell: . {shown(path)}",
        f"BASE={base}",
        f"ADMIN_USER={logins.operator}",
        f"ADMIN_PASSWORD={logins.password}",
        f"TOKEN={logins.token}",
        f"KEY={logins.admin_key}",
    ]
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask
        out.write("\n".join(lines) + "\n")
    os.replace(temporary, path)
    return path


def shown(path: Path) -> str:
    """`path` as the user would type it: relative to the working directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
