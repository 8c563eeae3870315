"""`python -m plangate` runs the `plangate` command."""

import sys

from plangate.ci import main

sys.exit(main())
