"""Agent transcripts: each CLI's stream, from its documented example lines, becomes the right steps.

The fixtures under tests/fixtures/streams/ copy the example lines of docs/agent-clis.md
(their sources are named in that folder's README.md) and add lines in the same schema,
one cut mid-JSON and one garbled. Token and cost totals below are worked out by hand from
the fixture lines. Fixture line i (1-based) arrives at ARRIVAL + i - 1.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest
from support.paths import FIXTURES

from agent2rl_tui.record.transcripts import STEP_KINDS, TEXT_LIMIT, Step
from agent2rl_tui.run.streams import FORMATS, make_normalizer, normalize_lines, totals

STREAMS = FIXTURES / "streams"
FIXTURES = {
    "claude-stream-json": "claude-stream-json.jsonl",
    "codex-jsonl": "codex-jsonl.jsonl",
    "gemini-stream-json": "gemini-stream-json.jsonl",
    "opencode-json": "opencode-json.jsonl",
    "openhands-json": "openhands-json.txt",
}
ARRIVAL = 1000.0


def fixture_lines(fmt: str) -> list[str]:
    """The fixture as the supervisor reads it: split on newlines, undecodable bytes replaced."""
    text = (STREAMS / FIXTURES[fmt]).read_bytes().decode("utf-8", errors="replace")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def normalize_fixture(fmt: str) -> list[Step]:
    return normalize_lines(fmt, [(line, ARRIVAL + i) for i, line in enumerate(fixture_lines(fmt))])


def arrival(line: int) -> float:
    return ARRIVAL + line - 1


def line_kinds(steps: list[Step]) -> list[tuple[int, str]]:
    return [(s.line, s.kind) for s in steps]


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def only(steps: list[Step], **match) -> Step:
    found = [s for s in steps if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


# --- Claude Code --------------------------------------------------------------------------

def test_claude_fixture_gives_the_documented_steps_in_order() -> None:
    steps = normalize_fixture("claude-stream-json")
    assert line_kinds(steps) == [
        (1, "system"),
        (2, "reasoning"), (2, "message"),  # documented thinking + text
        (3, "message"), (3, "tool_call"),  # documented text + tool_use
        (4, "tool_result"),
        (5, "tool_call"),
        (6, "tool_result"),  # documented is_error tool result
        (7, "message"), (8, "tool_call"),  # one message id over two lines
        (9, "tool_result"),
        (10, "system"),  # stream_event
        (11, "message"),
        (12, "system"),  # rate_limit_event
        (13, "message"), (13, "error"),  # synthetic assistant with `error`
        (14, "raw"), (15, "raw"),  # cut mid-JSON, garbled
        (16, "error"), (16, "result"),  # documented error_max_turns, is_error true
        (17, "result"),
    ]
    assert [s.at for s in steps] == [arrival(s.line) for s in steps]  # no stamps of its own
    assert steps[0].text == "init model=claude-sonnet-4-5-20250929 session=sess-1"
    assert (steps[1].text, steps[2].text, steps[2].role) == (
        "I'm thinking about the answer...", "Here's my response", "assistant")


def test_claude_tool_calls_and_results_are_matched_by_id() -> None:
    steps = normalize_fixture("claude-stream-json")
    call = only(steps, kind="tool_call", call_id="tool_123")
    assert (call.tool, call.args) == ("Read", {"file_path": "/test.txt"})
    result = only(steps, kind="tool_result", call_id="tool_123")
    assert (result.tool, result.text, result.size) == ("Read", "hello world\n", 12)
    failed = only(steps, kind="tool_result", call_id="tool_error")
    assert (failed.tool, failed.text) == ("Read", "[error] File not found")
    listed = only(steps, kind="tool_result", call_id="toolu_02")
    assert (listed.tool, listed.text) == ("Bash", "README.md\ntrain.py")  # list of text blocks
    assert only(steps, kind="tool_call", call_id="toolu_02").args == {"command": "ls",
                                                                      "description": "List files"}


def test_claude_usage_counts_once_per_message_id_and_cost_comes_from_the_result() -> None:
    steps = normalize_fixture("claude-stream-json")
    first, repeat = [s for s in steps if s.line in (7, 8)]
    assert (first.tokens_in, first.tokens_out) == (5 + 100 + 2000, 40)
    assert (repeat.tokens_in, repeat.tokens_out) == (None, None)  # same msg_01 again
    result = steps[-1]
    assert result.cost_usd == 0.010620999999999998
    # The error_max_turns result (line 16) ends the messages' query; the last result's query
    # had no messages, so it carries its whole usage.
    assert (result.tokens_in, result.tokens_out) == (3, 24)
    summary = totals(steps)
    assert summary["tokens_in"] == (4 + 0 + 1800) + (5 + 100 + 2000) + (3 + 0 + 2100) + 0 + 3
    assert summary["tokens_out"] == 25 + 40 + 12 + 0 + 24
    assert summary["cost_usd"] == 0.010620999999999998
    assert summary["steps"] == len(steps) == 21
    assert summary["by_kind"]["raw"] == 2 and sum(summary["by_kind"].values()) == 21


def test_claude_output_tokens_come_from_the_result_usage() -> None:
    """Claude Code 2.1's message lines carry usage as the message started (output 1); the true
    totals come in the result, which carries what the messages left out."""
    def message(n: int, output: int) -> str:
        return json.dumps({"type": "assistant", "message": {
            "id": f"msg_{n}", "content": [{"type": "text", "text": f"step {n}"}],
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": output}}})

    result = json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done",
                         "total_cost_usd": 0.5, "usage": {"input_tokens": 500, "cache_read_input_tokens": 250,
                                                          "output_tokens": 100}})
    lines = [message(n, 1) for n in range(5)]
    live = normalize_lines("claude-stream-json", [(line, float(i)) for i, line in enumerate(lines)])
    assert totals(live)["tokens_out"] == 5  # cut off before its result: what the messages said
    steps = normalize_lines("claude-stream-json", [(line, float(i)) for i, line in enumerate([*lines, result])])
    assert (steps[-1].tokens_in, steps[-1].tokens_out) == (0, 95)  # inputs were right, outputs not
    assert (totals(steps)["tokens_in"], totals(steps)["tokens_out"]) == (5 * 150, 100)
    assert totals(steps)["cost_usd"] == 0.5


def test_claude_result_carries_the_tokens_when_no_message_usage_was_seen() -> None:
    success = fixture_lines("claude-stream-json")[16]
    steps = normalize_lines("claude-stream-json", [(success, 5.0)])
    assert line_kinds(steps) == [(1, "result")]
    assert (steps[0].tokens_in, steps[0].tokens_out) == (3, 24)
    assert steps[0].cost_usd == 0.010620999999999998
    assert steps[0].text == "Done: the workspace has README.md and train.py."


def test_claude_error_is_decided_on_is_error_not_on_subtype() -> None:
    api_failure = {"type": "result", "subtype": "success", "is_error": True,
                   "terminal_reason": "api_error", "result": "API Error: 429", "total_cost_usd": 0}
    steps = normalize_lines("claude-stream-json", [(json.dumps(api_failure), 1.0)])
    assert [(s.kind, s.text) for s in steps] == [("error", "success: API Error: 429"),
                                                ("result", "API Error: 429")]
    steps = normalize_fixture("claude-stream-json")
    synthetic_error = only(steps, kind="error", line=13)
    assert synthetic_error.text.startswith("rate_limit: API Error: 429")
    assert only(steps, kind="error", line=16).text == "error_max_turns"


# --- Codex --------------------------------------------------------------------------------

def test_codex_fixture_gives_the_documented_steps_in_order() -> None:
    steps = normalize_fixture("codex-jsonl")
    assert line_kinds(steps) == [
        (1, "system"), (2, "system"), (3, "reasoning"),
        (4, "tool_call"),  # item.started of the command: the call, when it starts
        # line 5, item.updated, is skipped: the completed item carries the final state
        (6, "tool_result"),
        (7, "tool_call"),  # file_change
        (8, "message"), (9, "usage"), (10, "system"),
        (11, "tool_call"), (12, "tool_result"),  # MCP call started, then completed
        (13, "tool_call"), (13, "tool_result"),  # a completed command never seen starting
        (14, "tool_call"),  # web_search
        (15, "system"),  # todo_list
        (16, "error"),  # error item
        (17, "raw"), (18, "raw"),
        (19, "usage"), (20, "system"), (21, "error"), (22, "error"),
    ]
    assert [s.at for s in steps] == [arrival(s.line) for s in steps]
    said = "Yep — there’s a `README.md` in the repository root."
    assert only(steps, kind="message").text == said
    assert only(steps, kind="reasoning").text == "**Searching for README files**"


def test_codex_tools_carry_names_args_and_exit_codes() -> None:
    steps = normalize_fixture("codex-jsonl")
    ls_call = only(steps, kind="tool_call", call_id="item_1")
    assert (ls_call.tool, ls_call.args) == ("shell", {"command": "bash -lc ls"})
    ls_result = only(steps, kind="tool_result", call_id="item_1")
    assert (ls_result.tool, ls_result.text) == ("shell", "[exit code 0]\nREADME.md\nsrc\n")
    assert (ls_call.at, ls_result.at) == (arrival(4), arrival(6))  # started, completed
    failed = only(steps, kind="tool_result", call_id="item_5")
    assert failed.text == "[exit code 1]\n1 failed, 3 passed\n"
    change = only(steps, kind="tool_call", call_id="item_2")
    assert change.tool == "file_change"
    assert change.args == {"changes": [{"path": "src/app.py", "kind": "update"}]}
    assert change.text == "update src/app.py (completed)"  # its path shows in the transcript
    mcp = only(steps, kind="tool_result", call_id="item_4")
    assert (mcp.tool, mcp.text) == ("docs/search",
                                    "GRPO samples a group of completions per prompt.")
    assert only(steps, kind="tool_call", call_id="item_4").args == {"q": "grpo"}
    search = only(steps, kind="tool_call", call_id="item_6")
    assert (search.tool, search.args) == ("web_search", {"query": "trl GRPOConfig"})


def test_codex_usage_sums_turns_without_cost() -> None:
    summary = totals(normalize_fixture("codex-jsonl"))
    assert (summary["tokens_in"], summary["tokens_out"]) == (24763 + 30000, 122 + 400)
    assert summary["cost_usd"] is None


def test_codex_command_still_running_when_the_stream_ends_is_kept() -> None:
    lines = fixture_lines("codex-jsonl")[:4]
    steps = normalize_lines("codex-jsonl", [(line, float(i)) for i, line in enumerate(lines)])
    assert steps[-1].kind == "tool_call" and steps[-1].args == {"command": "bash -lc ls"}


# --- Gemini -------------------------------------------------------------------------------

def test_gemini_fixture_gives_the_documented_steps_with_stream_timestamps() -> None:
    steps = normalize_fixture("gemini-stream-json")
    assert line_kinds(steps) == [
        (1, "system"), (2, "message"), (3, "tool_call"), (4, "tool_result"), (5, "tool_call"),
        (6, "tool_result"),
        (7, "message"),  # the delta chunks of lines 7 and 8: one reply, at its first chunk
        (9, "error"),
        (10, "raw"), (11, "raw"),
        (12, "error"), (12, "result"),  # documented result with status error
    ]
    noon = utc(2025, 10, 10, 12, 0, 0)
    assert [s.at for s in steps] == [noon, noon + 0.25, noon, noon, noon + 1.25, noon + 1.4, noon,
                                     noon + 2.2, arrival(10), arrival(11), noon, noon]
    assert [(s.role, s.text) for s in steps if s.kind == "message"] == [
        ("user", "What is 2+2? Read /path/to/file.txt first."), ("assistant", "4 is the answer.")]
    assert steps[-2].text == "Maximum session turns exceeded" and steps[-1].text == "error"


def test_gemini_tools_and_tokens() -> None:
    steps = normalize_fixture("gemini-stream-json")
    read = only(steps, kind="tool_call", call_id="read-123")
    assert (read.tool, read.args) == ("Read", {"file_path": "/path/to/file.txt"})
    failed = only(steps, kind="tool_result", call_id="read-123")
    assert (failed.tool, failed.text, failed.size) == ("Read", "[error] File not found", 22)
    wrote = only(steps, kind="tool_result", call_id="write-456")
    assert (wrote.tool, wrote.text) == ("write_file", "Successfully wrote /tmp/answer.txt")
    summary = totals(steps)
    assert (summary["tokens_in"], summary["tokens_out"], summary["cost_usd"]) == (50, 50, None)


def gemini_line(kind: str, second: float, **fields) -> str:
    stamp = datetime.fromtimestamp(utc(2025, 10, 10, 12, 0, 0) + second, UTC).isoformat()
    return json.dumps({"type": kind, "timestamp": stamp, **fields})


def chunk(second: float, text: str, role: str = "assistant") -> str:
    return gemini_line("message", second, role=role, content=text, delta=True)


def test_gemini_reply_chunks_become_one_message_at_the_first_chunk() -> None:
    lines = [chunk(1, "The answer"), chunk(1.5, " is"), chunk(2, " 4."),
             gemini_line("result", 3, status="success", stats={"input_tokens": 5})]
    steps = normalize_lines("gemini-stream-json", [(line, ARRIVAL) for line in lines])
    assert [(s.kind, s.line, s.role, s.text) for s in steps] == [
        ("message", 1, "assistant", "The answer is 4."), ("result", 4, None, "success")]
    assert steps[0].at == utc(2025, 10, 10, 12, 0, 1) and steps[0].size is None


def test_gemini_chunks_around_a_tool_call_are_two_messages() -> None:
    lines = [chunk(1, "Let me "), chunk(2, "look."),
             gemini_line("tool_use", 3, tool_name="ls", tool_id="t1", parameters={"dir": "."}),
             gemini_line("tool_result", 4, tool_id="t1", status="success", output="a.py"),
             chunk(5, "Found "), chunk(6, "a.py.")]
    steps = normalize_lines("gemini-stream-json", [(line, ARRIVAL) for line in lines])
    assert [(s.kind, s.line, s.text) for s in steps] == [
        ("message", 1, "Let me look."), ("tool_call", 3, ""), ("tool_result", 4, "a.py"),
        ("message", 5, "Found a.py.")]  # the last reply comes from finish()
    assert [s.at - utc(2025, 10, 10, 12, 0, 0) for s in steps] == [1, 3, 4, 5]


def test_gemini_reply_is_held_until_its_turn_ends() -> None:
    normalizer = make_normalizer("gemini-stream-json")
    assert normalizer.feed(chunk(1, "Hel"), ARRIVAL) == []
    assert normalizer.feed(chunk(2, "lo"), ARRIVAL) == []
    user = normalizer.feed(gemini_line("message", 3, role="user", content="Hi"), ARRIVAL)
    assert [(s.role, s.text, s.line) for s in user] == [("assistant", "Hello", 1), ("user", "Hi", 3)]
    assert normalizer.feed(chunk(4, "Bye"), ARRIVAL) == []
    garbled = normalizer.feed('{"type":"message","role":"assis', ARRIVAL)
    assert [(s.kind, s.text) for s in garbled] == [("message", "Bye"), ("raw", '{"type":"message","role":"assis')]
    assert normalizer.finish() == []


def test_a_long_gemini_reply_keeps_text_limit_characters_and_its_size() -> None:
    pieces = [chunk(i, "y" * 999) for i in range(TEXT_LIMIT // 999 + 3)]
    steps = normalize_lines("gemini-stream-json", [(line, ARRIVAL) for line in pieces])
    assert [(s.kind, s.text, s.size) for s in steps] == [
        ("message", "y" * TEXT_LIMIT, 999 * len(pieces))]


# --- OpenCode -----------------------------------------------------------------------------

def test_opencode_fixture_gives_the_documented_steps_with_stream_timestamps() -> None:
    steps = normalize_fixture("opencode-json")
    assert line_kinds(steps) == [
        (1, "system"), (2, "reasoning"), (3, "message"),
        (4, "tool_call"), (4, "tool_result"), (5, "tool_call"), (5, "tool_result"),
        (6, "usage"), (7, "system"), (8, "message"), (9, "usage"), (10, "error"),
        (11, "raw"), (12, "raw"), (13, "system"),
    ]
    assert [s.at for s in steps if s.kind in ("system", "usage", "message")] == [
        1767036050.0, 1767036051.5, 1767036059.338, 1767036060.0, 1767036061.0, 1767036061.2,
        1767036064.0]
    assert [s.at for s in steps if s.kind == "raw"] == [arrival(11), arrival(12)]
    assert only(steps, kind="error").text == "Rate limit exceeded"


def test_opencode_tools_take_their_own_start_and_end_times() -> None:
    steps = normalize_fixture("opencode-json")
    call = only(steps, kind="tool_call", call_id="call_01")
    assert (call.tool, call.args) == ("bash", {"command": "ls", "description": "List files"})
    assert call.at == 1767036052.0
    result = only(steps, kind="tool_result", call_id="call_01")
    assert (result.tool, result.text, result.at) == ("bash", "README.md\nsrc\n", 1767036052.3)
    failed = only(steps, kind="tool_result", call_id="call_02")
    assert (failed.tool, failed.text) == ("read", "[error] File not found: /nope.txt")


def test_opencode_tokens_and_cost_sum_over_steps() -> None:
    summary = totals(normalize_fixture("opencode-json"))
    assert summary["tokens_in"] == (1200 + 3000 + 100) + (400 + 4300 + 0)
    assert summary["tokens_out"] == (80 + 20) + (30 + 0)
    assert summary["cost_usd"] == pytest.approx(0.0123 + 0.0045)


# --- OpenHands ----------------------------------------------------------------------------

def test_openhands_multi_line_events_become_steps_on_their_marker_line() -> None:
    lines = fixture_lines("openhands-json")
    steps = normalize_fixture("openhands-json")
    markers = [i + 1 for i, line in enumerate(lines) if line == "--JSON Event--"]
    assert len(markers) == 9
    m = dict(enumerate(markers, start=1))
    working = lines.index("Agent is working") + 1
    assert line_kinds(steps) == [
        (2, "raw"),  # banner prose (blank lines skipped, but counted)
        (m[1], "message"),
        (working, "raw"),  # prose between events
        (m[2], "reasoning"), (m[2], "tool_call"),
        (m[3], "tool_result"),
        (m[4] - 1, "raw"),  # garbled line between events
        (m[4], "tool_call"), (m[5], "tool_result"),
        (m[6], "error"), (m[7], "system"),
        (m[8], "raw"),  # event cut mid-line, ended by the next marker
        (m[9], "message"),
        (len(lines) - 1, "raw"),  # Goodbye! 👋
        (len(lines), "system"),  # Conversation ID
    ]
    assert m[1] < working < m[2]
    assert [s.at for s in steps if s.kind == "raw"] == [arrival(s.line) for s in steps
                                                        if s.kind == "raw"]
    assert steps[1].at == utc(2025, 11, 3, 10, 15, 2, 123456)  # no zone in the stream: read as UTC
    assert (steps[1].role, steps[1].text) == ("user", "Create hello.py that prints hello")
    assert (steps[-3].role, steps[-3].text) == ("assistant",
                                                "Created hello.py; running it prints hello.")
    assert steps[-1].text == "Conversation ID: 5b0c6a2e9f1d4c7e8a3b2d1f0e9c8b7a"
    assert totals(steps)["tokens_in"] == 0 and totals(steps)["cost_usd"] is None


def test_openhands_actions_observations_and_errors() -> None:
    steps = normalize_fixture("openhands-json")
    assert only(steps, kind="reasoning").text == "I'll create the file first."
    create = only(steps, kind="tool_call", call_id="toolu_01")
    assert (create.tool, create.text) == ("file_editor", "Create hello.py")
    assert create.args == {"command": "create", "path": "/workspace/hello.py",
                           "file_text": "print('hello')\n"}  # the action minus its `kind` and nulls
    run = only(steps, kind="tool_call", call_id="toolu_02")
    assert run.args == {"command": "python hello.py", "is_input": False, "reset": False}
    assert run.at == utc(2025, 11, 3, 10, 15, 7)
    assert only(steps, kind="tool_result", call_id="toolu_02").text == "hello"
    created = only(steps, kind="tool_result", call_id="toolu_01")
    assert (created.tool, created.text) == ("file_editor",
                                            "File created successfully at: /workspace/hello.py")
    error = only(steps, kind="error")
    assert (error.tool, error.call_id) == ("browser", "toolu_03")
    assert error.text.startswith("Tool 'browser' not found")
    assert only(steps, kind="system", line=steps[10].line).text.startswith(
        "ConversationStateUpdateEvent execution_status running")


def test_openhands_cut_event_keeps_its_lines_as_one_raw_step() -> None:
    steps = normalize_fixture("openhands-json")
    cut = [s for s in steps if s.kind == "raw" and s.text.startswith("--JSON Event--")]
    assert len(cut) == 1
    assert cut[0].text.splitlines()[-3:] == ['  "kind": "MessageEvent",', '  "llm_message": {',
                                             '    "cach']


def test_openhands_stream_ending_mid_event_is_flushed_by_finish() -> None:
    lines = fixture_lines("openhands-json")
    marker = lines.index("Agent is working") + 1  # 0-based index of the ActionEvent's marker
    end = marker + 9  # the stream stops nine lines into that event
    normalizer = make_normalizer("openhands-json")
    fed = [s for i, line in enumerate(lines[:end]) for s in normalizer.feed(line, float(i))]
    assert [s.kind for s in fed] == ["raw", "message", "raw"]
    left = normalizer.finish()
    assert [(s.kind, s.line, s.at) for s in left] == [("raw", marker + 1, float(marker))]
    assert left[0].text == "\n".join(lines[marker:end])
    assert normalizer.finish() == []


def test_openhands_prose_ends_a_broken_event() -> None:
    lines = ["--JSON Event--", "{", '  "kind": "MessageEvent",', "Goodbye! 👋"]
    steps = normalize_lines("openhands-json", [(line, 7.0) for line in lines])
    assert [(s.kind, s.line) for s in steps] == [("raw", 1), ("raw", 4)]
    assert steps[1].text == "Goodbye! 👋"


def test_openhands_compact_events_one_per_line_are_read() -> None:
    """OpenHands CLI 1.16.0 printed each event as one compact JSON line, with no marker."""
    lines = fixture_lines("openhands-json")
    events, i = [], 0
    while i < len(lines):  # the fixture's whole events, each made compact
        if lines[i] == "--JSON Event--":
            j = i + 1
            while j < len(lines) and lines[j] not in ("}", "--JSON Event--"):
                j += 1
            try:
                events.append(json.dumps(json.loads("\n".join(lines[i + 1:j + 1]))))
            except ValueError:  # the event cut mid-line
                j -= 1
            i = j
        i += 1
    compact = normalize_lines("openhands-json", [(line, 1.0) for line in ["Initializing agent...", *events]])
    pretty = [s for s in normalize_fixture("openhands-json") if s.kind != "raw"]
    assert [(s.kind, s.text, s.tool, s.call_id, s.args) for s in compact if s.kind != "raw"] == [
        (s.kind, s.text, s.tool, s.call_id, s.args) for s in pretty if not s.text.startswith("Conversation ID")]
    assert [s.line for s in compact if s.kind == "tool_call"][0] == 3  # each on its own line
    # A pretty-printed event without its marker is gathered too.
    unmarked = normalize_lines("openhands-json", [(line, 1.0) for line in json.dumps(
        json.loads(events[0]), indent=2).splitlines()])
    assert [(s.kind, s.line) for s in unmarked] == [("message", 1)]


def test_openhands_1_16_as_it_printed_here() -> None:
    """A real stream: OpenHands CLI 1.16.0 (SDK 1.21.0), contained, against the scripted driver
    (tests/system/test_agent_clis.py), byte for byte: prose with terminal colours, and each event as
    one compact JSON line with no marker."""
    text = (STREAMS / "openhands-1.16-live.txt").read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")[:-1]
    assert not any(line == "--JSON Event--" for line in lines)
    steps = normalize_lines("openhands-json", [(line, ARRIVAL + i) for i, line in enumerate(lines)])
    read = [(s.line, s.kind, s.tool) for s in steps if s.kind != "raw"]
    assert read == [(5, "message", None), (7, "reasoning", None), (7, "tool_call", "terminal"),
                    (8, "tool_result", "terminal"), (9, "tool_call", "file_editor"), (10, "tool_result", "file_editor"),
                    (11, "tool_call", "terminal"), (12, "tool_result", "terminal"), (13, "message", None),
                    (24, "system", None)]
    calls = [s for s in steps if s.kind == "tool_call"]
    assert [s.call_id for s in calls] == ["call_scripted_1", "call_scripted_2", "call_scripted_3"]
    assert calls[0].args["command"].startswith("cp -r models/$BASE_MODEL output/v1")
    assert calls[1].args["command"] == "create" and calls[1].args["path"].endswith("/code/hello_openhands.py")
    assert only(steps, kind="tool_result", call_id="call_scripted_3").text == "written by openhands\nsubmit answered 202"
    assert steps[4].role == "user"
    assert only(steps, kind="system").text == "Conversation ID: 35ba18c7787c4dd280b273460bea4488"
    assert only(steps, kind="message", line=13).role == "assistant"
    assert steps[4].at == utc(2026, 11, 25, 9, 56, 26, 688911)  # its own stamp, read as UTC
    assert totals(steps)["tokens_in"] == 0  # no usage on its events


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_agent_failing_with_nothing_on_stdout_gets_an_error_step_from_its_stderr(fmt: str) -> None:
    """Gemini CLI's own auth check exits 41 with stdout empty: the transcript says why."""
    stderr = ["Warning: 256-color support not detected.", "", "Invalid auth method selected."]
    normalizer = make_normalizer(fmt)
    normalizer.agent_exited(41, lambda: stderr, 9.0)
    [step] = normalizer.finish()
    assert (step.kind, step.at) == ("error", 9.0)
    assert step.text.startswith("the agent exited with code 41 and printed nothing readable on stdout")
    assert step.text.endswith("Warning: 256-color support not detected.\nInvalid auth method selected.")
    killed = make_normalizer(fmt)
    if fmt != "text":  # where every line is a message, any line was readable
        killed.feed("not json, a raw line", 1.0)  # raw lines are nothing readable
    killed.agent_exited(-9, lambda: [], 2.0)
    assert "was ended by signal 9" in killed.finish()[-1].text
    readable = {"text": "said something", "openhands-json": '{"kind": "MessageEvent", "source": "agent"}'}
    for code, line in ((0, "not json"), (1, readable.get(fmt) or fixture_lines(fmt)[0])):
        quiet = make_normalizer(fmt)
        quiet.feed(line, 1.0)
        quiet.agent_exited(code, lambda: ["boom"], 2.0)
        assert all(s.kind != "error" or "printed nothing" not in s.text for s in quiet.finish())


