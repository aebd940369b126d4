"""The meter against an agent that wants more than its run allows, over real HTTP on 127.0.0.1.

The upstream is the scripted driver started with a key of its own (as a real API, it answers
401 to a call without it); the agent is played with the APIs' SDKs and raw httpx. What each
test checks is what a run's owner would: the key never reaches the agent, routes the meter does
not meter are refused by name, every reply is counted whether the agent reads it or not, and a
cap holds when the agent calls many times at once.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from support.sdks import anthropic, genai, gtypes, openai
from support.synthetic import make_run
from test_meter import rows_of

from agent2rl_tui.llm.meter import Caps, KeyRing, serve_meter
from agent2rl_tui.llm.meter.keys import HeldKey, new_token
from agent2rl_tui.llm.script import build
from agent2rl_tui.llm.scripted import serve
from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.report import build_report, render_markdown
from agent2rl_tui.run.metering import hold_keys
from agent2rl_tui.run.profiles import get_profile

REAL = "sk-ant-REAL-KEY-THE-AGENT-MUST-NEVER-SEE-0123456789"
SCRIPT = build({"steps": [{"answer": "Hello there, this is the answer."}]})


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, "hostile-meter-run")


def ring() -> tuple[KeyRing, str]:
    token = new_token()
    return KeyRing((HeldKey("ANTHROPIC_API_KEY", token, REAL),)), token


def messages(client: anthropic.Anthropic, text: str = "x", max_tokens: int = 64) -> anthropic.types.Message:
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=max_tokens,
                                  messages=[{"role": "user", "content": text}])


def test_the_meter_holds_the_key_and_the_agents_token_is_worth_nothing_elsewhere(run_dir: Path,
                                                                               tmp_path: Path) -> None:
    keys, token = ring()
    google_token = new_token()
    keys = KeyRing((*keys.held, HeldKey("GEMINI_API_KEY", google_token, REAL)))
    with serve(SCRIPT, api_key=REAL) as driver, serve_meter(run_dir, driver.url, keys=keys) as meter:
        assert messages(anthropic.Anthropic(base_url=meter.url, api_key=token, max_retries=0)).usage.input_tokens
        bearer = httpx.post(meter.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {token}"},
                            json={"model": "gpt-5", "messages": [{"role": "user", "content": "x"}]})
        assert bearer.status_code == 200
        in_query = httpx.post(f"{meter.url}/v1beta/models/gemini-2.5-flash:generateContent?key={google_token}",
                              json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
        assert in_query.status_code == 200
        g = genai.Client(api_key=google_token, http_options=gtypes.HttpOptions(base_url=meter.url,
                                                                               api_version="v1beta"))
        assert g.models.generate_content(model="gemini-2.5-flash", contents="x").usage_metadata.prompt_token_count
        forwarded = len(driver.calls)
        # The token straight at the API: worth nothing there.
        with pytest.raises(anthropic.AuthenticationError):
            messages(anthropic.Anthropic(base_url=driver.url, api_key=token, max_retries=0))
        # Anything but this run's token at the meter (the key itself included): 401, never forwarded.
        for key in ("sk-ant-another-key-of-the-agents", REAL):
            with pytest.raises(anthropic.AuthenticationError, match="not this run's"):
                messages(anthropic.Anthropic(base_url=meter.url, api_key=key, max_retries=0))
        bare = httpx.post(meter.url + "/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 9,
                                                            "messages": [{"role": "user", "content": "x"}]})
        assert bare.status_code == 401 and "carries no key" in bare.json()["error"]["message"]
        mixed = httpx.post(meter.url + "/v1/messages", headers={"x-api-key": token, "authorization": "Bearer sk-other"},
                           json={"model": "claude-sonnet-4-5", "max_tokens": 9,
                                 "messages": [{"role": "user", "content": "x"}]})
        assert mixed.status_code == 401
    assert len(driver.calls) == forwarded + 1  # the direct call only; every refusal stayed at the meter
    assert all(c.status == 200 for c in driver.calls[:forwarded])  # the API got its key in each
    rows = rows_of(run_dir)
    assert [r.status for r in rows] == [200, 200, 200, 200, 401, 401, 401, 401]
    assert "?" not in rows[2].path
    with RunStore.of_run(run_dir) as store:
        assert store.last_event_data("meter")["keys"] == {"held": ["ANTHROPIC_API_KEY", "GEMINI_API_KEY"],
                                                          "note": None}
    blob = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    for secret in (REAL, token, google_token):
        assert secret.encode() not in blob


def test_routes_the_meter_does_not_meter_are_refused_by_name(run_dir: Path) -> None:
    keys, token = ring()
    with serve(SCRIPT, api_key=REAL) as driver, serve_meter(run_dir, driver.url, keys=keys) as meter:
        legacy = openai.OpenAI(base_url=meter.url + "/v1", api_key=token, max_retries=0)
        with pytest.raises(openai.NotFoundError, match="does not forward POST /v1/completions"):
            legacy.completions.create(model="gpt-3.5-turbo-instruct", prompt="x", max_tokens=900)
        for method, path in (("POST", "/v1/embeddings"), ("POST", "/v1/batches"), ("DELETE", "/v1/messages"),
                             ("POST", "/v1beta/models/gemini-2.5-pro:batchGenerateContent"), ("GET", "/")):
            r = httpx.request(method, meter.url + path, headers={"x-api-key": token}, json={"input": "x"})
            assert r.status_code == 404 and f"does not forward {method} {path}" in r.text, (method, path, r.text)
        listed = httpx.get(meter.url + "/v1/models", headers={"x-api-key": token})
    assert listed.status_code == 404  # a listing is forwarded: the scripted driver has none to give
    assert [c.path for c in driver.calls] == ["/v1/models"]
    rows = rows_of(run_dir)
    assert len(rows) == 7 and all(r.status == 404 for r in rows)
    assert rows[0].error.startswith("agent2rl-tui's meter does not forward POST /v1/completions")


def test_a_reply_the_agent_stops_reading_is_read_to_its_end_and_counted(run_dir: Path) -> None:
    """The agent takes the answer's text and closes before the usage: billed upstream all the same,
    so counted all the same, and the next call under a cap is checked against it."""
    keys, token = ring()
    body = {"model": "gpt-5", "stream": True, "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]}
    with serve(SCRIPT, api_key=REAL, pace_s=0.3) as driver, \
            serve_meter(run_dir, driver.url, keys=keys, caps=Caps(max_tokens=10)) as meter:
        with httpx.Client(timeout=30) as client, client.stream(
                "POST", meter.url + "/v1/chat/completions", json=body,
                headers={"Authorization": f"Bearer {token}"}) as response:
            for chunk in response.iter_raw():
                if b"Hello" in chunk:
                    break  # the content is here: gone before the usage chunk
        second = httpx.post(meter.url + "/v1/chat/completions", json={**body, "stream": False},
                            headers={"Authorization": f"Bearer {token}"})
    assert second.status_code == 429 and "token cap" in second.text
    first, refused = rows_of(run_dir)
    served = driver.calls[0].usage
    assert (first.input_tokens, first.output_tokens) == (served.input_tokens, served.output_tokens)
    assert not first.complete and "read to its end and counted" in first.error
    assert refused.refused and len(driver.calls) == 1


def test_a_cap_holds_when_the_agent_calls_many_times_at_once(run_dir: Path) -> None:
    keys, token = ring()
    cap = 600
    client = anthropic.Anthropic(base_url="http://placeholder", api_key=token, max_retries=0)

    def call(n: int) -> int:
        try:
            messages(client, f"call {n}", max_tokens=32)
            return 200
        except anthropic.APIStatusError as exc:
            return exc.status_code

    with serve(SCRIPT, api_key=REAL, pace_s=0.05) as driver, \
            serve_meter(run_dir, driver.url, keys=keys, caps=Caps(max_tokens=cap)) as meter:
        client = client.with_options(base_url=meter.url)
        start = threading.Barrier(48)

        def at_once(n: int) -> int:
            start.wait()
            return call(n)

        with ThreadPoolExecutor(48) as pool:
            statuses = list(pool.map(at_once, range(48)))
    rows = rows_of(run_dir)
    answered = [r for r in rows if r.status == 200]
    used = sum((r.input_tokens or 0) + (r.output_tokens or 0) for r in rows)
    biggest = max((r.input_tokens or 0) + (r.output_tokens or 0) for r in answered)
    assert statuses.count(200) == len(answered) == len(driver.calls)
    assert statuses.count(429) == sum(r.refused for r in rows) > 0
    assert used <= cap + biggest, f"{used} tokens used under a cap of {cap} ({len(answered)} calls answered)"
    assert used >= cap  # the cap is reached, not merely approached: calls waited for room, then went


def test_the_key_line_is_checked_and_a_ring_without_keys_says_why(run_dir: Path) -> None:
    keys, token = ring()
    again = KeyRing.from_line(keys.to_line())
    assert again.held == keys.held and again.holds and REAL in again.secrets and token in again.secrets
    for bad in ("", "[]", json.dumps({"held": [{"name": "X", "token": "t"}]}), "{not json"):
        with pytest.raises(ValueError):
            KeyRing.from_line(bad)
    login = KeyRing(note="signs in with a login of its own")
    assert not login.holds and login.swap([("x-api-key", "anything")], []) == ([("x-api-key", "anything")], [])
    assert login.record() == {"held": [], "note": "signs in with a login of its own"}
    with serve(SCRIPT) as driver, serve_meter(run_dir, driver.url, keys=login) as meter:
        assert messages(anthropic.Anthropic(base_url=meter.url, api_key="sk-own-login", max_retries=0)).id
    md = render_markdown(build_report(run_dir))
    assert "driver key: **the agent held its own credential**: signs in with a login of its own" in md


def test_every_key_variable_of_the_agent_is_held_and_a_login_is_named() -> None:
    claude = get_profile("claude-code")
    env = {"ANTHROPIC_API_KEY": REAL, "ANTHROPIC_AUTH_TOKEN": "tok-REAL", "OPENAI_API_KEY": " ", "PATH": "/bin",
           "ANTHROPIC_BASE_URL": "https://api.anthropic.com", "MY_TOKENIZER": "x"}
    keys = hold_keys(claude, env)
    assert [k.name for k in keys.held] == ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]  # a blank one is no key
    assert {k.key for k in keys.held} == {REAL, "tok-REAL"}
    assert all(k.token.startswith("a2r-run-") and k.token != k.key for k in keys.held)
    assert hold_keys(claude, env).held[0].token != keys.held[0].token  # fresh for every run
    login = hold_keys(claude, {"PATH": "/bin"})
    assert not login.holds and "claude-code has no key variable set" in (login.note or "")
