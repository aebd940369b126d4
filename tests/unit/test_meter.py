"""The meter: a loopback proxy between an agent and its driver API, over real HTTP on 127.0.0.1.

The upstream is the scripted driver (or, where a test needs an upstream that misbehaves, a
small server of its own that frames replies with the project's wire formats); the clients are
the APIs' official SDKs (anthropic, openai, google-genai) playing each CLI through a whole
script. Every row the meter writes is checked against what the driver says it served; cut
streams, caps, unknown prices, keys, memory and the v2 -> v3 migration of run.db are tested
with the meter in this process and as its own process.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.sdks import anthropic, genai, genai_errors, gtypes, openai
from support.synthetic import add_transcript, claude_lines, make_run
from test_scripted_driver import CLAUDE_TOOLS, OPENCODE_TOOLS, chat_agent, check_workspace, claude, codex, gemini, script

from agent2rl_tui.llm import protocols, scripted
from agent2rl_tui.llm.meter import Caps, Upstream, serve_meter
from agent2rl_tui.llm.prices import PriceError, load_prices, parse_prices, read_prices
from agent2rl_tui.llm.protocols import Reply
from agent2rl_tui.llm.scripted import Served
from agent2rl_tui.llm.sse import encode
from agent2rl_tui.llm.usage import Usage
from agent2rl_tui.record.store import SCHEMA_VERSION, LlmCall, RunStore
from agent2rl_tui.review.campaign_view import usage_columns
from agent2rl_tui.review.report import build_report, render_markdown, write_report
from agent2rl_tui.review.run_usage import run_usage
from agent2rl_tui.util.inert import md_escape


def serve(script, **kw):  # noqa: ANN001, ANN201 - scripted.serve's own
    """The scripted driver answering as a real API would (no stand-in header): these tests are of
    the meter's pricing; a stand-in's calls are never priced (test below)."""
    return scripted.serve(script, priced=True, **kw)

PRICES = load_prices(user=False)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, "metered-run")


def rows_of(run: Path) -> list[LlmCall]:
    with RunStore.of_run(run) as store:
        return store.llm_calls()


def usage_of(row: LlmCall) -> Usage | None:
    if row.input_tokens is None:
        return None
    return Usage(row.input_tokens, row.output_tokens or 0, row.cached_tokens or 0, row.cache_write_tokens or 0,
                 row.reasoning_tokens or 0)


def check_rows(run: Path, calls: list[Served]) -> list[LlmCall]:
    """One row per call the driver served, each saying what the driver says it served."""
    rows = rows_of(run)
    assert len(rows) == len(calls)
    for row, served in zip(rows, calls):
        assert (row.protocol, row.endpoint, row.path, row.status, row.model, row.streamed) == \
               (served.protocol, served.endpoint, served.path, served.status, served.model, served.stream)
        assert usage_of(row) == served.usage
        assert row.complete and not row.refused and row.error is None
        assert row.cost_usd == pytest.approx(PRICES.cost(row.model, served.usage)) if PRICES.find(row.model) \
            else row.cost_usd is None
        assert row.latency_s is not None and row.ttfb_s is not None and row.latency_s >= row.ttfb_s >= 0
        assert row.request_bytes > 0 and row.response_bytes > 0
    return rows


# -- each protocol, streaming and not, through the meter ------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_claude_code_through_the_meter(run_dir: Path, tmp_path: Path, stream: bool) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with serve(script(cached_percent=40)) as driver, serve_meter(run_dir, driver.url) as meter:
        assert claude(meter.url, ws, stream) == "All done."
    check_workspace(ws)
    rows = check_rows(run_dir, driver.calls)
    assert [r.model for r in rows] == ["claude-sonnet-4-5"] * 4 and all(r.cost_usd for r in rows)
    assert all(r.cached_tokens and r.cached_tokens == r.input_tokens * 40 // 100 for r in rows)


@pytest.mark.parametrize("stream", [True, False])
def test_codex_through_the_meter(run_dir: Path, tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url) as meter:
        assert codex(meter.url, tmp_path, stream) == "All done."
    rows = check_rows(run_dir, driver.calls)
    assert {r.protocol for r in rows} == {"responses"} and all(r.cost_usd for r in rows)  # gpt-5-codex is priced


@pytest.mark.parametrize("stream", [True, False])
def test_opencode_through_the_meter(run_dir: Path, tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url) as meter:
        system = f"You are opencode.\n<env>\n  Working directory: {tmp_path}\n  Platform: linux\n</env>"
        assert chat_agent(meter.url, tmp_path, stream, OPENCODE_TOOLS, system) == "All done."
    check_workspace(tmp_path)
    rows = check_rows(run_dir, driver.calls)
    assert all(r.cost_usd is None for r in rows)  # "scripted-model" has no price


@pytest.mark.parametrize("stream", [True, False])
def test_gemini_cli_through_the_meter(run_dir: Path, tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url) as meter:
        assert gemini(meter.url, tmp_path, stream) == "All done."
        client = genai.Client(api_key="k", http_options=gtypes.HttpOptions(base_url=meter.url, api_version="v1beta"))
        assert client.models.count_tokens(model="gemini-2.5-flash", contents="hello there").total_tokens > 0
    check_workspace(tmp_path)
    rows = check_rows(run_dir, driver.calls)
    assert rows[-1].endpoint == "count_tokens" and rows[-1].input_tokens is None and rows[-1].cost_usd is None
    assert all(r.cost_usd for r in rows[:-1])  # gemini-2.5-pro is priced


def test_a_chat_stream_is_asked_for_its_usage(run_dir: Path) -> None:
    """OpenHands through LiteLLM may stream without ``include_usage``: the meter asks for it, so
    the call is metered, and the client gets the usage chunk it can read."""
    with serve(script(model="gpt-5-mini")) as driver, serve_meter(run_dir, driver.url) as meter:
        client = openai.OpenAI(base_url=meter.url + "/v1", api_key="sk-test", max_retries=0)
        chunks = list(client.chat.completions.create(model="gpt-5-mini", stream=True, tools=OPENCODE_TOOLS,
                                                     messages=[{"role": "user", "content": "Solve it."}]))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    (row,) = check_rows(run_dir, driver.calls)
    assert row.output_tokens == chunks[-1].usage.completion_tokens and row.cost_usd > 0


# -- a stream cut short ------------------------------------------------------------------------------
class _UpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        self.server.seen.append({"path": self.path, "headers": dict(self.headers.items()), "body": self.body})
        self.server.answer(self)

    do_GET = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        return

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@contextmanager
def upstream(answer: Callable[[_UpHandler], None]) -> Iterator[tuple[str, Any]]:
    """A server of the test's own that answers each request with ``answer``."""
    srv: Any = ThreadingHTTPServer(("127.0.0.1", 0), _UpHandler)
    srv.daemon_threads = True
    srv.answer, srv.seen = answer, []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.shutdown()
        srv.server_close()