# --- plain text, truncation, interface ------------------------------------------------------

def test_plain_text_lines_are_messages_of_unknown_role() -> None:
    lines = [("thinking about it", 1.0), ("", 2.0), ("  ", 3.0), ("done", 4.0)]
    steps = normalize_lines("text", lines)
    assert [(s.kind, s.role, s.text, s.line, s.at) for s in steps] == [
        ("message", None, "thinking about it", 1, 1.0), ("message", None, "done", 4, 4.0)]


LONG = "x" * (TEXT_LIMIT + 1234)
LONG_RESULTS = {
    "claude-stream-json": [{"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": LONG}]}}],
    "codex-jsonl": [{"type": "item.completed", "item": {
        "id": "i1", "type": "mcp_tool_call", "server": "s", "tool": "t", "arguments": {},
        "result": {"content": [{"type": "text", "text": LONG}]}, "status": "completed"}}],
    "gemini-stream-json": [{"type": "tool_result", "timestamp": "2025-10-10T12:00:00.000Z",
                            "tool_id": "t1", "status": "success", "output": LONG}],
    "opencode-json": [{"type": "tool_use", "timestamp": 1, "part": {
        "type": "tool", "callID": "c1", "tool": "bash",
        "state": {"status": "completed", "input": {}, "output": LONG}}}],
}


