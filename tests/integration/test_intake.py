"""The grader against hostile submissions: what is scored is exactly what was submitted, when it
was submitted; nothing of an evaluation reaches the agent; a model cannot make the eval
worker hang or eat the machine; another user cannot reach the grader.

Real files (FIFOs, symlinks, safetensors written by hand), a real grader subprocess with real
eval workers on the tiny model, real processes of another uid.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from support.lazy import lazy
from support.runs import LiveGrader, make_prepared_run, wait_for

from agent2rl_tui.grader.failures import ADVICE
from agent2rl_tui.grader.server.intake import BaseModel, Manifest, take
from agent2rl_tui.grader.server.validation import Rejection
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.tasks.modelfiles import weights_hash
from agent2rl_tui.tasks.registry import load_task

safetensors_torch = lazy("safetensors.torch")  # torch, imported by the tests that write weights

MIB = 1 << 20


def model_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def zeroed(src: Path, dst: Path) -> Path:
    """The base model with every weight set to zero (it scores nothing)."""
    model_folder(src, dst)
    tensors = safetensors_torch.load_file(str(dst / "model.safetensors"))
    safetensors_torch.save_file({k: v * 0 for k, v in tensors.items()}, str(dst / "model.safetensors"))
    return dst


def refused(folder: Path, dest: Path, **kw) -> Rejection:
    with pytest.raises(Rejection) as info:
        take(folder, folder.parent, dest, max_bytes=kw.pop("max_bytes", 1 << 30), base=kw.pop("base", None))
    assert not dest.exists(), "a refused intake leaves no copy behind"
    return info.value


# -- the intake on its own ------------------------------------------------------------------------

def test_the_copy_holds_exactly_what_an_engine_loads(tiny_model: Path, tmp_path: Path) -> None:
    folder = zeroed(tiny_model, tmp_path / "ws" / "zeroed")
    # Decoys: the base model's weights beside the loaded file, where a hash over every weights-like
    # file would see them (and, sorted after model.safetensors, overwrite its tensors in the hash).
    shutil.copy(tiny_model / "model.safetensors", folder / "model2.safetensors")
    shutil.copy(tiny_model / "model.safetensors", folder / "pytorch_model.bin")
    (folder / "training_args.bin").write_bytes(os.urandom(64))
    taken = take(folder, folder.parent, tmp_path / "copy", max_bytes=1 << 30, base=None)
    names = {f.name for f in taken.manifest.files}
    assert names == {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json", "chat_template.jinja"}
    assert sorted(os.listdir(taken.folder)) == sorted(names)
    assert taken.manifest.left_out == ["model2.safetensors", "pytorch_model.bin", "training_args.bin"]
    # The hash is of the zeroed weights the engine loads, never the decoy base copy.
    assert weights_hash(taken.folder, taken.manifest.weight_names) != weights_hash(tiny_model)
    # A base copy behind an extra .bin is still the base model's weights, and hashes as such.
    base_copy = model_folder(tiny_model, tmp_path / "ws" / "base-copy")
    shutil.copy(folder / "model.safetensors", base_copy / "pytorch_model.bin")
    again = take(base_copy, base_copy.parent, tmp_path / "copy2", max_bytes=1 << 30, base=None)
    assert weights_hash(again.folder, again.manifest.weight_names) == weights_hash(tiny_model)
    assert Manifest.from_dict(json.loads(json.dumps(again.manifest.to_dict()))) == again.manifest


def test_special_files_links_and_oversize_are_refused_without_blocking(tiny_model: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    fifo = model_folder(tiny_model, ws / "fifo")
    (fifo / "model.safetensors").unlink()
    os.mkfifo(fifo / "model.safetensors")  # nobody ever writes: opening it for reading would block
    started = time.monotonic()
    assert refused(fifo, tmp_path / "c1").code == "not_a_regular_file"
    assert time.monotonic() - started < 5
    linked = model_folder(tiny_model, ws / "linked")
    (linked / "tokenizer.json").unlink()
    (linked / "tokenizer.json").symlink_to(tiny_model / "tokenizer.json")
    rej = refused(linked, tmp_path / "c2")
    assert rej.code == "symlink" and "tokenizer.json" in rej.detail and "cp -L" in rej.detail
    assert refused(model_folder(tiny_model, ws / "big"), tmp_path / "c3", max_bytes=100_000).code == "too_large"


def test_weights_written_while_they_are_copied_are_refused(tiny_model: Path, tmp_path: Path) -> None:
    """A save still in progress (or a writer racing the grader) is refused, never copied half-old."""
    import threading

    folder = model_folder(tiny_model, tmp_path / "ws" / "saving")
    with (folder / "model.safetensors").open("ab") as fh:  # big enough that the copy takes a while
        for _ in range(256):
            fh.write(os.urandom(MIB))
    stop = threading.Event()

    def keep_writing() -> None:
        with (folder / "model.safetensors").open("r+b") as fh:
            while not stop.is_set():
                fh.seek(0, os.SEEK_END)
                fh.write(b"\0")
                fh.flush()
                time.sleep(0.001)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        rej = refused(folder, tmp_path / "copy")
    finally:
        stop.set()
        writer.join()
    assert (rej.status, rej.code) == (409, "changed_while_copied")


def test_broken_or_lying_weights_are_refused(tiny_model: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    huge_header = model_folder(tiny_model, ws / "header")
    (huge_header / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    assert refused(huge_header, tmp_path / "c1").code == "invalid_weights"
    offsets = model_folder(tiny_model, ws / "offsets")  # a tensor's bytes said to lie past the file's end
    raw = (offsets / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 1 << 30
    blob = json.dumps(header).encode()
    (offsets / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + raw[8 + n:])
    assert refused(offsets, tmp_path / "c2").code == "invalid_weights"
    nested = model_folder(tiny_model, ws / "nested")
    (nested / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert refused(nested, tmp_path / "c3").code == "invalid_json_file"
    index = model_folder(tiny_model, ws / "index")
    (index / "model.safetensors").rename(index / "shard.safetensors")
    (index / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../outside.safetensors"}}))
    assert refused(index, tmp_path / "c4").code == "invalid_index"


def test_a_checkpoint_lacking_weights_its_config_declares_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    partial = model_folder(tiny_model, tmp_path / "ws" / "partial")
    tensors = safetensors_torch.load_file(str(partial / "model.safetensors"))
    dropped = sorted(k for k in tensors if "layers.1." in k)
    safetensors_torch.save_file({k: v for k, v in tensors.items() if k not in dropped}, str(partial / "model.safetensors"))
    rej = refused(partial, tmp_path / "c", base=BaseModel.read(tiny_model))
    assert rej.status == 422 and rej.code == "missing_weights" and dropped[0] in rej.detail


def test_a_config_declaring_layers_its_weights_lack_is_refused_before_any_is_built(tiny_model: Path,
                                                                                  tmp_path: Path) -> None:
    """Of the base model's architecture or another, with no base to compare against: 20,000 declared
    layers over two layers' weights would be built one by one, at random, for the whole eval timeout."""
    deep = model_folder(tiny_model, tmp_path / "ws" / "deep")
    config = json.loads((deep / "config.json").read_text())
    (deep / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 20_000}))
    for base in (BaseModel.read(tiny_model), None):
        rej = refused(deep, tmp_path / f"c-{base is None}", base=base)
        assert rej.status == 422 and rej.code == "missing_weights" and "20,000 layers" in rej.detail


