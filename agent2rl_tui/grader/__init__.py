"""The grader: an HTTP service per run that scores submitted models, one at a time.

Pure core: nothing here imports textual or rich.
"""
