"""`manage.py graphs import FILE.json|yaml [--publish] [--binding NAME]`,
`manage.py graphs export NAME [--version V] [--output FILE]` and
`manage.py graphs approvers BINDING [--group NAME]` (on the box; audited as "manage.py")."""

import json

from django.core.management.base import BaseCommand, CommandError

from graphs import io, services
from graphs.errors import GraphError

ACTOR = "manage.py"


class Command(BaseCommand):
    help = "Import or export graph definitions (JSON or YAML files)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import", help="create a draft from a file (and publish it)")
        imp.add_argument("file")
        imp.add_argument("--publish", action="store_true")
        imp.add_argument("--binding", help="also create this binding (following the latest)")
        exp = sub.add_parser("export", help="print a definition in the JSON vocabulary")
        exp.add_argument("name")
        exp.add_argument("--version", type=int)
        exp.add_argument("--output", help="write to this file instead of stdout")
        appr = sub.add_parser("approvers", help="who answers a binding's human nodes")
        appr.add_argument("binding")
        appr.add_argument(
            "--group", help="the group whose staff members answer them (none: global approvers)"
        )

    def handle(self, *args, action, **options):
        try:
            if action == "import":
                self.do_import(**options)
            elif action == "approvers":
                self.do_approvers(**options)
            else:
                self.do_export(**options)
        except GraphError as exc:
            detail = f" (ref {exc.extra['ref']})" if exc.extra.get("ref") else ""
            raise CommandError(f"{exc.code}: {exc.message}{detail}") from exc
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def do_import(self, *, file, publish, binding, **_):
        document = io.load_file(file)
        definition = io.import_document(document, publish=publish, binding=binding, actor=ACTOR)
        self.stdout.write(
            f"{definition.name} v{definition.version} {definition.status} "
            f"(checksum {definition.checksum[:12]})"
        )

    def do_approvers(self, *, binding, group, **_):
        services.binding_set_approvers(name=binding, group=group, actor=ACTOR)
        who = f"group {group}" if group else "the global approvers only"
        self.stdout.write(f"{binding}: human nodes answered by {who}")

    def do_export(self, *, name, version, output, **_):
        text = json.dumps(io.export_document(name=name, version=version), indent=2) + "\n"
        if output:
            with open(output, "w") as handle:
                handle.write(text)
        else:
            self.stdout.write(text, ending="")
