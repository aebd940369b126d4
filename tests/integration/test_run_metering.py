"""A run's meter, through `agent2rl-tui run start`: started, capped, restarted, or turned off.

The agent here is a small real program of ours declared as a profile with the Anthropic
gateway (agents.toml), so it is pointed at its driver exactly as Claude Code is
(``ANTHROPIC_BASE_URL``); it calls POST /v1/messages with urllib, as many times as it is told,
waiting for a file between calls. The driver is the scripted driver as a real process. The
live CLIs through the meter are in test_agent_clis.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import cli, wait_for

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.index import summarize

AGENT = """
import json, os, pathlib, sys, time, urllib.error, urllib.request
go = pathlib.Path(sys.argv[1])
for n in range(int(sys.argv[2])):
    if n:
        while not (go / str(n)).exists():
            time.sleep(0.1)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": f"call {n}"}]}
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages",
                                 data=json.dumps(body).encode(), headers={
                                     "content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
                                     "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            print(f"call {n}: {r.status}", flush=True)
    except urllib.error.HTTPError as e:
        print(f"call {n}: {e.code} {json.loads(e.read())['error']['type']}", flush=True)
    except OSError as e:
        print(f"call {n}: failed {e}", flush=True)
"""


@pytest.fixture
def driver(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"answer": "Hello."}]}))
    proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.llm.scripted", "--script", str(script),
                             "--log", str(tmp_path / "driver-calls.jsonl")], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip() if proc.stdout else ""
    assert url.startswith("http://")
    yield url, tmp_path / "driver-calls.jsonl"
    proc.terminate()
    proc.wait(timeout=30)


def agent_profile(tmp_path: Path, calls: int) -> tuple[Path, Path]:
    """agents.toml with the `sdk` agent, and the folder whose files let it make each next call."""
    program = tmp_path / "agent.py"
    program.write_text(AGENT)
    go = tmp_path / "go"
    go.mkdir()
    profiles = tmp_path / "agents.toml"
    profiles.write_text(f"""[agents.sdk]
command = ["{sys.executable}", "{program}", "{go}", "{calls}"]
stream_format = "text"
required_env = [["ANTHROPIC_API_KEY"]]
env_pass = ["ANTHROPIC_API_KEY"]
read_only_paths = ["{tmp_path}"]
gateway = "anthropic"
""")
    return profiles, go


def start(tmp_path: Path, tiny_model: Path, profiles: Path, *extra: str, url: str | None = None) -> Path:
    args = ["run", "start", "--task", "arith", "--agent", "sdk", "--profiles", str(profiles), "--model",
            str(tiny_model), "--budget", "3m", "--grace", "5s", "--detach"]
    if url:
        args += ["--driver-url", url]
    proc = cli(*args, *extra, root=tmp_path / "runs", env={**os.environ, "ANTHROPIC_API_KEY": "sk-scripted"},
               timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Path(proc.stdout.split("run folder: ")[1].split()[0])


def finished(run: Path) -> dict:
    wait_for(lambda: summarize(run).status == "finished", timeout=300, what="the run to end")
    return json.loads((run / "report" / "report.json").read_text())


def agent_lines(run: Path) -> list[str]:
    lines = [line.split(" ", 1)[-1] for line in (run / "logs" / "agent.log").read_text().splitlines()]
    return [line for line in lines if line.startswith("call ")]  # less the time stamps


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
def test_a_meter_that_dies_mid_run_is_started_again_on_the_same_port(tmp_path: Path, tiny_model: Path,
                                                                     driver) -> None:
    url, _ = driver
    profiles, go = agent_profile(tmp_path, calls=2)
    run = start(tmp_path, tiny_model, profiles, url=url)
    with RunStore.of_run(run) as store:
        wait_for(lambda: store.llm_call_count() == 1, timeout=300, what="the first call to be metered")
        first = store.last_event_data("meter")
    os.kill(first["pid"], signal.SIGKILL)
    with RunStore.of_run(run) as store:
        died = wait_for(lambda: store.last_event_data("meter_died"), timeout=300, what="the supervisor to see it")
        second = wait_for(lambda: (m := store.last_event_data("meter")) and m["pid"] != first["pid"] and m,
                          timeout=60, what="a new meter")
    assert died == {"exit_code": -9, "restarts": 1}
    assert second["url"] == first["url"]  # the agent's URL is still right
    (go / "1").touch()
    report = finished(run)
    assert agent_lines(run) == ["call 0: 200", "call 1: 200"]
    assert report["usage"]["source"] == "metered" and report["usage"]["calls"] == 2
    assert any(w["kind"] == "meter_died" for w in report["warnings"])


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
def test_a_token_cap_refuses_the_call_past_it_and_the_report_says_so(tmp_path: Path, tiny_model: Path,
                                                                    driver) -> None:
    url, log = driver
    profiles, go = agent_profile(tmp_path, calls=2)
    (go / "1").touch()  # call 1 the moment call 0's reply ends
    run = start(tmp_path, tiny_model, profiles, "--max-tokens", "10", url=url)
    report = finished(run)
    assert agent_lines(run) == ["call 0: 200", "call 1: 429 rate_limit_error"]
    assert len(log.read_text().splitlines()) == 1  # the refused call never reached the driver
    assert report["usage"]["refused"] == 1 and report["usage"]["meter"]["caps"]["max_tokens"] == 10
    md = (run / "report" / "report.md").read_text()
    assert "1 call(s) refused by the run's cap" in md


@pytest.mark.usefixtures("scripted_grading")  # what is tested happens around the evaluations: graded without torch
def test_a_run_without_the_meter_calls_its_driver_directly_and_says_not_metered(tmp_path: Path, tiny_model: Path,
                                                                               driver) -> None:
    url, log = driver
    profiles, _ = agent_profile(tmp_path, calls=1)
    run = start(tmp_path, tiny_model, profiles, "--no-meter", url=url)
    report = finished(run)
    assert agent_lines(run) == ["call 0: 200"] and len(log.read_text().splitlines()) == 1
    assert report["usage"]["source"] == "none" and "--no-meter" in report["usage"]["meter"]["reason"]
    with RunStore.of_run(run) as store:
        assert store.llm_call_count() == 0
        assert store.last_event_data("agent_home")["agent_url"] == url  # the driver itself, not a meter
    assert "**NOT METERED**" in (run / "report" / "report.md").read_text()


def test_caps_the_meter_cannot_enforce_are_refused_before_the_run_exists(tmp_path: Path, tiny_model: Path) -> None:
    profiles, _ = agent_profile(tmp_path, calls=1)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk"}
    root = tmp_path / "runs"
    cases = [
        (["--agent", "example", "--max-tokens", "100"], "--max-tokens: this agent calls no driver API; drop it"),
        (["--agent", "sdk", "--profiles", str(profiles), "--no-meter", "--max-cost", "1"],
         "--max-cost needs the meter, and this run cannot be metered: started with --no-meter"),
        (["--agent", "sdk", "--profiles", str(profiles), "--max-tokens", "-1"], "--max-tokens -1: give a number"),
    ]
    bad_prices = tmp_path / "prices.toml"
    bad_prices.write_text("[models.x]\ninput = 'free'\n")
    cases.append((["--agent", "sdk", "--profiles", str(profiles), "--prices", str(bad_prices)], "--prices: "))
    for args, message in cases:
        proc = cli("run", "start", "--task", "arith", "--model", str(tiny_model), *args, root=root, env=env)
        assert proc.returncode == 1 and message in proc.stderr, (args, proc.stderr)
    assert not root.exists() or not any(root.iterdir())


HOSTILE = """
import json, os, pathlib, sys, threading, urllib.error, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
token = os.environ["ANTHROPIC_API_KEY"]
upstream = pathlib.Path(sys.argv[1]).read_text().strip()

def call(url, body, key=token, path="/v1/messages", close_early=False):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={
        "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            if close_early:  # the text is here: gone before the usage
                while b"text_delta" not in r.fp.readline():
                    pass
            else:
                r.read()
            return r.status, ""
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]["message"]

ask = {"model": "claude-sonnet-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
print("key is a run token:", token.startswith("a2r-run-"), flush=True)
print("direct:", call(upstream, ask)[0], flush=True)
status, message = call(base, {"model": "gpt-3.5-turbo-instruct", "prompt": "x", "max_tokens": 900},
                       path="/v1/completions")
print("legacy:", status, message[:60], flush=True)
print("early close:", call(base, {**ask, "stream": True}, close_early=True)[0], flush=True)
statuses = []
threads = [threading.Thread(target=lambda n=n: statuses.append(call(base, {**ask, "messages": [
    {"role": "user", "content": f"call {n}"}]})[0])) for n in range(24)]
for t in threads: t.start()
for t in threads: t.join()
print("at once:", sorted(set(statuses)), flush=True)
"""


@pytest.fixture
def keyed_driver(tmp_path: Path):
    """The scripted driver as a real API: it wants its key, and it streams at a model's pace."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"answer": "Hello there, this is the answer."}]}))
    proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.llm.scripted", "--script", str(script),
                             "--log", str(tmp_path / "driver-calls.jsonl"), "--api-key-env", "REAL_KEY",
                             "--pace", "0.2"], stdout=subprocess.PIPE, text=True, env={**os.environ,
                                                                                       "REAL_KEY": REAL_KEY})
    url = proc.stdout.readline().strip() if proc.stdout else ""
    assert url.startswith("http://")
    yield url, tmp_path / "driver-calls.jsonl"
    proc.terminate()
    proc.wait(timeout=30)


