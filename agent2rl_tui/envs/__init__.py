"""Interactive environments for Level-3 tasks: one protocol (``base``) and its adapters.

Below the grader (which plays episodes through them) and above nothing of ours but the
leaves: an environment knows games and actions, not runs, records or models.
"""
