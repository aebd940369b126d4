"""The scripted driver and the wire formats, over real HTTP on 127.0.0.1.

Each agent CLI is played by a small client built on the API's official Python SDK
(``anthropic``, ``openai``, ``google-genai``: real clients with their own SSE parsers and
stream accumulators, nothing of ours): it offers the tools that CLI offers, with their real
names and schemas, runs the tool calls it gets in a scratch workspace, and posts the
conversation back with the tool results, streaming and not, until the driver answers. The
usage reader (what the meter will use) is fed the raw bytes as they came off the socket, in
chunks of every size, and must read back exactly what the driver says it served.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.sdks import anthropic, genai, gtypes, openai

from agent2rl_tui.llm import protocols
from agent2rl_tui.llm.catcher import KeyCatcher
from agent2rl_tui.llm.script import ScriptError, build, load_script
from agent2rl_tui.llm.scripted import Served, serve
from agent2rl_tui.llm.sse import SseDecoder, encode
from agent2rl_tui.llm.usage import Usage, UsageReader

CONTENT = 'def solve(x):\n    return "it\'s $HOME and `x`" + str(x)\n\n# no newline at the end'
STEPS = [
    {"run": "echo ran > ran.txt && echo out", "say": "Running a command."},
    {"write": {"path": "code/solve.py", "content": CONTENT}},
    {"run": "cat code/solve.py | wc -c > size.txt"},
    {"answer": "All done."},
]


def script(**extra: Any):
    return build({"steps": STEPS, **extra})


def check_workspace(ws: Path) -> None:
    assert (ws / "ran.txt").read_text() == "ran\n"
    assert (ws / "code" / "solve.py").read_text() == CONTENT
    assert (ws / "size.txt").read_text().strip() == str(len(CONTENT.encode()))


def check_calls(calls: list[Served], protocol: str, tools: tuple[str, str]) -> None:
    agent = [c for c in calls if c.step is not None]
    assert [c.step for c in agent] == [0, 1, 2, 3]
    assert [c.intent for c in agent] == ["run", "write", "run", "answer"]
    assert [c.tool for c in agent] == [tools[0], tools[1], tools[0], None]
    for c in agent:
        assert c.protocol == protocol and c.status == 200 and c.usage is not None
        assert c.usage.input_tokens > 0 and c.usage.output_tokens >= 1


def sh(command: str, ws: Path) -> str:
    out = subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr + f"\n[exit {out.returncode}]"


def write(path: str, content: str, ws: Path) -> str:
    p = Path(path)
    assert p.is_absolute(), f"the tool was given a relative path: {path}"
    assert p.is_relative_to(ws)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(content)
    return f"wrote {path}"


# -- Claude Code: Anthropic Messages ------------------------------------------------------------
CLAUDE_TOOLS = [
    {"name": "Bash", "description": "Executes a bash command.", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"},
                                         "description": {"type": "string"}, "run_in_background": {"type": "boolean"}},
        "required": ["command"], "additionalProperties": False}},
    {"name": "Write", "description": "Writes a file to the local filesystem.", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string", "description": "The absolute path"},
                                         "content": {"type": "string"}},
        "required": ["file_path", "content"], "additionalProperties": False}},
    {"name": "Read", "description": "Reads a file.", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
]


def claude(url: str, ws: Path, stream: bool) -> str:
    client = anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)
    system = [{"type": "text", "text": f"You are Claude Code.\n<env>\nWorking directory: {ws}\nPlatform: linux\n</env>"}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Solve the task."}]
    for _ in range(10):
        if stream:
            with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024, system=system,
                                        messages=messages, tools=CLAUDE_TOOLS) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system=system,
                                              messages=messages, tools=CLAUDE_TOOLS)
        assert message.model == "claude-sonnet-4-5"
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        uses = [b for b in message.content if b.type == "tool_use"]
        if message.stop_reason == "end_turn":
            assert not uses
            return "".join(b.text for b in message.content if b.type == "text")
        assert message.stop_reason == "tool_use" and len(uses) == 1
        use = uses[0]
        out = sh(use.input["command"], ws) if use.name == "Bash" else write(use.input["file_path"], use.input["content"], ws)
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": out}]})
    raise AssertionError("the driver never answered")


@pytest.mark.parametrize("stream", [True, False])
def test_claude_code_runs_a_whole_script(tmp_path: Path, stream: bool) -> None:
    with serve(script(cached_percent=40)) as driver:
        assert claude(driver.url, tmp_path, stream) == "All done."
    check_workspace(tmp_path)
    check_calls(driver.calls, "anthropic", ("Bash", "Write"))
    assert driver.calls[0].usage.cached_tokens == driver.calls[0].usage.input_tokens * 40 // 100


def test_the_anthropic_stream_is_framed_as_documented(tmp_path: Path) -> None:
    body = {"model": "m", "max_tokens": 10, "stream": True, "tools": CLAUDE_TOOLS,
            "messages": [{"role": "user", "content": f"Working directory: {tmp_path}"}]}
    with serve(script()) as driver:
        raw = httpx.post(driver.url + "/v1/messages", json=body).content
    names = [line[7:] for line in raw.decode().splitlines() if line.startswith("event: ")]
    datas = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert names == [d["type"] for d in datas]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    blocks = [d for d in datas if d["type"] == "content_block_start"]
    assert [b["content_block"]["type"] for b in blocks] == ["text", "tool_use"]
    deltas = [d["delta"] for d in datas if d["type"] == "content_block_delta" and d["index"] == 1]
    assert {d["type"] for d in deltas} == {"input_json_delta"}
    assert json.loads("".join(d["partial_json"] for d in deltas))["command"] == STEPS[0]["run"]
    assert datas[0]["message"]["usage"]["output_tokens"] == 1  # the count at the start, as the API sends it
    assert datas[-2]["usage"]["output_tokens"] == driver.calls[0].usage.output_tokens


# -- Codex: OpenAI Responses ----------------------------------------------------------------------
CODEX_TOOLS = [
    {"type": "function", "name": "exec_command", "description": "Runs a command in a PTY.", "strict": False,
     "parameters": {"type": "object", "properties": {
         "cmd": {"type": "string"}, "workdir": {"type": "string"}, "shell": {"type": "string"},
         "login": {"type": "boolean"}, "yield_time_ms": {"type": "number"}, "max_output_tokens": {"type": "number"}},
         "required": ["cmd"], "additionalProperties": False}},
    {"type": "function", "name": "write_stdin", "description": "Writes to a session.", "strict": False,
     "parameters": {"type": "object", "properties": {"session_id": {"type": "number"}, "chars": {"type": "string"}},
                    "required": ["session_id"], "additionalProperties": False}},
    {"type": "custom", "name": "apply_patch", "description": "Use the `apply_patch` tool to edit files.",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
]


def apply_add_file(patch: str, ws: Path) -> str:
    lines = patch.splitlines()
    assert lines[0] == "*** Begin Patch" and lines[-1] == "*** End Patch" and lines[1].startswith("*** Add File: ")
    assert all(line.startswith("+") for line in lines[2:-1])
    return write(lines[1][len("*** Add File: "):], "\n".join(line[1:] for line in lines[2:-1]) + "\n", ws)


def codex(url: str, ws: Path, stream: bool) -> str:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    items: list[Any] = [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": f"<environment_context>\n  <cwd>{ws}</cwd>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Solve the task."}]}]
    for _ in range(10):
        if stream:
            with client.responses.stream(model="gpt-5-codex", instructions="You are Codex.", input=items,
                                         tools=CODEX_TOOLS, store=False) as s:
                response = s.get_final_response()
        else:
            response = client.responses.create(model="gpt-5-codex", instructions="You are Codex.", input=items,
                                               tools=CODEX_TOOLS, store=False)
        assert response.status == "completed" and response.model == "gpt-5-codex"
        items += [o.model_dump(exclude_none=True) for o in response.output]
        calls = [o for o in response.output if o.type in ("function_call", "custom_tool_call")]
        if not calls:
            return response.output_text
        call = calls[0]
        if call.type == "function_call":
            args = json.loads(call.arguments)
            assert args["login"] is False
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": sh(args["cmd"], ws)})
        else:
            assert call.name == "apply_patch"
            items.append({"type": "custom_tool_call_output", "call_id": call.call_id, "output": apply_add_file(call.input, ws)})
    raise AssertionError("the driver never answered")


@pytest.mark.parametrize("stream", [True, False])
def test_codex_runs_a_whole_script(tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver:
        assert codex(driver.url, tmp_path, stream) == "All done."
    # apply_patch cannot say "no newline at the end": Codex's Add File ends the file with one.
    assert (tmp_path / "code" / "solve.py").read_text() == CONTENT + "\n"
    assert (tmp_path / "ran.txt").read_text() == "ran\n"
    check_calls(driver.calls, "responses", ("exec_command", "apply_patch"))


# -- OpenCode and OpenHands: Chat Completions ----------------------------------------------------
OPENCODE_TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Executes a bash command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"},
                                         "description": {"type": "string"}},
        "required": ["command", "description"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "write", "description": "Writes a file.", "parameters": {
        "type": "object", "properties": {"content": {"type": "string"}, "filePath": {"type": "string"}},
        "required": ["content", "filePath"], "additionalProperties": False}}},
]


def openhands_tools(ws: Path) -> list[dict[str, Any]]:
    risk = {"type": "string", "enum": ["UNKNOWN", "LOW", "MEDIUM", "HIGH"]}
    return [
        {"type": "function", "function": {"name": "terminal", "description": "Execute a bash command.", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}, "is_input": {"type": "boolean"},
                                             "timeout": {"type": "number"}, "reset": {"type": "boolean"},
                                             "security_risk": risk},
            "required": ["command", "security_risk"]}}},
        {"type": "function", "function": {
            "name": "file_editor",
            "description": f"Custom editing tool.\n\nYour current working directory is: {ws}\nWhen exploring ...",
            "parameters": {"type": "object", "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
                "path": {"type": "string"}, "file_text": {"type": "string"}, "old_str": {"type": "string"},
                "new_str": {"type": "string"}, "insert_line": {"type": "integer"}, "security_risk": risk},
                "required": ["command", "path", "security_risk"]}}},
        {"type": "function", "function": {"name": "finish", "description": "Finish.", "parameters": {
            "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}},
    ]


def chat_agent(url: str, ws: Path, stream: bool, tools: list[dict[str, Any]], system: str) -> str:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": "Solve the task."}]
    names = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for _ in range(10):
        if stream:
            with client.chat.completions.stream(model="scripted-model", messages=messages, tools=tools,
                                                stream_options={"include_usage": True}) as s:
                for _event in s:
                    pass
                completion = s.get_final_completion()
        else:
            completion = client.chat.completions.create(model="scripted-model", messages=messages, tools=tools)
        assert completion.usage is not None and completion.usage.prompt_tokens > 0
        choice = completion.choices[0]
        message = choice.message
        messages.append(message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        if choice.finish_reason == "stop":
            assert not message.tool_calls
            return message.content or ""
        assert choice.finish_reason == "tool_calls" and len(message.tool_calls) == 1
        call = message.tool_calls[0]
        args = json.loads(call.function.arguments)
        schema = names[call.function.name]
        assert set(schema["required"]) <= set(args) and set(args) <= set(schema["properties"])
        if call.function.name in ("bash", "terminal"):
            out = sh(args["command"], ws)
        elif call.function.name == "write":
            out = write(args["filePath"], args["content"], ws)
        else:
            assert args["command"] == "create" and args["security_risk"] == "LOW"
            out = write(args["path"], args["file_text"], ws)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
    raise AssertionError("the driver never answered")


@pytest.mark.parametrize("stream", [True, False])
def test_opencode_runs_a_whole_script(tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver:
        system = f"You are opencode.\n<env>\n  Working directory: {tmp_path}\n  Platform: linux\n</env>"
        assert chat_agent(driver.url, tmp_path, stream, OPENCODE_TOOLS, system) == "All done."
    check_workspace(tmp_path)
    check_calls(driver.calls, "chat", ("bash", "write"))


@pytest.mark.parametrize("stream", [True, False])
def test_openhands_runs_a_whole_script(tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver:
        assert chat_agent(driver.url, tmp_path, stream, openhands_tools(tmp_path), "You are OpenHands agent.") == "All done."
    check_workspace(tmp_path)
    check_calls(driver.calls, "chat", ("terminal", "file_editor"))


# -- Gemini CLI: the Gemini API ------------------------------------------------------------------
def gemini_declarations() -> list[gtypes.FunctionDeclaration]:
    """Gemini CLI's two tools, as the SDK declares them."""
    return [
        gtypes.FunctionDeclaration(name="run_shell_command", description="Executes a shell command.", parameters_json_schema={
            "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"},
                                             "dir_path": {"type": "string"}, "is_background": {"type": "boolean"}},
            "required": ["command"]}),
        gtypes.FunctionDeclaration(name="write_file", description="Writes content to a file.", parameters_json_schema={
            "type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["file_path", "content"]}),
    ]


def gemini(url: str, ws: Path, stream: bool) -> str:
    client = genai.Client(api_key="test-key", http_options=gtypes.HttpOptions(base_url=url, api_version="v1beta"))
    config = gtypes.GenerateContentConfig(system_instruction="You are Gemini CLI.",
                                          tools=[gtypes.Tool(function_declarations=gemini_declarations())])
    contents: list[gtypes.Content] = [
        gtypes.Content(role="user", parts=[gtypes.Part(text=f"<session_context>\nThis is the Gemini CLI.\n"
                                                             f"- **Workspace Directories:**\n  - {ws}\n</session_context>")]),
        gtypes.Content(role="user", parts=[gtypes.Part(text="Solve the task.")])]
    for _ in range(10):
        if stream:
            parts: list[gtypes.Part] = []
            for chunk in client.models.generate_content_stream(model="gemini-2.5-pro", contents=contents, config=config):
                assert chunk.model_version == "gemini-2.5-pro"
                parts += chunk.candidates[0].content.parts or []
        else:
            response = client.models.generate_content(model="gemini-2.5-pro", contents=contents, config=config)
            parts = list(response.candidates[0].content.parts or [])
        contents.append(gtypes.Content(role="model", parts=parts))
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            return "".join(p.text or "" for p in parts)
        assert len(calls) == 1
        call = calls[0]
        args = dict(call.args or {})
        if call.name == "run_shell_command":
            out = sh(args["command"], ws)
        else:
            out = write(args["file_path"], args["content"], ws)
        contents.append(gtypes.Content(role="user", parts=[gtypes.Part.from_function_response(name=call.name,
                                                                                              response={"output": out})]))
    raise AssertionError("the driver never answered")


@pytest.mark.parametrize("stream", [True, False])
def test_gemini_cli_runs_a_whole_script(tmp_path: Path, stream: bool) -> None:
    with serve(script()) as driver:
        assert gemini(driver.url, tmp_path, stream) == "All done."
    check_workspace(tmp_path)
    check_calls(driver.calls, "gemini", ("run_shell_command", "write_file"))


def test_gemini_utility_calls_use_no_step(tmp_path: Path) -> None:
    """Gemini CLI asks, in JSON mode, who speaks next; it counts tokens. Neither is a step."""
    schema = {"type": "object", "properties": {"reasoning": {"type": "string"},
                                               "next_speaker": {"type": "string", "enum": ["user", "model"]}},
              "required": ["reasoning", "next_speaker"]}
    with serve(script()) as driver:
        client = genai.Client(api_key="k", http_options=gtypes.HttpOptions(base_url=driver.url, api_version="v1beta"))
        reply = client.models.generate_content(
            model="gemini-2.5-flash", contents="Who speaks next?",
            config=gtypes.GenerateContentConfig(response_mime_type="application/json", response_json_schema=schema))
        assert json.loads(reply.text)["next_speaker"] == "user"
        count = client.models.count_tokens(model="gemini-2.5-flash", contents="hello there")
        assert count.total_tokens > 0
    assert [(c.intent, c.step, c.endpoint) for c in driver.calls] == [("json", None, "generate"),
                                                                      ("count_tokens", None, "count_tokens")]


# -- the usage reader reads back what was served ---------------------------------------------
def bodies(ws: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    user = f"Working directory: {ws}"
    return {
        "anthropic": ("/v1/messages?beta=true", {"model": "claude-x", "max_tokens": 9, "tools": CLAUDE_TOOLS,
                                                  "messages": [{"role": "user", "content": user}]}),
        "responses": ("/v1/responses", {"model": "gpt-x", "tools": CODEX_TOOLS, "input": user}),
        "chat": ("/v1/chat/completions", {"model": "oc-x", "tools": OPENCODE_TOOLS, "stream_options": {"include_usage": True},
                                          "messages": [{"role": "user", "content": user}]}),
        "gemini": ("/v1beta/models/gemini-x:{verb}", {"contents": [{"role": "user", "parts": [{"text": user}]}],
                                                      "tools": [{"functionDeclarations": [
                                                          d.model_dump(exclude_none=True, by_alias=True)
                                                          for d in gemini_declarations()]}]}),
    }


@pytest.mark.parametrize("protocol", ["anthropic", "responses", "chat", "gemini"])
@pytest.mark.parametrize("stream", [True, False])
def test_the_usage_reader_reads_what_was_served(tmp_path: Path, protocol: str, stream: bool) -> None:
    path, body = bodies(tmp_path)[protocol]
    if protocol == "gemini":
        path = path.format(verb="streamGenerateContent?alt=sse" if stream else "generateContent")
    else:
        body = {**body, "stream": stream}
    raw_body = json.dumps(body).encode()
    with serve(script(cached_percent=30, model="served-model")) as driver:
        with httpx.Client() as client, client.stream("POST", driver.url + path, content=raw_body,
                                                     headers={"Content-Type": "application/json"}) as response:
            assert response.status_code == 200
            content_type = response.headers["content-type"]
            assert content_type.startswith("text/event-stream" if stream else "application/json")
            reader = protocols.usage_reader(protocol, content_type)
            raw = b""
            for chunk in response.iter_raw(7):
                reader.feed(chunk)
                raw += chunk
        metered = reader.close()
    served = driver.calls[-1]
    assert served.usage == metered.usage and metered.model == "served-model" and metered.complete
    assert served.usage.input_tokens == len(raw_body) // 4
    assert served.usage.cached_tokens == served.usage.input_tokens * 30 // 100
    for size in (1, 2, 3, 64, 1 << 20):  # any cut of the bytes reads the same
        again = protocols.usage_reader(protocol, content_type)
        for i in range(0, len(raw), size):
            again.feed(raw[i:i + size])
        assert again.close().usage == served.usage


def test_a_chat_stream_without_include_usage_reports_none(tmp_path: Path) -> None:
    path, body = bodies(tmp_path)["chat"]
    body = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": True}
    with serve(script()) as driver:
        raw = httpx.post(driver.url + path, json=body).content
    reader = protocols.usage_reader("chat", "text/event-stream")
    reader.feed(raw)
    metered = reader.close()
    assert metered.usage is None and metered.complete and b'"usage"' not in raw


@pytest.mark.parametrize("protocol", ["anthropic", "responses", "chat", "gemini"])
def test_a_stream_cut_short_is_not_complete(tmp_path: Path, protocol: str) -> None:
    path, body = bodies(tmp_path)[protocol]
    path = path.format(verb="streamGenerateContent?alt=sse")
    with serve(script()) as driver:
        raw = httpx.post(driver.url + path, json={**body, "stream": True}).content
    reader = protocols.usage_reader(protocol, "text/event-stream")
    reader.feed(raw[: len(raw) // 3])
    assert not reader.close().complete


def test_huge_replies_are_read_in_bounded_memory() -> None:
    """A 24 MB event (OpenAI repeats the whole output in response.completed) and a 24 MB body:
    the reader keeps neither, and still reads usage and model."""
    fmt = protocols.PROTOCOLS["responses"]
    big = "x" * (24 << 20)
    usage = {"input_tokens": 1234, "input_tokens_details": {"cached_tokens": 34}, "output_tokens": 6000000,
             "output_tokens_details": {"reasoning_tokens": 7}, "total_tokens": 6001234}
    response = {"id": "resp_1", "object": "response", "model": "gpt-huge", "status": "completed",
                "output": [{"type": "message", "content": [{"type": "output_text", "text": big}]}], "usage": usage}
    stream = encode({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-huge"}}, "response.created") \
        + encode({"type": "response.completed", "response": response}, "response.completed")
    body = json.dumps(response).encode()
    want = Usage(input_tokens=1234, output_tokens=6000000, cached_tokens=34, reasoning_tokens=7)
    for data, streaming in ((stream, True), (body, False)):
        reader = UsageReader(fmt.read_object, streaming, fmt.usage_keys, max_body=1 << 20, max_event=1 << 20)
        tracemalloc.start()
        for i in range(0, len(data), 1 << 16):
            reader.feed(data[i:i + (1 << 16)])
        metered = reader.close()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert metered.usage == want and metered.model == "gpt-huge" and metered.complete
        assert peak < 4 << 20, f"the reader held {peak} bytes"


def test_the_sse_decoder_takes_any_line_ending_and_any_cut() -> None:
    raw = b"event: a\r\ndata: {\"x\":1}\r\n\r\n: comment\n\ndata: one\ndata: two\n\nevent: b\rdata: 3\r\r"
    for size in (1, 2, 5, len(raw)):
        decoder = SseDecoder()
        events = [e for i in range(0, len(raw), size) for e in decoder.feed(raw[i:i + size])]
        events += list(decoder.close())
        assert [(e.event, e.data) for e in events] == [("a", '{"x":1}'), (None, "one\ntwo"), ("b", "3")]


def test_the_key_catcher_ignores_keys_inside_strings() -> None:
    catcher = KeyCatcher(("usage", "model"))
    doc = json.dumps({"model": "m1", "text": 'a "usage": {"input_tokens": 999} inside', "usage": {"input_tokens": 5}})
    for ch in doc:
        catcher.feed(ch.encode())
    assert catcher.result() == {"model": "m1", "usage": {"input_tokens": 5}}


# -- statelessness, errors, fallbacks ---------------------------------------------------------
def test_a_retried_request_gets_the_same_step(tmp_path: Path) -> None:
    path, body = bodies(tmp_path)["anthropic"]
    with serve(script()) as driver:
        first = httpx.post(driver.url + path, json=body).json()
        again = httpx.post(driver.url + path, json=body).json()
    assert first["content"][-1]["input"] == again["content"][-1]["input"]
    assert [c.step for c in driver.calls] == [0, 0]


def test_unknown_paths_get_404_in_the_apis_own_error_shape() -> None:
    with serve(script()) as driver:
        with pytest.raises(anthropic.NotFoundError) as a:
            anthropic.Anthropic(base_url=driver.url + "/nowhere", api_key="k", max_retries=0).messages.create(
                model="m", max_tokens=1, messages=[{"role": "user", "content": "hi"}])
        assert a.value.body["type"] == "error" and a.value.body["error"]["type"] == "not_found_error"
        with pytest.raises(openai.NotFoundError) as o:
            openai.OpenAI(base_url=driver.url + "/v1", api_key="k", max_retries=0).embeddings.create(model="m", input="x")
        assert o.value.body["code"] == "not_found"
        g = httpx.post(driver.url + "/v1beta/models/g:embedContent", json={})
        assert g.status_code == 404 and g.json()["error"]["status"] == "NOT_FOUND"
        bad = httpx.post(driver.url + "/v1/messages", content=b"{not json", headers={"anthropic-version": "2023-06-01"})
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        assert httpx.get(driver.url + "/health").json()["ok"] is True
    assert [c.status for c in driver.calls] == [404, 404, 404, 400]


def test_a_gzip_body_is_read(tmp_path: Path) -> None:
    path, body = bodies(tmp_path)["chat"]
    raw = json.dumps(body).encode()
    with serve(script()) as driver:
        r = httpx.post(driver.url + path, content=gzip.compress(raw),
                       headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["tool_calls"]
    assert driver.calls[0].usage.input_tokens == len(gzip.compress(raw)) // 4


def test_a_write_goes_through_the_shell_when_no_write_tool_fits(tmp_path: Path) -> None:
    """Only a shell offered; or Claude's Write (absolute paths only) with no working folder stated."""
    only_bash = [t for t in OPENCODE_TOOLS if t["function"]["name"] == "bash"]
    with serve(script()) as driver:
        assert chat_agent(driver.url, tmp_path, True, only_bash, "no folder stated") == "All done."
        check_workspace(tmp_path)
        for f in ("ran.txt", "code/solve.py", "size.txt"):
            (tmp_path / f).unlink()
        client = anthropic.Anthropic(base_url=driver.url, api_key="k", max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "no folder stated"}]
        steps = 0
        while True:
            m = client.messages.create(model="c", max_tokens=9, messages=messages, tools=CLAUDE_TOOLS)
            use = next((b for b in m.content if b.type == "tool_use"), None)
            if use is None:
                break
            assert use.name == "Bash"
            steps += 1
            messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                       "content": sh(use.input["command"], tmp_path)}]}]
    assert steps == 3
    check_workspace(tmp_path)
    writes = [c for c in driver.calls if c.intent == "write"]
    assert [c.note for c in writes] == ["through bash: no write tool offered",
                                        "through Bash: Write needs an absolute path and the request states no working folder"]


def test_a_step_no_offered_tool_can_do_is_answered_with_text(tmp_path: Path) -> None:
    read_only = [t for t in CLAUDE_TOOLS if t["name"] == "Read"]
    with serve(script()) as driver:
        m = anthropic.Anthropic(base_url=driver.url, api_key="k", max_retries=0).messages.create(
            model="c", max_tokens=9, messages=[{"role": "user", "content": "hi"}], tools=read_only)
    assert m.stop_reason == "end_turn" and "no shell tool among ['Read']" in m.content[0].text
    assert driver.calls[0].intent == "unmapped"


# -- the script file and the process ----------------------------------------------------------
def test_toml_and_json_scripts_read_alike(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('model = "m"\nsteps = [\n  {run = "ls", say = "Look."},\n'
                    '  {write = {path = "a.py", content = "x = 1\\n"}},\n  {answer = "ok"},\n]\n')
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"model": "m", "steps": [{"run": "ls", "say": "Look."},
                                                      {"write": {"path": "a.py", "content": "x = 1\n"}}, {"answer": "ok"}]}))
    assert load_script(toml) == load_script(js)
    assert build([{"run": "ls"}]).steps[-1].text == "Done."
    for bad, says in (([{"answer": "a"}, {"run": "ls"}], "only the last step"), ([{"jump": "x"}], "exactly one of"),
                      ({"steps": [], "temperature": 1}, "unknown keys"), ([{"write": {"path": "a"}, "run": "x"}], "exactly one")):
        with pytest.raises(ScriptError, match=says):
            build(bad)