def anthropic_events(text: str = "hello " * 40, usage: Usage | None = None) -> list[bytes]:
    fmt = protocols.PROTOCOLS["anthropic"]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = fmt.parse("generate", "/v1/messages", {}, body, 100)
    reply = Reply("claude-sonnet-4-5", "msg_1", usage or Usage(input_tokens=1234, output_tokens=56), text=text)
    return list(fmt.reply_events(request, reply))


def post_stream(url: str, read_events: int | None = None, on_first: Callable[[], None] | None = None) -> bytes:
    """Stream a Claude request through ``url`` with a raw client; stop after ``read_events`` events."""
    got = b""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as client, client.stream("POST", url + "/v1/messages", json=body,
                                                           headers={"x-api-key": "k"}) as response:
        try:
            for chunk in response.iter_raw():
                got += chunk
                if on_first is not None:
                    on_first()
                    on_first = None
                if read_events is not None and got.count(b"\n\n") >= read_events:
                    break
        except httpx.HTTPError:
            pass
    return got


def test_a_stream_the_upstream_cuts_short_is_marked_so(run_dir: Path) -> None:
    events = anthropic_events()

    def cut(h: _UpHandler) -> None:
        h.start_sse()
        for ev in events[:5]:
            h.chunk(ev)
        h.close_connection = True  # gone without the stream's end or the terminating chunk

    with upstream(cut) as (url, _), serve_meter(run_dir, url) as meter:
        got = post_stream(meter.url)
    assert got.startswith(b"event: message_start") and b"message_stop" not in got
    (row,) = rows_of(run_dir)
    assert not row.complete and row.status == 200 and row.streamed
    assert (row.input_tokens, row.output_tokens) == (1234, 1)  # message_start's count: as far as the reply came
    assert "broke off" in row.error and row.cost_usd == pytest.approx(PRICES.cost("claude-sonnet-4-5", usage_of(row)))


