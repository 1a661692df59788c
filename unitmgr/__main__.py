"""`python -m unitmgr`: the `unit` command."""

from __future__ import annotations

import sys

from unitmgr.entry import main

sys.exit(main())
