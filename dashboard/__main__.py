"""``python -m dashboard COMMAND``: ``manage.py COMMAND`` without a checkout (the demo's children and
the scenarios page start their processes this way, so they run from an installed package too)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line([f"{os.path.basename(sys.executable)} -m dashboard", *sys.argv[1:]])


if __name__ == "__main__":
    main()