def test_the_reply_is_streamed_as_it_comes_not_buffered(run_dir: Path) -> None:
    """The upstream sends its first event and waits for the client to have it: a meter that
    buffered the stream would never pass it on."""
    events = anthropic_events()
    client_has_first = threading.Event()

    def slow(h: _UpHandler) -> None:
        h.start_sse()
        h.chunk(events[0])
        assert client_has_first.wait(20), "the first event never reached the client"
        for ev in events[1:]:
            h.chunk(ev)
        h.end()

    with upstream(slow) as (url, _), serve_meter(run_dir, url) as meter:
        got = post_stream(meter.url, on_first=client_has_first.set)
    assert got == b"".join(events)
    (row,) = rows_of(run_dir)
    assert row.complete and (row.input_tokens, row.output_tokens) == (1234, 56) and row.ttfb_s < row.latency_s


def test_an_agent_that_goes_away_mid_stream_leaves_a_row_cut_short(run_dir: Path) -> None:
    events = anthropic_events(text="x" * 20000)
    client_gone = threading.Event()

    def steady(h: _UpHandler) -> None:
        h.start_sse()
        h.chunk(events[0])
        client_gone.wait(20)
        try:
            for ev in events[1:]:
                h.chunk(ev)
                time.sleep(0.002)
            h.end()
        except OSError:
            pass

    with upstream(steady) as (url, _), serve_meter(run_dir, url) as meter:
        post_stream(meter.url, read_events=1)
        client_gone.set()
        deadline = time.time() + 20
        while not rows_of(run_dir) and time.time() < deadline:
            meter.flush()
            time.sleep(0.05)
    (row,) = rows_of(run_dir)
    assert not row.complete and "closed the connection" in row.error
    assert (row.input_tokens, row.output_tokens) == (1234, 56)  # read from the upstream to its end: all counted


def start_meter_process(run: Path, upstream_url: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.llm.meter", "--run-dir", str(run), "--upstream",
                             upstream_url, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
    return proc, url


def test_a_run_ended_at_its_deadline_keeps_the_tokens_of_the_call_under_way(run_dir: Path) -> None:
    """The supervisor kills the agent at the deadline and stops the meter (SIGTERM): the call
    under way is recorded with what its reply had said so far, marked cut short."""
    events = anthropic_events()
    release = threading.Event()

    def hang(h: _UpHandler) -> None:
        h.start_sse()
        h.chunk(events[0])
        release.wait(30)

    with upstream(hang) as (url, _):
        proc, meter_url = start_meter_process(run_dir, url, "--grace", "0.5")
        try:
            got = threading.Event()
            client = threading.Thread(target=post_stream, args=(meter_url,), kwargs={"on_first": got.set}, daemon=True)
            client.start()
            assert got.wait(20)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, proc.stderr.read()
        finally:
            release.set()
            proc.kill()
    (row,) = rows_of(run_dir)
    assert not row.complete and row.status == 200 and row.input_tokens == 1234 and "stopped" in row.error
    with RunStore.of_run(run_dir) as store:
        assert store.last_event_data("meter_stopped")["abandoned"] == 1
        usage = run_usage(store)
    assert usage.source == "metered" and usage.tokens_in == 1234 and usage.incomplete == 1


# -- caps --------------------------------------------------------------------------------------------
def test_the_token_cap_refuses_further_calls_in_each_apis_own_shape(run_dir: Path, tmp_path: Path) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url, caps=Caps(max_tokens=1)) as meter:
        client = anthropic.Anthropic(base_url=meter.url, api_key="sk-test")  # the SDK's own retries left on
        first = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, tools=CLAUDE_TOOLS,
                                       messages=[{"role": "user", "content": f"Working directory: {tmp_path}"}])
        assert first.usage.input_tokens > 0
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "x"}])
        assert refused.value.body["type"] == "error" and "token cap" in refused.value.body["error"]["message"]
        oa = openai.OpenAI(base_url=meter.url + "/v1", api_key="sk-test")
        with pytest.raises(openai.RateLimitError) as refused_oa:
            oa.responses.create(model="gpt-5-codex", input="x")
        assert refused_oa.value.code == "insufficient_quota"
        g = genai.Client(api_key="k", http_options=gtypes.HttpOptions(base_url=meter.url, api_version="v1beta"))
        with pytest.raises(genai_errors.ClientError) as refused_g:
            g.models.generate_content(model="gemini-2.5-pro", contents="x")
        assert refused_g.value.code == 429 and refused_g.value.status == "RESOURCE_EXHAUSTED"
    assert len(driver.calls) == 1  # nothing refused reached the upstream
    rows = rows_of(run_dir)
    assert [(r.status, r.refused, r.protocol) for r in rows] == [
        (200, False, "anthropic"), (429, True, "anthropic"), (429, True, "responses"), (429, True, "gemini")]
    assert all("token cap is reached" in r.error and r.input_tokens is None for r in rows[1:])
    report = build_report(run_dir)
    assert report.usage is not None and report.usage.refused == 3
    assert "3 call(s) refused by the run's cap" in render_markdown(report)