def test_the_driver_runs_as_a_process(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('steps = [{run = "true"}, {answer = "bye"}]\n')
    log = tmp_path / "calls.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "agent2rl_tui.llm.scripted", "--script", str(tmp_path / "s.toml"),
                             "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        path, body = bodies(tmp_path)["responses"]
        first = httpx.post(url + path, json=body).json()
        assert first["output"][-1]["name"] == "exec_command"
        body["input"] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                         first["output"][-1], {"type": "function_call_output", "call_id": first["output"][-1]["call_id"],
                                               "output": ""}]
        assert httpx.post(url + path, json=body).json()["output"][0]["content"][0]["text"] == "bye"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0, proc.stderr.read()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["step"], x["intent"], x["tool"]) for x in lines] == [(0, "run", "exec_command"), (1, "answer", None)]
    assert lines[0]["usage"]["input_tokens"] > 0 and lines[0]["protocol"] == "responses"
    bad = subprocess.run([sys.executable, "-m", "agent2rl_tui.llm.scripted", "--script", str(tmp_path / "none.toml")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot read" in bad.stderr


def test_a_gemini_stream_without_alt_sse_is_one_json_array(tmp_path: Path) -> None:
    path, body = bodies(tmp_path)["gemini"]
    with serve(script(model="g-served")) as driver:
        r = httpx.post(driver.url + path.format(verb="streamGenerateContent"), json=body)
    chunks = r.json()
    assert r.headers["content-type"] == "application/json" and isinstance(chunks, list)
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    reader = protocols.usage_reader("gemini", r.headers["content-type"])
    reader.feed(r.content)
    metered = reader.close()
    assert metered.usage == driver.calls[0].usage and metered.model == "g-served"


def test_the_meter_can_ask_a_chat_stream_for_its_usage() -> None:
    chat = protocols.PROTOCOLS["chat"]
    body: dict[str, Any] = {"stream": True, "stream_options": {"foo": 1}}
    assert chat.ask_for_usage(body) and body["stream_options"] == {"foo": 1, "include_usage": True}
    assert not chat.ask_for_usage(body) and not chat.ask_for_usage({"stream": False})
    assert not protocols.PROTOCOLS["anthropic"].ask_for_usage({"stream": True})


def fn(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": properties,
                                                              "required": required}}


S = {"type": "string"}


@pytest.mark.parametrize("tools, run, write", [
    # Codex's older shell tools: an argv array, a script string; apply_patch as a JSON function.
    ([fn("shell", {"command": {"type": "array", "items": S}, "workdir": S}, ["command"]),
      fn("apply_patch", {"input": S}, ["input"])],
     ("shell", {"command": ["bash", "-c", "ls -l"]}),
     ("apply_patch", {"input": "*** Begin Patch\n*** Add File: /w/a.txt\n+hi\n*** End Patch\n"})),
    ([fn("shell_command", {"command": S, "login": {"type": "boolean"}, "timeout_ms": {"type": "number"}}, ["command"])],
     ("shell_command", {"command": "ls -l", "login": False}),
     ("shell_command", {"command": "printf '%s' 'hi\n' > a.txt", "login": False})),  # in the shell's cwd
    # OpenHands' older names.
    ([fn("execute_bash", {"command": S, "is_input": {"type": "string", "enum": ["true", "false"]}}, ["command"]),
      fn("str_replace_editor", {"command": {"enum": ["view", "create"]}, "path": S, "file_text": S}, ["command", "path"])],
     ("execute_bash", {"command": "ls -l"}),
     ("str_replace_editor", {"command": "create", "path": "/w/a.txt", "file_text": "hi\n"})),
    # Unknown names: found by shape.
    ([fn("run_in_terminal", {"cmd": S}, ["cmd"]), fn("save", {"filename": S, "contents": S}, ["filename", "contents"])],
     ("run_in_terminal", {"cmd": "ls -l"}),
     ("save", {"filename": "/w/a.txt", "contents": "hi\n"})),
])
def test_steps_map_onto_each_known_tool_shape(tools: list[dict[str, Any]], run: tuple[str, Any],
                                              write: tuple[str, Any]) -> None:
    from agent2rl_tui.llm.intents import plan_step
    from agent2rl_tui.llm.script import Step

    fmt = protocols.PROTOCOLS["responses"]
    body = {"model": "m", "input": "<cwd>/w</cwd>", "tools": tools}
    request = fmt.parse("generate", "/v1/responses", {}, body, 1)
    got_run = plan_step(Step("run", command="ls -l"), request)
    got_write = plan_step(Step("write", path="a.txt", content="hi\n"), request)
    assert (got_run.tool.name, got_run.arguments) == run
    assert (got_write.tool.name, got_write.arguments) == write
