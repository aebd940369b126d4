"""Leaves: time formats, process groups, GPUs, logging set-up. Imports nothing of ours."""
