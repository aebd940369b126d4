"""Screens of the TUI: Runs (home), Run, New run, Compare, and small modals."""
