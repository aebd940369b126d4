"""``python -m agent2rl_tui.run.campaign FOLDER``: the local scheduler's process (``local.launch_scheduler``)."""

import sys
from pathlib import Path

from agent2rl_tui.run.campaign.local import serve

if __name__ == "__main__":
    serve(Path(sys.argv[1]))
