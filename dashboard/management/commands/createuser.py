"""``python manage.py createuser NAME [--role viewer|operator]`` (``ctrlscope createuser``): a local
dashboard user, or a change to one.

A viewer reads; an operator (member of the ``operators`` group, ``dashboard/access.py``) may also
start scenarios and inject faults. The password is read from stdin with ``--password-stdin`` (one
line: for scripts and ``kubectl exec -i``), else asked for twice on a terminal. An existing user keeps
their password unless a new one is given, and gets the role asked for.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from dashboard.access import OPERATORS_GROUP


class Command(BaseCommand):
    help = "Create or update a dashboard user: a viewer, or an operator (--role operator)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=["viewer", "operator"], default="viewer",
                            help="viewer (read only, the default) or operator (may start scenarios and inject faults)")
        parser.add_argument("--password-stdin", action="store_true",
                            help="read the password from the first line of stdin instead of asking")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        users = get_user_model()
        user = users.objects.filter(username=opts["username"]).first()
        password = self._password(opts, required=user is None)
        with transaction.atomic():
            if user is None:
                user = users(username=opts["username"], email=opts["email"])
            elif opts["email"]:
                user.email = opts["email"]
            created = user.pk is None
            if password is not None:
                try:
                    password_validation.validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError(" ".join(exc.messages)) from None
                user.set_password(password)
            user.is_active = True
            user.save()
            operators, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
            if opts["role"] == "operator":
                user.groups.add(operators)
            else:
                user.groups.remove(operators)
        self.stdout.write(f"{'created' if created else 'updated'} {opts['role']} {user.username}"
                          + ("" if password is not None or created else " (password unchanged)"))

    def _password(self, opts: dict[str, Any], *, required: bool) -> str | None:
        if opts["password_stdin"]:
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("--password-stdin: stdin had no password")
            return password
        if not sys.stdin.isatty():
            if required:
                raise CommandError("a new user needs a password: pass --password-stdin, or run on a terminal")
            return None
        first = getpass.getpass(f"password for {opts['username']}{'' if required else ' (empty: unchanged)'}: ")
        if not first and not required:
            return None
        if getpass.getpass("again: ") != first:
            raise CommandError("the passwords differ")
        if not first:
            raise CommandError("empty password")
        return first