def test_the_cost_cap_counts_priced_calls(run_dir: Path) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url, caps=Caps(max_cost_usd=1e-9)) as meter:
        client = anthropic.Anthropic(base_url=meter.url, api_key="sk-test", max_retries=0)
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "x"}])
        with pytest.raises(anthropic.RateLimitError, match="cost cap"):
            client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "x"}])
        assert meter.refusal() is not None
    assert [r.refused for r in rows_of(run_dir)] == [False, True] and len(driver.calls) == 1


# -- prices --------------------------------------------------------------------------------------------
def test_an_unknown_model_has_no_cost_and_the_report_says_so(run_dir: Path, tmp_path: Path) -> None:
    with serve(script()) as driver, serve_meter(run_dir, driver.url) as meter:
        chat_agent(meter.url, tmp_path, True, OPENCODE_TOOLS, f"Working directory: {tmp_path}")
    rows = rows_of(run_dir)
    assert rows and all(r.model == "scripted-model" and r.cost_usd is None and not r.priced for r in rows)
    report = write_report(run_dir)
    assert report.usage is not None and report.usage.cost_usd is None
    assert report.usage.unpriced_models == ("scripted-model",)
    md = (run_dir / "report" / "report.md").read_text()
    assert "cost unknown (metered" in md and md_escape("cost unknown for scripted-model (") in md
    assert usage_columns(run_usage_of(run_dir))["cost_usd"] == ""  # the CSV leaves an unknown cost empty, never 0


def run_usage_of(run: Path) -> Any:
    with RunStore.of_run(run) as store:
        return run_usage(store)


def test_prices_match_dated_snapshots_and_a_users_file_goes_over_the_table(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_prices(user=False)
    for model, entry in (("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"), ("gpt-5-2025-08-07", "gpt-5"),
                         ("openai/gpt-5-mini", "gpt-5-mini"), ("models/gemini-2.5-pro", "gemini-2.5-pro"),
                         ("claude-haiku-5-5[1m]", "claude-haiku-5-5"), ("GPT-6-SOL", "gpt-6-sol")):
        assert table.find(model).model == entry, model
    for unknown in ("claude-sonnet-4-5-9", "gpt-5-turbo", "gemini-2.5-pro-preview-05-06", "scripted-model", "", None):
        assert table.find(unknown) is None
    for price in table.prices.values():  # every entry says when and where it was read
        assert price.read and price.source.startswith("https://")
    usage = Usage(input_tokens=100_000, output_tokens=10_000, cached_tokens=40_000, cache_write_tokens=10_000)
    assert table.cost("claude-sonnet-4-5", usage) == pytest.approx(0.05 * 3 + 0.04 * 0.3 + 0.01 * 3.75 + 0.01 * 15)
    tenfold = Usage(**{k: v * 10 for k, v in usage.as_dict().items()})  # a 1M-token prompt: the long-context rates
    assert table.cost("claude-sonnet-4-5", tenfold) == pytest.approx(0.5 * 6 + 0.4 * 0.6 + 0.1 * 7.5 + 0.1 * 22.5)
    assert table.cost("gpt-5", Usage(input_tokens=100, output_tokens=10)) == pytest.approx((100 * 1.25 + 10 * 10) / 1e6)
    small, big = Usage(input_tokens=100_000, output_tokens=0), Usage(input_tokens=100_001, output_tokens=1)
    assert table.cost("claude-haiku-5-5", small) == pytest.approx(0.01)
    assert table.cost("claude-haiku-5-5", big) == pytest.approx((100_001 * 0.5 + 2.5) / 1e6)  # every token at the long rate
    assert table.cost("gpt-5", None) is None

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "agent2rl-tui").mkdir(parents=True)
    (tmp_path / "config" / "agent2rl-tui" / "prices.toml").write_text(
        '[models."scripted-model"]\ninput = 1.0\noutput = 2.0\n[models."gpt-5"]\ninput = 9.0\noutput = 9.0\n')
    (tmp_path / "mine.toml").write_text('[models."gpt-5"]\ninput = 7.0\noutput = 7.0\ncached_input = 0.5\n')
    mine = load_prices(tmp_path / "mine.toml")
    assert mine.cost("scripted-model", Usage(input_tokens=10, output_tokens=10)) == pytest.approx(30 / 1e6)
    assert mine.find("gpt-5").rates.input == 7.0 and mine.find("claude-opus-5-5") is not None  # --prices last
    assert mine.files[1:] == [str(tmp_path / "config" / "agent2rl-tui" / "prices.toml"), str(tmp_path / "mine.toml")]
    for bad in ('[models."x"]\ninput = "cheap"\noutput = 1\n', '[models."x"]\ninput = 1\n',
                '[models."x"]\ninput = 1\noutput = 1\ncolour = 2\n', "not toml ["):
        (tmp_path / "bad.toml").write_text(bad)
        with pytest.raises(PriceError):
            read_prices(tmp_path / "bad.toml")
    with pytest.raises(PriceError, match="long_prompt"):
        parse_prices({"models": {"x": {"input": 1, "output": 1, "long_prompt": {"input": 2}}}}, "inline")


