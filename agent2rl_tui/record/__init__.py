"""The run folder, read and written here only: run.db (runs, submissions, revisions, steps,
samples), snapshots.git, per-item results and reports, and the queries every front end
asks (run index, run view, transcripts, diffs, compare). Knows nothing of processes."""
