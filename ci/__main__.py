"""`python -m ci` runs the `plangate` command."""

import sys

from ci import main

sys.exit(main())
