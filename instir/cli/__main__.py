"""``python -m instir.cli``: the ``instir`` command."""

import sys

from instir.cli import main

sys.exit(main())