@pytest.mark.parametrize("fmt", sorted(LONG_RESULTS))
def test_long_tool_results_keep_text_limit_characters_and_their_size(fmt: str) -> None:
    steps = normalize_lines(fmt, [(json.dumps(e), 1.0) for e in LONG_RESULTS[fmt]])
    result = only(steps, kind="tool_result")
    assert result.text == LONG[:TEXT_LIMIT] and result.size == len(LONG)


def test_long_openhands_observation_and_long_raw_lines_are_cut_too() -> None:
    event = {"kind": "ObservationEvent", "tool_name": "terminal", "tool_call_id": "c1",
             "timestamp": "2025-11-03T10:15:08",
             "observation": {"content": [{"type": "text", "text": LONG}]}}
    pretty = json.dumps(event, indent=2, sort_keys=True).split("\n")
    lines = ["--JSON Event--", *pretty, "garbage " + LONG]
    steps = normalize_lines("openhands-json", [(line, 1.0) for line in lines])
    assert [(s.kind, len(s.text), s.size) for s in steps] == [
        ("tool_result", TEXT_LIMIT, len(LONG)), ("raw", TEXT_LIMIT, len(LONG) + 8)]
    short = normalize_lines("codex-jsonl", [("not json", 1.0)])[0]
    assert (short.kind, short.text, short.size) == ("raw", "not json", None)


