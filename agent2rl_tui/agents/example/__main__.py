"""Entry point: ``python -m agent2rl_tui.agents.example``, as the supervisor launches it."""

from __future__ import annotations

import sys

from agent2rl_tui.agents.example.agent import main

if __name__ == "__main__":
    sys.exit(main())
