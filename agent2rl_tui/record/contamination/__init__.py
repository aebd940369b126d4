"""The contamination check: did the agent put eval items in what it wrote?

The agent never sees the eval split, but nothing stops it from downloading the test split
of a public benchmark and training on it. After a run the supervisor scans everything the
agent wrote for long token sequences of the eval items, so a reviewer learns which items
leaked, into which file, and when. An item counts as found in a file when the file shares
enough long n-grams of it (two of 13 tokens, by default) that the train split does not hold.

What is scanned: every distinct blob of every revision in ``snapshots.git`` (read once
each, and mapped back to the revisions and paths that hold it), and the files in
``workspace/`` and the agent's home at the end that no revision holds. The result goes to
``report/contamination.json`` and into the report.

The modules, one job each:

- ``ngrams``: how an item is recognised: normalisation, token and n-gram hashes, the eval
  index (``build_index``);
- ``scanner``: one stream of bytes scanned in chunks, the counts and the contents seen;
- ``blobs``: the history: the blobs of snapshots.git, each read once;
- ``workspace``: the final workspace and the agent's home, read as hostile data;
- ``result``: the typed result (``ContaminationResult``, ``Hit``) and its file;
- ``check``: ``check_run`` and ``scan_run``, the check itself;
- ``params``: the check's parameters (n-gram length, n-grams needed, chunk size).

The names below are imported from their modules on first use (``__getattr__``): reading a
result (``ContaminationResult``: the run index, the report) loads neither numpy nor git.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent2rl_tui.record.contamination.blobs import RevisionBlobs, revision_blobs, scan_blobs
    from agent2rl_tui.record.contamination.check import check_run, scan_run
    from agent2rl_tui.record.contamination.ngrams import EvalIndex, build_index, item_id, ngram_hashes, normalise, token_hashes
    from agent2rl_tui.record.contamination.params import CHUNK_BYTES, MIN_SHARED, N_TOKENS
    from agent2rl_tui.record.contamination.result import (
        REPORT_FILE,
        ContaminationResult,
        Hit,
        read_contamination,
        write_contamination,
    )
    from agent2rl_tui.record.contamination.scanner import (
        MAX_ENTRIES,
        MAX_ERRORS_LISTED,
        MIN_CUT_LIMIT,
        SIZE_CAP_BYTES,
        Scanner,
        ScanStats,
        Seen,
        scan_stream,
    )
    from agent2rl_tui.record.contamination.workspace import (
        AGENT_HOME,
        NOT_SCANNED_TOP,
        PACKAGE_DIR_NAMES,
        WEIGHT_SUFFIXES,
        git_blob_sha,
        scan_workspace,
        workspace_files,
    )

__all__ = [
    "AGENT_HOME", "CHUNK_BYTES", "MAX_ENTRIES", "MAX_ERRORS_LISTED", "MIN_CUT_LIMIT", "MIN_SHARED", "NOT_SCANNED_TOP",
    "N_TOKENS", "PACKAGE_DIR_NAMES", "REPORT_FILE", "SIZE_CAP_BYTES", "WEIGHT_SUFFIXES", "ContaminationResult",
    "EvalIndex", "Hit", "RevisionBlobs", "ScanStats", "Scanner", "Seen", "build_index", "check_run",
    "git_blob_sha", "item_id", "ngram_hashes", "normalise", "read_contamination", "revision_blobs", "scan_blobs",
    "scan_run", "scan_stream", "scan_workspace", "token_hashes", "workspace_files", "write_contamination",
]

_MODULES = ("params", "result", "ngrams", "scanner", "workspace", "blobs", "check")
"""Where ``__getattr__`` looks for a name of ``__all__``, lightest first."""


def __getattr__(name: str) -> object:
    if name in __all__:
        for module in _MODULES:
            found = importlib.import_module(f"{__name__}.{module}")
            if name in vars(found):
                value = vars(found)[name]
                globals()[name] = value
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
