"""ops' app: the console's front page, heartbeats, gauges, login audit, its clean-up schedule, and
what it stores about users (tokens, idempotent answers, history that names them)."""

from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self):
        from django.contrib import admin

        # The console's front page lives in ops' own templates (so a wheel ships it) under a
        # name of its own: an app template named admin/index.html would lose to the admin app's.
        admin.site.index_template = "admin/ops/index.html"

        # Every qcluster records a heartbeat from its worker processes (ops.liveness).
        from django_q.signals import post_spawn

        from ops.liveness import cluster_heartbeat_start

        post_spawn.connect(cluster_heartbeat_start, dispatch_uid="ops-cluster-heartbeat")

        from ops.metrics import liveness_gauges, scrape_register

        scrape_register("workers", liveness_gauges)

        # Failed logins (the admin's form) are audited, bounded under a flood.
        from django.contrib.auth.signals import user_login_failed

        from ops.services import login_failed_audit

        user_login_failed.connect(login_failed_audit, dispatch_uid="ops-login-failed-audit")

        from datetime import time

        from django_q.models import Schedule

        from ops.schedules import Spec, schedule_register

        schedule_register(Spec("ops-cleanup", "ops.tasks.cleanup", Schedule.DAILY, at=time(3, 45)))
        # Bulk jobs whose worker died or whose task was lost get a new task (ops.bulk).
        schedule_register(
            Spec("ops-bulk-jobs", "ops.bulk.bulk_jobs_resume", Schedule.MINUTES, minutes=5)
        )
        _register_user_data()


def _register_user_data() -> None:
    from ops.idempotency import idempotency_keys_of
    from ops.models import IdempotencyKey, UserToken
    from ops.userdata import UserData, mentions_register, user_data_register

    # Secrets (hashes): wiped, never exported.
    user_data_register(
        UserData(
            "user_tokens", UserToken, lambda s: UserToken.objects.filter(user=s.user), export=False
        )
    )
    # A day of replayable answers to operators' requests: wiped when they name the user; not
    # the user's data to take with them.
    user_data_register(
        UserData("idempotency_keys", IdempotencyKey, idempotency_keys_of, export=False)
    )
    # Operator history keeps its rows through a wipe, with the user's identifiers replaced.
    mentions_register("ops.AuditLog", ("actor", "resource", "metadata"))
    # A bulk job's filter may name a Terra user or a label value; its actor, an operator.
    mentions_register("ops.BulkJob", ("actor", "filter"))
    mentions_register("admin.LogEntry", ("object_id", "object_repr", "change_message"))
    mentions_register("axes.AccessAttempt", ("username", "get_data", "post_data"))
    mentions_register("axes.AccessFailureLog", ("username",))
    mentions_register("axes.AccessLog", ("username",))
