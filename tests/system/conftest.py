"""The system tier: Slurm, the npm agent CLIs, vLLM, chromium, fresh installs, every benchmark's
quick run and the type checker: what needs more of the machine than a Python process and the tiny model.
"""
