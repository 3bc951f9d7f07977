"""``python -m ctrlscope``: the same as the ``ctrlscope`` command."""

import sys

from ctrlscope.cli import main

sys.exit(main())