def test_make_normalizer_names_the_known_formats_for_an_unknown_one() -> None:
    with pytest.raises(ValueError) as caught:
        make_normalizer("aider-markdown")
    assert "aider-markdown" in str(caught.value)
    assert all(fmt in str(caught.value) for fmt in FORMATS)
    assert set(FORMATS) == set(FIXTURES) | {"text"}
    for fmt in FORMATS:  # each call makes a fresh normalizer with its own state
        assert make_normalizer(fmt) is not make_normalizer(fmt)


def test_totals_of_nothing() -> None:
    assert totals([]) == {"tokens_in": 0, "tokens_out": 0, "cost_usd": None, "steps": 0,
                          "by_kind": {}}


# --- never raising, never dropping ----------------------------------------------------------

# Event and block types, OpenHands kinds and field names the normalizers read, for the fuzz.
TYPES = """system assistant user result stream_event rate_limit_event thread.started turn.started
turn.completed turn.failed item.started item.updated item.completed item.plan.delta error init
message tool_use tool_result step_start text reasoning step_finish done mystery thinking
command_execution mcp_tool_call agent_message todo_list file_change""".split()
KINDS = ["ActionEvent", "ObservationEvent", "MessageEvent", "AgentErrorEvent",
         "UserRejectObservation", "ConversationStateUpdateEvent", None]