def test_decoding_is_the_tasks_on_both_engines(tiny_model: Path, tmp_path: Path) -> None:
    """Beams, sampling, penalties, forced lengths and suppressed tokens in the model folder change nothing."""
    from agent2rl_tui.grader.engines.hf import TransformersEngine

    hostile = model_folder(tiny_model, tmp_path / "ws" / "hostile")
    gen = json.loads((hostile / "generation_config.json").read_text())
    gen.update(num_beams=4, num_return_sequences=2, do_sample=True, temperature=5.0, min_new_tokens=8,
               repetition_penalty=3.0, suppress_tokens=list(range(5, 300)))
    (hostile / "generation_config.json").write_text(json.dumps(gen))
    legacy = model_folder(tiny_model, tmp_path / "ws" / "legacy")  # the old place: decoding keys in config.json
    (legacy / "generation_config.json").unlink()
    cfg = json.loads((legacy / "config.json").read_text())
    (legacy / "config.json").write_text(json.dumps({**cfg, "num_beams": 3, "min_new_tokens": 6,
                                                    "repetition_penalty": 2.5}))
    settings = load_task("arith").inference
    prompts = ["1+2=", "13+4=", "7+19="]

    def outputs(folder: Path) -> list[str]:
        engine = TransformersEngine()
        engine.load(folder)
        return engine.generate(prompts, settings)

    clean = outputs(take(tiny_model, None, tmp_path / "c0", max_bytes=1 << 30, base=None).folder)
    for folder in (hostile, legacy):
        taken = take(folder, folder.parent, tmp_path / f"c-{folder.name}", max_bytes=1 << 30, base=None)
        assert outputs(taken.folder) == clean
        assert taken.manifest.ignored_settings
    assert "generation_config.json: num_beams" in take(hostile, hostile.parent, tmp_path / "c3",
                                                        max_bytes=1 << 30, base=None).manifest.ignored_settings
    # Untaken, the hostile folder does change what transformers generates: the test can fail.
    assert outputs(hostile) != clean


