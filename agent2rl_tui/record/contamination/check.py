"""The check itself: the run's eval index, the history, then what only the final workspace holds.

``check_run`` builds the index from the run's own eval items (its eval seed's draw:
record/evalset.py, the ones the grader scores) and the task's train split; ``scan_run``
scans with a ready index and folds the blobs' and the workspace's findings into one
``Hit`` per path.
"""

from __future__ import annotations

import time
from pathlib import Path

from agent2rl_tui.record.contamination.blobs import RevisionBlobs, revision_blobs, scan_blobs
from agent2rl_tui.record.contamination.ngrams import MIN_SHARED, N_TOKENS, EvalIndex, build_index
from agent2rl_tui.record.contamination.result import ContaminationResult, Hit
from agent2rl_tui.record.contamination.scanner import SIZE_CAP_BYTES, ScanStats, Seen
from agent2rl_tui.record.contamination.workspace import scan_workspace
from agent2rl_tui.record.evalset import run_eval_items
from agent2rl_tui.tasks.registry import Task


def check_run(run_dir: Path, task: Task, *, n: int = N_TOKENS, min_shared: int = MIN_SHARED,
              size_cap: int = SIZE_CAP_BYTES) -> ContaminationResult:
    """Scan a run's revisions and final workspace for the task's eval items."""
    started = time.monotonic()
    # The run's own eval items (its eval seed's draw: record/evalset.py), the ones the grader scores.
    index = build_index(run_eval_items(run_dir, task), task.load_split("train"), n=n, min_shared=min_shared)
    index_seconds = time.monotonic() - started
    result = scan_run(Path(run_dir), index, size_cap=size_cap)
    result.task = task.name
    result.index_seconds = round(index_seconds, 3)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def scan_run(run_dir: Path, index: EvalIndex, *, size_cap: int = SIZE_CAP_BYTES) -> ContaminationResult:
    """The check with a ready index: revisions first, then what only the final workspace holds."""
    started = time.monotonic()
    stats, seen = ScanStats(), Seen()
    revs = RevisionBlobs()
    blobs: dict[str, list[int]] = {}
    try:
        revs = revision_blobs(run_dir)
        blobs = scan_blobs(run_dir, revs.where, index, stats, size_cap, seen)
    except Exception as exc:  # noqa: BLE001 - a broken repo still leaves the workspace to scan
        stats.error("snapshots.git", exc)
    final = scan_workspace(run_dir, index, stats, size_cap, seen)
    hits = _hits(index, revs, blobs, final)
    items = sorted({i for hit in hits for i in hit.items})
    return ContaminationResult(
        n=index.n, min_shared=index.min_shared, eval_items=len(index.item_ids),
        checkable_items=index.checkable, revisions_scanned=revs.revisions,
        files_scanned=stats.files_scanned, bytes_scanned=stats.bytes_scanned,
        skipped=dict(stats.skipped), errors=stats.errors, hits=hits, items=items,
        contaminated=bool(items), seconds=round(time.monotonic() - started, 3),
    )


def _hits(index: EvalIndex, revs: RevisionBlobs, blobs: dict[str, list[int]],
          final: dict[str, list[int]]) -> list[Hit]:
    """One hit per path that held eval items: in which revisions, whether still at the end, which items."""
    revisions: dict[str, set[int]] = {}
    items: dict[str, set[int]] = {}
    at_end: set[str] = set()
    for sha, found in blobs.items():
        for seq, path in revs.holders(sha):
            revisions.setdefault(path, set()).add(seq)
            items.setdefault(path, set()).update(found)
    for path, found in final.items():
        revisions.setdefault(path, set())
        items.setdefault(path, set()).update(found)
        at_end.add(path)
    return [Hit(path=path, revisions=sorted(revisions[path]), in_final_workspace=path in at_end,
                items=sorted(index.item_ids[i] for i in items[path]))
            for path in sorted(revisions)]