FIELDS = """message content usage id error is_error result subtype total_cost_usd item text command
aggregated_output exit_code changes server tool arguments items timestamp role tool_name tool_id
parameters status output stats part state tokens cost callID input time action observation
llm_message thought reasoning_content tool_call tool_call_id source event rate_limit_info
tool_use_id type kind rejected key value""".split()


def random_value(rng: random.Random, depth: int = 0):
    pick = rng.randrange(10 if depth < 3 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.random() < 0.5
    if pick == 2:
        return rng.choice([0, -1, 7, 10**30, 2**63])
    if pick == 3:
        return rng.choice([0.5, -3.25, 1e308, float("nan"), float("inf")])
    if pick in (4, 5):
        return rng.choice(["", "x", "2025-10-10T12:00:00Z", "2025-13-45T99:99", "--JSON Event--",
                           LONG, rng.choice(TYPES), "é☃\u2028"])
    if pick in (6, 7):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return random_object(rng, depth + 1)


def random_object(rng: random.Random, depth: int = 0) -> dict:
    obj = {k: random_value(rng, depth + 1) for k in rng.sample(FIELDS, rng.randrange(6))}
    if rng.random() < 0.8:
        obj["type"] = rng.choice(TYPES)
    if rng.random() < 0.5:
        obj["kind"] = rng.choice(KINDS)
    return obj


def documented_events() -> list[dict]:
    """Every complete event of the fixtures, to be mutated by the fuzz."""
    events = []
    for fmt in FIXTURES:
        for line in fixture_lines(fmt):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
    lines = fixture_lines("openhands-json")
    starts = [i for i, line in enumerate(lines) if line == "{"]
    for start in starts:
        end = lines.index("}", start)
        try:
            events.append(json.loads("\n".join(lines[start:end + 1])))
        except ValueError:
            continue  # the event cut short in the fixture
    return events


EVENTS = documented_events()


def mutated(value, rng: random.Random):
    """The value with some leaves replaced by random values and some keys dropped."""
    if isinstance(value, dict):
        return {k: mutated(v, rng) for k, v in value.items() if rng.random() > 0.1}
    if isinstance(value, list):
        return [mutated(v, rng) for v in value if rng.random() > 0.1]
    return random_value(rng, 2) if rng.random() < 0.3 else value


def random_line(rng: random.Random) -> str:
    pick = rng.randrange(6)
    if pick >= 4:
        return json.dumps(mutated(rng.choice(EVENTS), rng))
    if pick == 0:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 80)))
    if pick == 1:
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        return noise.decode("utf-8", "replace")
    if pick == 2:
        return json.dumps(random_value(rng))
    line = json.dumps(random_object(rng))
    return line[: rng.randrange(1, len(line) + 1)] if rng.random() < 0.2 else line