# -- the key, headers, errors ---------------------------------------------------------------------------
KEYS = {"anthropic": "sk-ant-METER-TEST-KEY-0a1b2c3d4e5f", "openai": "sk-proj-METER-TEST-KEY-9z8y7x6w",
        "gemini": "AIzaMETER-TEST-KEY-gemini-header", "query": "AIzaMETER-TEST-KEY-in-the-query",
        "echoed": "sk-METER-TEST-KEY-echoed-by-upstream"}


def test_the_api_key_passes_through_and_is_written_nowhere(run_dir: Path, tmp_path: Path) -> None:
    def echo(h: _UpHandler) -> None:  # an upstream that quotes the key in its error, as real APIs half do
        key = h.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}.", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}).encode()
        h.send_response(401)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with serve(script()) as driver, upstream(echo) as (echo_url, echo_srv):
        proc, url = start_meter_process(run_dir, driver.url)
        try:
            claude_client = anthropic.Anthropic(base_url=url, api_key=KEYS["anthropic"], max_retries=0)
            claude_client.messages.create(model="claude-sonnet-4-5", max_tokens=9, messages=[{"role": "user", "content": "x"}])
            oa = openai.OpenAI(base_url=url + "/v1", api_key=KEYS["openai"], max_retries=0)
            oa.responses.create(model="gpt-5-codex", input="x")
            g = genai.Client(api_key=KEYS["gemini"], http_options=gtypes.HttpOptions(base_url=url, api_version="v1beta"))
            g.models.generate_content(model="gemini-2.5-flash", contents="x")
            raw = httpx.post(f"{url}/v1beta/models/gemini-2.5-flash:generateContent?key={KEYS['query']}",
                             json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
            assert raw.status_code == 200
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
        proc2, url2 = start_meter_process(run_dir, echo_url)
        try:
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=url2 + "/v1", api_key=KEYS["echoed"], max_retries=0).chat.completions.create(
                    model="gpt-5", messages=[{"role": "user", "content": "x"}])
        finally:
            proc2.terminate()
            out2, err2 = proc2.communicate(timeout=30)
    # the upstreams got the keys: they pass through
    seen = {k.lower(): v for k, v in echo_srv.seen[0]["headers"].items()}
    assert seen["authorization"] == f"Bearer {KEYS['echoed']}"
    assert len(driver.calls) == 4
    rows = rows_of(run_dir)
    assert len(rows) == 5 and rows[-1].status == 401 and "[key]" in rows[-1].error
    assert rows[3].path == "/v1beta/models/gemini-2.5-flash:generateContent"  # the query is not recorded
    blob = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file()) + (out + err + out2 + err2).encode()
    for key in KEYS.values():
        assert key.encode() not in blob, f"the key {key} was written"
        assert key[8:24].encode() not in blob


