"""`python -m plangate` runs the `plangate` command."""

import sys

from plangate.ci.cli import main

sys.exit(main())