# -- through a real grader ------------------------------------------------------------------------

def hostile_template(base: Path, folder: Path, template: str) -> Path:
    model_folder(base, folder)
    (folder / "chat_template.jinja").write_text(template)
    return folder


def eval_questions(run_dir: Path) -> list[str]:
    """The questions the run's grader asks (its own draw, from its record)."""
    from agent2rl_tui.record.evalset import run_eval_items

    return [item["question"] for item in run_eval_items(run_dir, load_task("arith"))]


@pytest.fixture(scope="module")
def hostile_grader(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path):
    run_dir = make_prepared_run(tmp_path_factory.mktemp("hostile-runs"), tiny_model)
    with RunStore.of_run(run_dir) as store:  # a small memory limit for the eval worker, as --eval-memory gives
        cfg = json.loads(store.run().config_json)
        store.update_run(config_json=json.dumps({**cfg, "eval_memory_gib": 1.5, "max_queued": 3}))
    grader = LiveGrader(run_dir)
    yield grader
    grader.close()


def base_of(grader: LiveGrader) -> Path:
    return next((grader.workspace / "models").iterdir())


def prompts_of(grader: LiveGrader, sub_id: int) -> list[str]:
    rows = (grader.run_dir / "evals" / str(sub_id) / "results.jsonl").read_text().splitlines()
    return [json.loads(r)["prompt"] for r in rows]


def test_a_submitted_chat_template_is_never_used(hostile_grader: LiveGrader) -> None:
    """A template is code that sees each eval prompt: it could raise with it (and an error text would
    carry it back), or compute the answer into the prompt. The grader asks with the base model's."""
    base = base_of(hostile_grader)
    output = hostile_grader.workspace / "output"
    hostile_template(base, output / "leak", "{{ raise_exception('LEAK ' + messages[-1]['content']) }}")
    hostile_template(base, output / "solve", "{% for m in messages %}{% set p = m['content'].rstrip('=').split('+') %}"
                                              "{{ m['content'] }} #### {{ (p[0]|int) + (p[-1]|int) }}\n{% endfor %}")
    for name in ("leak", "solve"):
        resp = hostile_grader.client.submit(f"output/{name}")
        body = resp.json()
        assert body["status"] == "scored", body
        assert any("chat template differs" in note for note in body["ignored_settings"])
        assert prompts_of(hostile_grader, body["submission_id"]) == prompts_of(hostile_grader, 0)  # the base's
        listed = json.dumps(hostile_grader.client.submissions()) + json.dumps(hostile_grader.client.health())
        for text in (resp.text, listed):
            assert "LEAK" not in text and not any(q in text for q in eval_questions(hostile_grader.run_dir))


def test_a_failed_evaluation_answers_a_code_and_keeps_its_text_for_the_record(hostile_grader: LiveGrader) -> None:
    """A model that fails while it generates (its vocabulary cut below the tokenizer's ids)."""
    folder = model_folder(base_of(hostile_grader), hostile_grader.workspace / "output" / "cut")
    tensors = safetensors_torch.load_file(str(folder / "model.safetensors"))
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"][:8].clone()
    safetensors_torch.save_file(tensors, str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 8, "bos_token_id": 0, "eos_token_id": 2,
                                                    "pad_token_id": 0}))
    body = hostile_grader.client.submit("output/cut").json()
    assert body["status"] == "failed" and body["error"] == "generation_failed", body
    assert body["detail"] == ADVICE["generation_failed"]  # our words only
    with hostile_grader.store() as store:
        recorded = store.submission(body["submission_id"])
    assert recorded.error_code == "generation_failed" and "index" in recorded.error.lower()
    assert "index" not in json.dumps(hostile_grader.client.submission(body["submission_id"])).lower()