def check(step: Step) -> None:
    assert step.kind in STEP_KINDS
    assert isinstance(step.at, float)
    assert isinstance(step.text, str) and len(step.text) <= TEXT_LIMIT
    assert step.args is None or isinstance(step.args, dict)
    assert step.line >= 1


def is_reply_chunk(line: str) -> bool:
    """A Gemini ``message`` delta chunk, which the normalizer holds until the reply ends."""
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return (isinstance(event, dict) and event.get("type") == "message" and event.get("delta") is True
            and "content" in event)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_fuzz_never_raises_and_every_odd_line_yields_a_step(fmt: str) -> None:
    """2,000 random texts, bytes, JSON values and near-valid events through each normalizer.

    JSON lines formats: every non-blank line gives a step at once (Codex item updates, skipped
    on purpose, aside, and Gemini reply chunks, held until the reply ends). OpenHands holds
    the lines of an event until it closes, so there: a line that cannot continue JSON gives a
    step at once. Nothing is held past finish().
    """
    rng = random.Random(f"transcript-{fmt}")
    normalizer = make_normalizer(fmt)
    held = 0  # OpenHands lines, or Gemini reply chunks, fed since the last step
    for i in range(2000):
        line = random_line(rng)
        if fmt == "openhands-json" and rng.random() < 0.3:  # a whole event, maybe cut short
            obj = random_object(rng) if rng.random() < 0.5 else mutated(rng.choice(EVENTS), rng)
            event = json.dumps(obj, indent=2).split("\n")
            event = event[: rng.randrange(1, len(event) + 1)] if rng.random() < 0.2 else event
            parts = ["--JSON Event--", *event]
        else:
            parts = [line]
        for part in parts:
            steps = normalizer.feed(part, float(i))
            for step in steps:
                check(step)
            if fmt == "openhands-json":
                held = 0 if steps else held + bool(part.strip())
                if part.strip() and not part.strip().startswith(tuple('"{}[]-0123456789tfn')):
                    assert steps or part == "--JSON Event--", part
            elif fmt == "gemini-stream-json" and is_reply_chunk(part):
                held = 1 if steps else held + 1  # steps: a reply of another role ended
            elif part.strip() and not (fmt == "codex-jsonl" and '"item.' in part):
                assert steps, part
                held = 0
    final = normalizer.finish()
    for step in final:
        check(step)
    assert held == 0 or final
    assert normalizer.feed(None, 1.0)[0].kind in STEP_KINDS  # not even a non-string line raises


@pytest.mark.parametrize("fmt", sorted(FIXTURES))
def test_a_hundred_thousand_lines_normalize(fmt: str) -> None:
    one_pass = normalize_fixture(fmt)
    lines = fixture_lines(fmt)
    repeats = 100_000 // len(lines) + 1
    stream = ((line, ARRIVAL + i) for i, line in enumerate(lines * repeats))
    steps = normalize_lines(fmt, stream)
    assert len(lines) * repeats >= 100_000
    assert len(steps) == len(one_pass) * repeats
    assert steps[-1].line == len(lines) * repeats - (len(lines) - one_pass[-1].line)
