"""The grader: an HTTP service per run that scores submitted models, one at a time.

Headless: nothing here imports textual or rich. The run layer uses only ``client`` and
``launch``; the rest (server, worker, engines, evaluators, sandbox) is the grader's own.
"""
