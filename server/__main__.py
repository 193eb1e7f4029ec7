"""`python -m geak.server`: the GEAK language server on stdio (same options as `geak serve`)."""

import sys

from .cli_serve import main

sys.exit(main())
