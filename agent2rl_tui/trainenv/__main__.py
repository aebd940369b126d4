"""Entry point: ``python -m agent2rl_tui.trainenv --run-dir DIR (--fd N | --port N)`` (``server.main``)."""

import sys

from agent2rl_tui.trainenv.server import main

sys.exit(main())
