"""The example agent: a scripted SFT-then-GRPO post-training run with TRL, no LLM.

It does what a competent coding agent would do on a GSM8K-style task, in the workspace the
supervisor prepared, and nothing an outside agent could not: it writes its training code
into ``code/`` (the scripts in ``scripts/``, copied as files), runs it as a subprocess,
saves full models under ``output/`` and submits them over the grader's HTTP API with its
own standard-library client (``grader_api``). Stage one is supervised fine-tuning on the
``#### N`` replies (output/v1); stage two adds a GRPO script with an exact-match reward
and trains from v1 (output/v2), so the run's record shows the code growing between the two
submissions. It is the demo's agent, the test suite's, and a template for scripted
baselines.

It imports nothing else of agent2rl_tui (an import-linter contract checks this): it is an
ordinary client of the benchmark, launched as ``python -m agent2rl_tui.agents.example``.
"""
