"""The run folder and its types, read and written here only: run.db (runs, submissions,
revisions, steps, samples, meter and environment calls), snapshots.git, per-item results,
transcripts, the contamination check's findings, and where runs live. Knows nothing of
processes, and nothing of how a reader is shown a run (that is ``review``)."""