REAL_KEY = "sk-ant-api03-REAL-KEY-of-the-user-0123456789abcdef"


@pytest.mark.usefixtures("scripted_grading")
def test_a_contained_agent_gets_a_token_not_the_key_and_cannot_walk_around_the_meter(tmp_path: Path,
                                                                                   tiny_model: Path,
                                                                                   keyed_driver) -> None:
    url, log = keyed_driver
    (tmp_path / "upstream.txt").write_text(url)
    program = tmp_path / "hostile.py"
    program.write_text(HOSTILE)
    profiles = tmp_path / "agents.toml"
    profiles.write_text(f"""[agents.hostile]
command = ["{sys.executable}", "{program}", "{tmp_path / 'upstream.txt'}"]
stream_format = "text"
required_env = [["ANTHROPIC_API_KEY"]]
env_pass = ["ANTHROPIC_API_KEY"]
read_only_paths = ["{tmp_path}"]
gateway = "anthropic"
""")
    cap = 600
    args = ["run", "start", "--task", "arith", "--agent", "hostile", "--profiles", str(profiles), "--model",
            str(tiny_model), "--budget", "3m", "--grace", "5s", "--detach", "--driver-url", url,
            "--max-tokens", str(cap)]
    proc = cli(*args, root=tmp_path / "runs", env={**os.environ, "ANTHROPIC_API_KEY": REAL_KEY}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = Path(proc.stdout.split("run folder: ")[1].split()[0])
    report = finished(run)
    lines = [line.split(" ", 1)[-1] for line in (run / "logs" / "agent.log").read_text().splitlines()]
    lines = [line for line in lines if line.startswith(("key is", "direct", "legacy", "early", "at once"))]
    assert lines[0] == "key is a run token: True", (run / "logs" / "agent.log").read_text()
    assert lines[1] == "direct: 401"  # the token is worth nothing at the API itself
    assert lines[2].startswith("legacy: 404 agent2rl-tui's meter does not forward POST /v1/completions")
    assert lines[3] == "early close: 200"
    assert lines[4] == "at once: [200, 429]"
    served = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["status"] for s in served].count(401) == 1 and all(s["status"] == 200 for s in served[1:])
    assert all(s["path"] == "/v1/messages" for s in served)  # the legacy route never reached it
    with RunStore.of_run(run) as store:
        rows = store.llm_calls()
        assert store.last_event_data("meter")["keys"]["held"] == ["ANTHROPIC_API_KEY"]
        assert store.last_event_data("containment")["contained"]
    (early,) = [r for r in rows if r.streamed]  # recorded once read to its end, while the agent went on
    (early_served,) = [s for s in served if s["stream"]]
    assert early.output_tokens == early_served["usage"]["output_tokens"] and not early.complete
    used = sum((r.input_tokens or 0) + (r.output_tokens or 0) for r in rows)
    biggest = max((r.input_tokens or 0) + (r.output_tokens or 0) for r in rows)
    assert used <= cap + biggest and report["usage"]["refused"] > 0
    blob = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert REAL_KEY.encode() not in blob
    assert "driver key: held by the meter" in (run / "report" / "report.md").read_text()
