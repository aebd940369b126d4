"""The grader's HTTP API against a real grader subprocess, real eval workers and the tiny model."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import httpx
import pytest
from support.runs import LiveGrader, make_prepared_run, wait_for

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.util.timeutil import now


def writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture(scope="module")
def model_copy(live_grader: LiveGrader) -> str:
    """A copy of the base model under output/ (a valid submission, and a base copy)."""
    base = next((live_grader.workspace / "models").iterdir())
    writable_copy(base, live_grader.workspace / "output" / "copy")
    return "output/copy"


def rows(live_grader: LiveGrader) -> list:
    with live_grader.store() as store:
        return store.submissions(kind="agent")


def test_health_reports_the_scored_baseline(live_grader: LiveGrader) -> None:
    health = live_grader.client.health()
    assert health["status"] == "ok"
    assert health["task"] == "arith"
    assert health["baseline"]["status"] == "scored"
    assert 0.0 <= health["baseline"]["score"] <= 100.0
    results = (live_grader.run_dir / "evals" / "0" / "results.jsonl").read_text().splitlines()
    assert len(results) == 100  # the whole held-out split


def test_a_valid_submission_is_scored_and_recorded(live_grader: LiveGrader, model_copy: str) -> None:
    resp = live_grader.client.submit(model_copy)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "scored"
    baseline = live_grader.client.health()["baseline"]["score"]
    # Same weights as the base model, same greedy outputs, same score.
    assert body["score"] == pytest.approx(baseline)
    assert body["baseline_score"] == pytest.approx(baseline)
    assert body["improvement"] == pytest.approx(0.0)
    with live_grader.store() as store:
        sub = store.submission(body["submission_id"])
        base = store.baseline()
    assert sub.status == "scored" and sub.model_path == model_copy
    assert sub.weights_hash == base.weights_hash  # a base copy, found by its weights
    summary = json.loads((live_grader.run_dir / "evals" / str(sub.id) / "summary.json").read_text())
    assert summary["n_items"] == 100 and summary["engine"] == "transformers"


def post_raw(live_grader: LiveGrader, content: bytes) -> httpx.Response:
    return httpx.post(f"{live_grader.url}/submit", content=content,
                      headers={"Content-Type": "application/json"}, timeout=60)


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_json"),
        (b"{}", 400, "missing_model_path"),
        (b'{"model_path": 3}', 400, "missing_model_path"),
        (b'{"model_path": "output/nothing-here"}', 404, "not_found"),
    ],
)
def test_bad_requests_get_a_4xx_that_says_what_to_do(live_grader: LiveGrader, content: bytes, status: int,
                                                     code: str) -> None:
    before = len(rows(live_grader))
    resp = post_raw(live_grader, content)
    assert resp.status_code == status
    body = resp.json()
    assert body["error"] == code
    assert len(body["detail"]) > 20  # advice, not just a code
    after = rows(live_grader)
    assert len(after) == before + 1  # recorded, not lost
    assert after[-1].status == "rejected" and after[-1].error.startswith(code)


def test_a_path_outside_the_workspace_is_refused(live_grader: LiveGrader, tiny_model: Path) -> None:
    resp = live_grader.client.submit(str(tiny_model))
    assert resp.status_code == 403
    assert resp.json()["error"] == "outside_workspace"


def test_a_symlink_out_of_the_workspace_is_refused(live_grader: LiveGrader, tiny_model: Path) -> None:
    link = live_grader.workspace / "output" / "sneaky"
    link.symlink_to(tiny_model, target_is_directory=True)
    resp = live_grader.client.submit("output/sneaky")
    assert resp.status_code == 403
    assert resp.json()["error"] == "outside_workspace"


def test_a_weights_file_linked_from_outside_the_workspace_is_refused(live_grader: LiveGrader,
                                                                     tiny_model: Path) -> None:
    folder = live_grader.workspace / "output" / "linked-weights"
    folder.mkdir()
    shutil.copy(tiny_model / "config.json", folder / "config.json")
    (folder / "model.safetensors").symlink_to(tiny_model / "model.safetensors")
    resp = live_grader.client.submit("output/linked-weights")
    assert resp.status_code == 422
    assert resp.json()["error"] == "symlink" and "model.safetensors" in resp.json()["detail"]
    assert not list((live_grader.run_dir / "intake").glob("pending-*"))  # the partial copy is gone


def test_what_is_scored_is_the_folder_as_submitted_not_as_changed_while_queued(
        live_grader: LiveGrader, model_copy: str, tiny_model: Path) -> None:
    swapped = writable_copy(live_grader.workspace / model_copy, live_grader.workspace / "output" / "swapped")
    first = live_grader.client.submit(model_copy, wait=False).json()["submission_id"]  # keeps the grader busy
    queued = live_grader.client.submit("output/swapped", wait=False).json()["submission_id"]
    shutil.rmtree(swapped)
    swapped.symlink_to(tiny_model, target_is_directory=True)  # accepted, then pointed outside...
    (live_grader.workspace / "output" / "swapped-later").mkdir()  # ... and garbage written in its place
    wait_for(lambda: all(live_grader.client.submission(i)["status"] in ("scored", "failed")
                         for i in (first, queued)), timeout=120, what="both submissions to finish")
    body = live_grader.client.submission(queued)
    assert body["status"] == "scored", body
    with live_grader.store() as store:
        # The grader's copy was taken at acceptance: the base model's weights, hashed as loaded.
        assert store.submission(queued).weights_hash == store.baseline().weights_hash
        manifest = json.loads(store.submission(queued).intake_json)["manifest"]
    assert {f["name"] for f in manifest["files"]} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert not (live_grader.run_dir / "intake" / str(queued)).exists()  # removed once scored


def test_dotdot_out_of_the_workspace_is_refused(live_grader: LiveGrader, tiny_model: Path) -> None:
    escape = "output/../../" + "../" * 10 + str(tiny_model).lstrip("/")
    resp = live_grader.client.submit(escape)
    assert resp.status_code == 403
    assert resp.json()["error"] == "outside_workspace"


def test_folder_without_config_is_refused(live_grader: LiveGrader) -> None:
    folder = live_grader.workspace / "output" / "weights-only"
    folder.mkdir()
    base = next((live_grader.workspace / "models").iterdir())
    shutil.copy(base / "model.safetensors", folder / "model.safetensors")
    resp = live_grader.client.submit("output/weights-only")
    assert resp.status_code == 422
    assert resp.json()["error"] == "no_config"


def test_folder_without_weights_is_refused(live_grader: LiveGrader) -> None:
    folder = live_grader.workspace / "output" / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    resp = live_grader.client.submit("output/config-only")
    assert resp.status_code == 422
    assert resp.json()["error"] == "no_weights"


def test_a_lora_adapter_is_refused_with_merge_advice(live_grader: LiveGrader) -> None:
    folder = live_grader.workspace / "output" / "lora"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    resp = live_grader.client.submit("output/lora")
    assert resp.status_code == 422
    body = resp.json()
    assert body["error"] == "lora_adapter"
    assert "merge_and_unload" in body["detail"]


def test_a_submission_after_the_deadline_is_refused(live_grader: LiveGrader, model_copy: str) -> None:
    with live_grader.store() as store:
        deadline = store.run().deadline
    live_grader.set_deadline(now() - 1)
    try:
        resp = live_grader.client.submit(model_copy)
    finally:
        live_grader.set_deadline(deadline)
    assert resp.status_code == 409
    assert resp.json()["error"] == "deadline_passed"
    assert rows(live_grader)[-1].status == "rejected"


def test_the_secret_prefix_guards_every_route(live_grader: LiveGrader) -> None:
    base = live_grader.url.rsplit("/", 1)[0]
    for path in ("/health", "/wrong-secret/health", "/wrong-secret/submit"):
        resp = httpx.get(base + path, timeout=10)
        assert resp.status_code == 404
        assert resp.json()["error"] == "not_found"


def test_concurrent_submissions_are_each_scored_once(live_grader: LiveGrader, model_copy: str) -> None:
    before = {s.id for s in rows(live_grader)}
    answers: list[dict] = []
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            with httpx.Client(timeout=300) as http:
                r = http.post(f"{live_grader.url}/submit", json={"model_path": model_copy})
                answers.append(r.json() | {"http": r.status_code})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    assert [a["http"] for a in answers] == [200] * 4
    ids = sorted(a["submission_id"] for a in answers)
    assert len(set(ids)) == 4
    assert all(a["status"] == "scored" for a in answers)
    new_rows = [s for s in rows(live_grader) if s.id not in before]
    assert sorted(s.id for s in new_rows) == ids  # each recorded exactly once
    # One evaluation at a time: no two evaluation windows overlap.
    windows = sorted((s.started_at, s.finished_at) for s in new_rows)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))
    counted = max(a["total_submissions"] for a in answers)
    assert counted == sum(1 for s in rows(live_grader) if s.status != "rejected")


def test_wait0_answers_at_once_and_the_status_can_be_polled(live_grader: LiveGrader, model_copy: str) -> None:
    resp = live_grader.client.submit(model_copy, wait=False)
    assert resp.status_code == 202
    sub_id = resp.json()["submission_id"]
    final = wait_for(
        lambda: (r := httpx.get(f"{live_grader.url}/submissions/{sub_id}", timeout=10).json())["status"]
        in ("scored", "failed") and r,
        timeout=120,
        what="the queued submission to be scored",
    )
    assert final["status"] == "scored"
    listed = live_grader.client.submissions()
    assert any(s["submission_id"] == sub_id and s["status"] == "scored" for s in listed)


def test_a_model_that_fails_to_load_is_recorded_as_failed(live_grader: LiveGrader, model_copy: str) -> None:
    folder = live_grader.workspace / "output" / "broken"
    folder.mkdir()
    base = next((live_grader.workspace / "models").iterdir())
    shutil.copy(base / "config.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes(b"this is not a safetensors file")
    resp = live_grader.client.submit("output/broken")
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_weights"  # refused at intake
    # Weights of another shape than the config says: taken, then the engine refuses to load them.
    shutil.rmtree(folder)
    writable_copy(base, folder)
    config = json.loads((base / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": config["intermediate_size"] * 2}))
    resp = live_grader.client.submit("output/broken")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "failed" and body["score"] is None
    assert body["error"] == "model_load_failed" and "save_pretrained" in body["detail"]
    with live_grader.store() as store:  # the engine's own words are in the record, not the answer
        assert "mismatch" in store.submission(body["submission_id"]).error.lower()
    # The grader is unharmed: the next submission is scored.
    assert live_grader.client.submit(model_copy).json()["status"] == "scored"


def worker_pid(run_dir: Path, sub_id: int) -> int:
    """The eval worker that graded a submission, from the header of its evals/<n>/worker.log."""
    header = (run_dir / "evals" / str(sub_id) / "worker.log").read_text().splitlines()[0]
    return int(header.split()[3].rstrip(","))


def test_the_worker_stays_between_submissions_and_a_dead_one_is_replaced(live_grader: LiveGrader,
                                                                         model_copy: str) -> None:
    import os
    import signal

    from agent2rl_tui.util import procs

    first = live_grader.client.submit(model_copy).json()
    second = live_grader.client.submit(model_copy).json()
    pid = worker_pid(live_grader.run_dir, first["submission_id"])
    assert worker_pid(live_grader.run_dir, second["submission_id"]) == pid  # warm: no new process
    summary = json.loads((live_grader.run_dir / "evals" / str(second["submission_id"]) / "summary.json").read_text())
    assert summary["timings"]["worker_start"] == 0.0 and summary["settings"]["engine_load"] == "fresh"
    os.killpg(pid, signal.SIGKILL)  # the worker dies between submissions (out of memory, say)
    wait_for(lambda: not procs.pid_alive(pid), timeout=10, what="the worker to die")
    third = live_grader.client.submit(model_copy).json()
    assert third["status"] == "scored" and third["score"] == second["score"]
    assert worker_pid(live_grader.run_dir, third["submission_id"]) != pid


def test_time_reports_the_budget(live_grader: LiveGrader) -> None:
    t = live_grader.client.time()
    assert t["timeout_s"] == 600
    assert 0 < t["remaining"] <= 600
    assert t["end_time"] == pytest.approx(t["start_time"] + 600)


def test_an_evaluation_past_its_timeout_is_killed_and_recorded(tmp_path: Path, tiny_model: Path) -> None:
    run_dir = make_prepared_run(tmp_path, tiny_model, eval_timeout_s=0.2)
    grader = LiveGrader(run_dir)  # the baseline itself times out; the grader still comes up
    try:
        assert grader.health["baseline"]["status"] == "failed"
        assert grader.health["baseline"]["error"] == "eval_timeout"
        assert grader.client.health()["status"] == "ok"
    finally:
        grader.close()
    with RunStore.of_run(run_dir) as store:
        assert store.baseline().status == "failed"


def test_a_killed_grader_takes_its_workers_and_a_successor_scores_what_was_queued(
        tmp_path: Path, tiny_model: Path) -> None:
    import os
    import signal

    from agent2rl_tui.grader.client import GraderClient
    from agent2rl_tui.grader.launch import spawn_grader
    from agent2rl_tui.util import procs as procs

    run_dir = make_prepared_run(tmp_path, tiny_model)
    base = next((run_dir / "workspace" / "models").iterdir())
    writable_copy(base, run_dir / "workspace" / "output" / "v1")
    first = spawn_grader(run_dir, run_dir / "logs" / "grader.log", keep_socket=True)
    client = GraderClient(first.url, timeout=60)
    try:
        client.wait_ready(120, alive=lambda: first.popen.poll() is None)
        workers = wait_for(lambda: procs.descendants(first.popen.pid), timeout=30, what="a warm eval worker")
        sub_id = client.submit("output/v1", wait=False).json()["submission_id"]  # taken and queued, then...
        os.kill(first.popen.pid, signal.SIGKILL)  # ... the grader dies before or while it is evaluated
        first.popen.wait()
        wait_for(lambda: not any(procs.pid_alive(p) for p in workers), timeout=10,
                 what="the dead grader's workers to exit")
        second = spawn_grader(run_dir, run_dir / "logs" / "grader.log", successor_of=first)
        try:
            assert second.url == first.url  # the agent's GRADING_SERVER_URL still works
            final = wait_for(lambda: client.submission(sub_id)["status"] in ("scored", "failed")
                             and client.submission(sub_id), timeout=120, what="the queued submission")
            assert final["status"] == "scored"
        finally:
            second.popen.terminate()
            second.popen.wait(timeout=30)
        with RunStore.of_run(run_dir) as store:
            assert [s.id for s in store.submissions(kind="agent")] == [sub_id]  # scored once, not twice
    finally:
        client.close()
        if first.sock is not None:
            first.sock.close()
