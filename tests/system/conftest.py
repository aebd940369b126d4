"""The system tier: Slurm, the npm agent CLIs, vLLM, chromium, fresh installs, every benchmark's
quick run and the type checker: what needs more of the machine than a Python process and the tiny model;
and the whole runs that train for a minute or more (GSM8K at the example agent's default sizes, its
Level-3 routes), each minutes of a change's loop (`make test-fast`) on two cores.
"""
