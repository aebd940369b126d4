"""Small Python programs a scripted agent (a shell `command` agent) runs in its workspace, shared by
the tests that need one: a changed copy of the base model, and a submission to the grader; and the
named agent that runs them (``submitter_profile``)."""

import json
import sys
from pathlib import Path

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


def submitter_profile(folder: Path) -> dict[str, str]:
    """Write ``folder/agents.toml`` with ``[agents.submitter]``, a named command that submits a changed
    copy of the base model (as a researcher names each command agent of a campaign: its own cell),
    and return the environment that names the file (``AGENT2RL_AGENTS``) for a CLI to inherit."""
    env = {"PY": sys.executable, "MUTATE_CODE": MUTATE, "SUBMIT_CODE": SUBMIT}
    path = folder / "agents.toml"
    path.write_text("[agents.submitter]\n"
                    'extends = "command"\n'
                    'description = "submits a changed copy of the base model"\n'
                    "command = [\"bash\", \"-c\", "
                    + json.dumps('"$PY" -c "$MUTATE_CODE" output/m1 1 && "$PY" -c "$SUBMIT_CODE" output/m1') + "]\n"
                    "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n",
                    encoding="utf-8")
    return {"AGENT2RL_AGENTS": str(path)}
