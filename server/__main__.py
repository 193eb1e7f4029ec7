"""`python -m geak.server`: the GEAK language server on stdio (same options as `geak serve`)."""

import sys

from .cli.serve import main

sys.exit(main())
