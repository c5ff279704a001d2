"""``python -m shardplan``: the ``shardplan-py`` command line (shardplan/cli.py)."""

import sys

from .cli import main

sys.exit(main())
