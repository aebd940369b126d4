"""Small Python programs a scripted agent (a shell `command` agent) runs in its workspace, shared by
the tests that need one: a changed copy of the base model, and a submission to the grader."""

MUTATE = '''import os, pathlib, shutil, sys
src, dst = pathlib.Path(os.environ["MODEL_PATH"]), pathlib.Path(sys.argv[1])
shutil.copytree(src, dst, copy_function=shutil.copyfile)  # the base model's files are read-only
w = dst / "model.safetensors"
data = bytearray(w.read_bytes())
data[len(data) // 2] ^= int(sys.argv[2])  # a weight of its own
w.write_bytes(bytes(data))
'''
"""``python -c "$MUTATE" output/m1 1``: the base model with one weight changed, at output/m1."""

SUBMIT = '''import json, os, sys, urllib.request as u
body = json.dumps({"model_path": os.path.abspath(sys.argv[1])}).encode()
print(u.urlopen(u.Request(os.environ["GRADING_SERVER_URL"] + "/submit", data=body,
                          headers={"content-type": "application/json"})).status)
'''
"""``python -c "$SUBMIT" output/m1``: POST /submit and wait for the score."""


def stand_in_trainer(kind: str, seconds: float) -> str:
    """A training script that names TRL's ``{kind}Trainer`` for the code facts (which read the code) and
    "trains" by sleeping ``seconds``: the diagnosis counts the time it was seen running. It never builds
    the trainer: importing TRL costs about 10 s of CPU."""
    return f'''import time


def trainer():  # named for the code facts; never built
    from trl import {kind}Config, {kind}Trainer
    return {kind}Trainer, {kind}Config


time.sleep({seconds})
'''