def test_another_user_of_the_machine_cannot_call_through_a_runs_meter(run_dir: Path) -> None:
    """Its calls would spend the run's caps and forge its tokens: refused, never forwarded."""
    import shutil

    if os.getuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None:
        pytest.skip("needs root and setpriv to act as another user (nobody): run the suite as root to test this")
    with serve(script()) as driver:
        proc, url = start_meter_process(run_dir, driver.url)
        try:
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-s", "-w",
                                  "\n%{http_code}", "-H", "x-api-key: k", "-H", "content-type: application/json",
                                  "-d", json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 9,
                                                    "messages": [{"role": "user", "content": "x"}]}),
                                  url + "/v1/messages"], capture_output=True, text=True, timeout=60)
            mine = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0).messages.create(
                model="claude-sonnet-4-5", max_tokens=9, messages=[{"role": "user", "content": "x"}])
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    body, status = out.stdout.rsplit("\n", 1)
    assert status == "403" and json.loads(body)["error"]["type"] == "permission_error", out
    assert mine.usage.input_tokens > 0 and len(driver.calls) == 1  # the owner's call only
    assert len(rows_of(run_dir)) == 1
    with RunStore.of_run(run_dir) as store:
        assert store.last_event_data("foreign_request") == {"refused": 1}


def test_headers_pass_through_both_ways_without_hop_by_hop_ones(run_dir: Path) -> None:
    usage = Usage(input_tokens=70, output_tokens=7)
    reply_body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                  "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
                  "usage": {"input_tokens": 70, "output_tokens": 7}}

    def gz(h: _UpHandler) -> None:  # it answers gzip although the meter asked for identity
        data = gzip.compress(json.dumps(reply_body).encode())
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(data)))
        h.send_header("request-id", "req_upstream_1")
        h.send_header("Keep-Alive", "timeout=5")
        h.end_headers()
        h.wfile.write(data)

    with upstream(gz) as (url, srv), serve_meter(run_dir, url + "/v1") as meter:
        r = httpx.post(meter.url + "/v1/messages", json={"model": "claude-haiku-4-5", "max_tokens": 5,
                                                         "messages": [{"role": "user", "content": "x"}]},
                       headers={"anthropic-beta": "tools-2025", "Connection": "keep-alive, x-hop",
                                "x-hop": "dropped", "Proxy-Authorization": "Basic abc", "x-api-key": "k"})
        listed = httpx.get(meter.url + "/v1/models", headers={"x-api-key": "k"})  # no driver API's path: passed on
    assert r.status_code == 200 and r.json() == reply_body  # the client got the bytes, gzip and all
    assert r.headers["request-id"] == "req_upstream_1" and "keep-alive" not in {k.lower() for k in r.headers}
    seen = {k.lower(): v for k, v in srv.seen[0]["headers"].items()}
    assert srv.seen[0]["path"] == "/v1/messages"  # an upstream ending in /v1 is not given /v1 twice
    assert seen["anthropic-beta"] == "tools-2025" and seen["x-api-key"] == "k" and seen["accept-encoding"] == "identity"
    assert seen["host"] == url.removeprefix("http://")
    assert not {"x-hop", "proxy-authorization", "connection", "keep-alive"} & set(seen)
    row, other = rows_of(run_dir)
    assert usage_of(row) == usage and row.complete and not row.streamed and row.model == "claude-haiku-4-5"
    assert listed.status_code == 200 and srv.seen[1]["path"] == "/v1/models"
    assert (other.method, other.path, other.protocol, other.endpoint, other.input_tokens, other.cost_usd) == \
        ("GET", "/v1/models", None, None, None, None)
    assert Upstream.parse("https://openrouter.ai/api/v1").target("/v1/chat/completions?x=1") == \
        "/api/v1/chat/completions?x=1"
    with pytest.raises(ValueError, match="no user"):
        Upstream.parse("https://me:secret@api.openai.com")


