"""`python -m geak.server.cli`: the `geak` command line."""

import sys

from .entry import main

sys.exit(main())
