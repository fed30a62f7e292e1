"""`python -m ragspan.flows.cli`: the same as the `ragspan` command."""

import sys

from ragspan.flows.cli import main

sys.exit(main())