def test_a_config_that_eats_memory_fails_alone(hostile_grader: LiveGrader) -> None:
    """Another architecture (no base tensors to check against) whose position table is 2 GiB, every
    weight of it missing: transformers fills it at random, and the worker's memory limit stops it."""
    folder = hostile_grader.workspace / "output" / "bomb"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 1 << 23, "n_embd": 64,
        "n_layer": 1, "n_head": 2, "vocab_size": 768, "bos_token_id": 0, "eos_token_id": 2}))
    import torch

    safetensors_torch.save_file({"transformer.wte.weight": torch.zeros(768, 64), "transformer.h.0.ln_1.weight": torch.ones(64)},
              str(folder / "model.safetensors"))
    bomb = hostile_grader.client.submit("output/bomb").json()
    assert bomb["status"] == "failed" and bomb["error"] == "out_of_memory", bomb
    fine = hostile_grader.client.submit(model_copy_of(hostile_grader, "fine")).json()  # the run goes on
    assert fine["status"] == "scored" and fine["score"] == hostile_grader.health["baseline"]["score"]
    with hostile_grader.store() as store:
        assert "GiB" in store.submission(bomb["submission_id"]).error


def test_a_pickle_checkpoint_lacking_weights_fails_at_load_and_is_never_scored(hostile_grader: LiveGrader) -> None:
    """The intake reads tensor names from safetensors headers only; a pytorch_model.bin lacking
    a layer gets past it and is stopped where the engine loads it: failed, code missing_weights,
    never scored with random weights."""
    import torch

    folder = hostile_grader.workspace / "output" / "pickled"
    model_folder(base_of(hostile_grader), folder)
    tensors = safetensors_torch.load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save({k: v for k, v in tensors.items() if "layers.1." not in k}, folder / "pytorch_model.bin")
    answer = hostile_grader.client.submit("output/pickled").json()
    assert answer["status"] == "failed" and answer["error"] == "missing_weights", answer
    assert answer.get("score") is None
    with hostile_grader.store() as store:
        assert "layers.1." in store.submission(answer["submission_id"]).error  # the full text, for the person


def model_copy_of(grader: LiveGrader, name: str) -> str:
    if not (grader.workspace / "output" / name).exists():
        model_folder(base_of(grader), grader.workspace / "output" / name)
    return f"output/{name}"


def test_a_chat_template_that_never_ends_is_stopped(tiny_model: Path, tmp_path: Path) -> None:
    """Rendering is bounded in time whatever the template (the worker's own; a submission's is never used)."""
    from agent2rl_tui.grader.engines.base import EngineError, render_chat
    from agent2rl_tui.tasks.modelfiles import load_tokenizer

    tok = load_tokenizer(tiny_model)
    tok.chat_template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    started = time.monotonic()
    with pytest.raises(EngineError) as info:
        render_chat(tok, [{"role": "user", "content": "1+1="}], False, time_limit_s=0.5)
    assert info.value.code == "chat_template_timeout" and time.monotonic() - started < 10


def test_malformed_requests_get_a_4xx_and_a_record_row(hostile_grader: LiveGrader) -> None:
    url = hostile_grader.url + "/submit"

    def count() -> int:
        with hostile_grader.store() as store:
            return len(store.submissions(kind="agent"))

    cases = [
        (b'{"model_path": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 400, "invalid_json"),
        (json.dumps({"model_path": "output/" + "x" * 100_000}).encode(), 400, "invalid_path"),
        (b'{"model_path": "output/\\udc80"}', 400, "invalid_path"),
        (b'{"model_path": "output/fine", "gpu": "0; rm -rf /"}', 400, "unknown_field"),
        (b'{"model_path": "output/fine", "gpu": "1"}', 400, "unknown_field"),
    ]
    for body, status, code in cases:
        before = count()
        resp = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=60)
        assert (resp.status_code, resp.json()["error"]) == (status, code)
        assert count() == before + 1
    # 300 MB announced: refused before it is read; a chunked body with no length: cut at 1 MB.
    before = count()
    parsed = httpx.URL(url)
    with socket.create_connection((parsed.host, parsed.port), timeout=60) as sock:  # only the head is sent
        sock.sendall(f"POST {parsed.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {300 * MIB}\r\n\r\n{{}}".encode())
        answer = b""
        while b"too_large" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413") and b"too_large" in answer

    def chunks():
        for _ in range(300):
            yield b" " * MIB

    resp = httpx.post(url, content=chunks(), timeout=60)
    assert (resp.status_code, resp.json()["error"]) == (413, "too_large")
    assert count() == before + 2
    # A folder of more entries than any model has: refused before anything lists it whole.
    crowded = hostile_grader.workspace / "output" / "crowded"
    crowded.mkdir(parents=True)
    for n in range(10_001):
        (crowded / f"f{n}").touch()
    resp = httpx.post(url, json={"model_path": "output/crowded"}, timeout=60)
    assert (resp.status_code, resp.json()["error"]) == (422, "too_many_files")
    assert count() == before + 3
    # Requests that are not submissions get their 4xx and an event each.
    bad = [httpx.get(hostile_grader.url + "/submissions/99999999999999999999999"),
           httpx.get(hostile_grader.url + "/submissions/424242"),
           httpx.get(hostile_grader.url + "/%1b]0;forged%07nowhere"),
           httpx.delete(hostile_grader.url + "/submit"),
           httpx.get(hostile_grader.url.rsplit("/", 1)[0] + "/guessing-the-secret/submissions")]
    assert [r.status_code for r in bad] == [400, 404, 404, 405, 404]
    assert all(set(r.json()) == {"error", "detail"} for r in bad)
    with hostile_grader.store() as store:
        events = [e for e in store.events() if e["kind"] == "bad_request"]
    assert [json.loads(e["data_json"])["code"] for e in events][-5:] == [
        "invalid_id", "not_found", "not_found", "method_not_allowed", "not_found"]
    assert all("\x1b" not in e["message"] for e in events)  # the path is recorded inert


