"""What the tests of every tier share and no test file owns: paths, the helpers that start real
processes (``runs``), the stand-in servers (``local_server`` and the ``*_server.py`` scripts it
starts by file name), synthetic run folders, the Slurm cluster, the skip policy, the Pilot helpers.

Imported as ``support.<module>``: the root conftest's folder (tests/) is on ``sys.path``.
"""

import os

# The environment of every test and of the processes it starts (set before anything imports the
# Hugging Face libraries, which read it once): offline, quiet, and OpenMP threads that sleep rather
# than spin, so a busy machine is not made busier.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
