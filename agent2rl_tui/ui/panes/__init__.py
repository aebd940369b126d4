"""The Run screen panes: Scores, Revisions, Transcript, Logs, Report; each updates from a RunView."""