def test_the_queue_is_bounded(hostile_grader: LiveGrader) -> None:
    """Evaluations that take long (the eval worker frozen here, as by a slow model on a busy
    machine): past three waiting, a submission is refused with 429 until the queue drains."""
    import psutil

    model_folder(base_of(hostile_grader), hostile_grader.workspace / "output" / "q")
    worker = psutil.Process(hostile_grader.proc.popen.pid).children(recursive=True)
    for p in worker:
        p.suspend()
    try:
        answers = [hostile_grader.client.submit("output/q", wait=False) for _ in range(5)]
    finally:
        for p in worker:
            p.resume()
    codes = [a.status_code for a in answers]
    assert codes[:3] == [202, 202, 202] and 429 in codes[3:], codes
    assert answers[codes.index(429)].json()["error"] == "queue_full"
    wait_for(lambda: all(s["status"] not in ("queued", "evaluating") for s in hostile_grader.client.submissions()),
             timeout=600, what="the queue to drain")


def test_only_the_runs_user_reaches_its_grader(hostile_grader: LiveGrader) -> None:
    if os.getuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None:
        pytest.skip("needs root and setpriv to act as another user (nobody): run the suite as root to test this")
    before = len(hostile_grader.client.submissions())
    # A connection of the owner's stays open (keep-alive): its port, named in X-Forwarded-For, must not pass.
    owner = socket.create_connection((httpx.URL(hostile_grader.url).host, httpx.URL(hostile_grader.url).port))
    forged = f"X-Forwarded-For: 127.0.0.1:{owner.getsockname()[1]}"
    for args in (["-X", "POST", "-H", "Content-Type: application/json", "-d", '{"model_path": "output/q"}',
                  hostile_grader.url + "/submit"], [hostile_grader.url + "/submissions"],
                 ["-H", forged, hostile_grader.url + "/submissions"]):
        # The secret URL leaked (a command line, ps): another user has it whole.
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-s",
                              "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60)
        body, status = out.stdout.rsplit("\n", 1)
        assert status == "403" and json.loads(body)["error"] == "not_your_run", out
    owner.close()
    assert len(hostile_grader.client.submissions()) == before  # nothing submitted, nothing read
    with hostile_grader.store() as store:
        assert [e for e in store.events() if e["kind"] == "foreign_request"]


def test_a_folder_written_after_acceptance_is_scored_as_it_was(hostile_grader: LiveGrader, tiny_model: Path) -> None:
    output = hostile_grader.workspace / "output"
    model_folder(base_of(hostile_grader), output / "busy")
    late = model_folder(base_of(hostile_grader), output / "late")
    first = hostile_grader.client.submit("output/busy", wait=False).json()["submission_id"]
    queued = hostile_grader.client.submit("output/late", wait=False).json()["submission_id"]
    zeroed(base_of(hostile_grader), output / "zeros")
    shutil.copy(output / "zeros" / "model.safetensors", late / "model.safetensors")  # written after submitting
    done = wait_for(lambda: all(hostile_grader.client.submission(i)["status"] in ("scored", "failed")
                                for i in (first, queued)), timeout=600, what="both evaluations")
    assert done
    body = hostile_grader.client.submission(queued)
    assert body["status"] == "scored" and body["score"] == hostile_grader.health["baseline"]["score"]
    with hostile_grader.store() as store:
        assert store.submission(queued).weights_hash == store.baseline().weights_hash