def test_an_unreachable_upstream_is_a_502_in_the_apis_shape_and_recorded(run_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with serve_meter(run_dir, f"http://127.0.0.1:{port}") as meter:
        with pytest.raises(anthropic.InternalServerError) as exc:
            anthropic.Anthropic(base_url=meter.url, api_key="k", max_retries=0).messages.create(
                model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert exc.value.status_code == 502 and exc.value.body["error"]["type"] == "api_error"
        r = httpx.post(meter.url + "/v1beta/models/gemini-2.5-pro:generateContent", json={"contents": []})
        assert r.status_code == 502 and r.json()["error"]["status"] == "UNAVAILABLE"
    rows = rows_of(run_dir)
    assert [(r.status, r.protocol) for r in rows] == [(502, "anthropic"), (502, "gemini")]
    assert all("could not reach the driver API" in r.error and r.complete and not r.refused for r in rows)


# -- memory ----------------------------------------------------------------------------------------------
def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_memory_stays_bounded_whatever_the_upstream_sends(run_dir: Path) -> None:
    """A 96 MB stream of 64 KB deltas with one 40 MB event inside, and a 40 MB JSON body: the meter
    process passes them all on and reads their usage, and its peak memory hardly moves."""
    events = anthropic_events()
    starts, ends = events[:3], [ev for ev in events if b"message_delta" in ev or b"message_stop" in ev]
    middle = [encode({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "d" * (64 << 10)}},
                     "content_block_delta")] * 900
    huge = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",' \
           b'"text":"' + b"h" * (40 << 20) + b'"}}\n\n'
    stream = starts + middle[:450] + [huge] + middle[450:] + ends
    body = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                       "content": [{"type": "text", "text": "b" * (40 << 20)}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": 11, "output_tokens": 22}}).encode()

    def flood(h: _UpHandler) -> None:
        if b'"stream": true' in h.body or b'"stream":true' in h.body:
            h.start_sse()
            for ev in stream:
                for i in range(0, len(ev), 1 << 20):
                    h.chunk(ev[i:i + (1 << 20)])
            h.end()
        else:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(0, len(body), 1 << 20):
                h.wfile.write(body[i:i + (1 << 20)])

    with upstream(flood) as (url, _):
        proc, meter_url = start_meter_process(run_dir, url)
        try:
            time.sleep(0.5)
            before = peak_rss(proc.pid)
            total = 0
            for stream_flag in (True, False):
                with httpx.Client(timeout=120) as client, client.stream(
                        "POST", meter_url + "/v1/messages", headers={"x-api-key": "k"},
                        json={"model": "claude-sonnet-4-5", "max_tokens": 5, "stream": stream_flag,
                              "messages": [{"role": "user", "content": "x"}]}) as r:
                    for chunk in r.iter_raw(1 << 20):
                        total += len(chunk)
            after = peak_rss(proc.pid)
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    assert total == sum(map(len, stream)) + len(body) > 130 << 20
    assert after - before < 48 << 20, f"the meter's peak memory grew by {(after - before) >> 20} MiB"
    streamed, whole = rows_of(run_dir)
    assert (streamed.input_tokens, streamed.output_tokens, streamed.complete) == (1234, 56, True)
    assert (whole.input_tokens, whole.output_tokens, whole.complete) == (11, 22, True)
    assert streamed.response_bytes == sum(map(len, stream)) and whole.response_bytes == len(body)


# -- the record and its readers ----------------------------------------------------------------------------
def test_the_reports_tokens_are_the_metered_sum(run_dir: Path, tmp_path: Path) -> None:
    add_transcript(run_dir, claude_lines(6))  # the agent's own stream says something else
    with RunStore.of_run(run_dir) as store:
        before = run_usage(store)
    assert before.source == "transcript" and before.label == "from the agent's stream"
    with serve(script(cached_percent=25)) as driver, serve_meter(run_dir, driver.url) as meter:
        claude(meter.url, tmp_path, True)
        codex(meter.url, tmp_path, False)
    served = [c.usage for c in driver.calls if c.usage]
    report = write_report(run_dir)
    u = report.to_json()["usage"]
    assert u["source"] == "metered" and u["calls"] == len(driver.calls) == 8
    assert u["tokens_in"] == sum(s.input_tokens for s in served) and u["tokens_out"] == sum(s.output_tokens for s in served)
    assert u["cached_tokens"] == sum(s.cached_tokens for s in served)
    assert u["cost_usd"] == pytest.approx(sum(r.cost_usd for r in rows_of(run_dir)))
    assert u["meter"]["upstream"] == driver.url and u["meter"]["caps"] == {"max_tokens": None, "max_cost_usd": None}
    assert report.transcript.tokens_in != u["tokens_in"]  # the transcript keeps its own count, for reference
    md = (run_dir / "report" / "report.md").read_text()
    assert f"tokens {u['tokens_in']:,} in ({u['cached_tokens']:,} cached), {u['tokens_out']:,} out · " \
           f"${u['cost_usd']:.4f} (metered, 8 calls)" in md
    assert "metering: **metered** by the loopback meter" in md
    csv_cells = usage_columns(run_usage_of(run_dir))
    assert (csv_cells["tokens_in"], csv_cells["tokens_source"]) == (u["tokens_in"], "metered")


def test_a_run_without_the_meter_says_so(tmp_path: Path) -> None:
    run = make_run(tmp_path, "unmetered")
    add_transcript(run, claude_lines(4))
    with RunStore.of_run(run) as store:
        store.event("supervisor", "meter", "not metered", {"metered": False, "reason": "--no-meter: the endpoint "
                                                                                       "cannot be proxied"})
    md = render_markdown(build_report(run))
    assert "(from the agent's stream)" in md and "metering: **NOT METERED**: " + md_escape("--no-meter: the") in md


def test_a_v2_run_db_is_migrated_and_read(tmp_path: Path) -> None:
    run = make_run(tmp_path, "old")
    db = run / "run.db"
    with RunStore(db) as store:  # made as version 2 made it: no llm_calls
        store.conn.executescript("DROP TABLE llm_calls; DROP TABLE env_calls; ALTER TABLE revisions DROP COLUMN "
                                 "too_big_json; PRAGMA user_version = 2;")
    with RunStore(db) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert store.llm_calls() == [] and store.llm_totals().calls == 0
        assert store.env_calls() == [] and store.env_totals().calls == 0  # 3 -> 4 too
        assert "too_big_json" in {r[1] for r in store.conn.execute("PRAGMA table_info(revisions)")}  # 4 -> 5
        assert store.run().id == "old" and len(store.submissions()) == 3
        store.add_llm_call(at=1.0, protocol="chat", endpoint="generate", method="POST", path="/v1/chat/completions",
                           model="gpt-5", status=200, streamed=1, input_tokens=10, output_tokens=2, cost_usd=0.1,
                           complete=1)
        (row,) = store.llm_calls()
        assert (row.model, row.streamed, row.complete, row.refused) == ("gpt-5", True, True, False)
        with pytest.raises(ValueError, match="no columns"):
            store.add_llm_call(at=1.0, method="GET", path="/", status=200, api_key="no")
    with RunStore(db) as store:  # a copy a reader opens before any meter wrote: read as it is
        store.conn.executescript("DROP TABLE llm_calls;")
        assert store.llm_calls() == [] and store.llm_call_count() == 0 and run_usage(store).source == "none"


def test_the_meter_process_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    def meter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent2rl_tui.llm.meter", *args], capture_output=True, text=True,
                              timeout=60)

    assert "is this a run folder" in meter("--run-dir", str(tmp_path), "--upstream", "http://x").stderr
    run = make_run(tmp_path, "r")
    bad = meter("--run-dir", str(run), "--upstream", "ftp://x")
    assert bad.returncode == 2 and "http:// or https://" in bad.stderr
    (tmp_path / "p.toml").write_text("[models.x]\ninput = -1\noutput = 1\n")
    bad = meter("--run-dir", str(run), "--upstream", "http://x", "--prices", str(tmp_path / "p.toml"))
    assert bad.returncode == 2 and "USD per million tokens" in bad.stderr
    assert os.path.exists(run / "run.db") and not rows_of(run)



def test_a_stand_ins_calls_are_metered_but_never_priced(run_dir: Path) -> None:
    """Issue 43 (4): the scripted driver named a real model and was priced as one ($0.26 "claude-opus")."""
    with scripted.serve(script(model="gpt-5-mini")) as driver, serve_meter(run_dir, driver.url) as meter:
        client = openai.OpenAI(base_url=meter.url + "/v1", api_key="sk-test", max_retries=0)
        client.chat.completions.create(model="gpt-5-mini", messages=[{"role": "user", "content": "Solve it."}])
    (row,) = rows_of(run_dir)
    (served,) = driver.calls
    assert row.status == 200 and row.model == "gpt-5-mini" and usage_of(row) == served.usage  # metered
    assert PRICES.find("gpt-5-mini") is not None and row.cost_usd is None  # a priced name, not priced
