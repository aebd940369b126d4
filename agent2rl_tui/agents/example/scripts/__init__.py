"""The example agent's training code, kept as real modules here and copied into ``code/``.

The agent copies these files into the workspace's ``code/`` folder and runs them there as
scripts (``python code/sft.py ...``), as a coding agent would run what it wrote; they
import only each other (``grpo`` imports ``reward``, found beside it), TRL and the
standard library. This ``__init__`` is not copied.
"""
