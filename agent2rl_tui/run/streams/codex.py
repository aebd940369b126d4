"""Codex's ``codex exec --json`` stream (JSONL thread, turn and item events) as steps.

Codex reports a command or tool call as an item that starts, may update, and completes;
tokens come once per turn, on ``turn.completed``.
"""

from __future__ import annotations

from typing import Any

from agent2rl_tui.record.transcripts import Step
from agent2rl_tui.run.streams.base import (
    JsonLines,
    as_dict,
    as_list,
    as_text,
    blocks_text,
    describe,
    error_message,
    ident,
    token_count,
)


class CodexJsonl(JsonLines):
    """``codex exec --json`` (codex-rs/exec/src/exec_events.rs).

    A command or MCP call becomes its tool_call when it starts (so a live view sees it
    running, and a run cut off mid-command still shows it) and its tool_result when it
    completes; a completed item never seen starting gets both. Other ``item.started`` and
    all ``item.updated`` lines are skipped: the completed item carries the final state.
    """

    _RUNS = ("command_execution", "mcp_tool_call")
    _PHASES = ("item.started", "item.updated", "item.completed")

    def __init__(self) -> None:
        super().__init__()
        self._started: set[str] = set()

    def _event(self, event: dict[str, Any], at: float) -> list[Step] | None:
        kind = event.get("type")
        if kind == "thread.started":
            return [self._step("system", at, describe("thread started", event.get("thread_id")))]
        if kind == "turn.started":
            return [self._step("system", at, "turn started")]
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            detail = describe("turn completed", cached=usage.get("cached_input_tokens"))
            return [self._step("usage", at, detail, tokens_in=token_count(usage.get("input_tokens")),
                               tokens_out=token_count(usage.get("output_tokens")))]
        if kind == "turn.failed":
            return [self._step("error", at, error_message(event.get("error")) or "turn failed")]
        if kind == "error" and "message" in event:
            return [self._step("error", at, event.get("message"))]
        if kind in self._PHASES and isinstance(event.get("item"), dict):
            return self._item(kind, event["item"], at)
        if kind == "item.plan.delta":
            return [self._step("system", at, describe("plan delta", event.get("delta")))]
        if kind == "request_user_input":
            return [self._step("system", at, describe("request_user_input", event.get("questions")))]
        return None

    def _item(self, phase: str, item: dict[str, Any], at: float) -> list[Step] | None:
        kind, item_id = item.get("type"), ident(item.get("id"))
        if phase != "item.completed":
            if phase == "item.started" and kind in self._RUNS and item_id not in self._started:
                if item_id is not None:
                    self._started.add(item_id)
                return [self._run_call(item, at)]
            return []
        if kind == "agent_message":
            return [self._step("message", at, item.get("text"), role="assistant")]
        if kind == "reasoning":
            return [self._step("reasoning", at, item.get("text"))]
        if kind in self._RUNS:
            steps = [] if item_id in self._started else [self._run_call(item, at)]
            self._started.discard(item_id)
            return steps + [self._run_result(item, at)]
        if kind == "file_change":
            return [self._tool_call(at, "file_change", item_id, {"changes": item.get("changes")},
                                    text=_changes_text(item))]
        if kind == "web_search":
            return [self._tool_call(at, "web_search", item_id, {"query": item.get("query")})]
        if kind == "collab_tool_call":
            return [self._tool_call(at, f"collab/{as_text(item.get('tool'))}", item_id,
                                    {"prompt": item.get("prompt"),
                                     "receivers": item.get("receiver_thread_ids")})]
        if kind == "todo_list":
            todo = [f"[{'x' if as_dict(t).get('completed') else ' '}] {as_text(as_dict(t).get('text'))}"
                    for t in as_list(item.get("items"))]
            return [self._step("system", at, "\n".join(["todo list"] + todo))]
        if kind == "plan":
            return [self._step("system", at, "plan\n" + as_text(item.get("text")))]
        if kind == "error":
            return [self._step("error", at, item.get("message"))]
        return None

    def _run_call(self, item: dict[str, Any], at: float) -> Step:
        if item.get("type") == "command_execution":
            return self._tool_call(at, "shell", item.get("id"), {"command": item.get("command")})
        tool = "/".join(filter(None, [ident(item.get("server")), ident(item.get("tool"))]))
        return self._tool_call(at, tool or None, item.get("id"), item.get("arguments"))

    def _run_result(self, item: dict[str, Any], at: float) -> Step:
        if item.get("type") == "command_execution":
            code = item.get("exit_code")
            note = f"[exit code {code}]" if code is not None else f"[{as_text(item.get('status'))}]"
            return self._tool_result(at, None, item.get("id"), as_text(item.get("aggregated_output")),
                                     note + "\n")
        if item.get("error"):
            message = error_message(item["error"])
            return self._tool_result(at, None, item.get("id"), message, "[error] ")
        result = as_dict(item.get("result"))
        text = blocks_text(result.get("content")) or as_text(result.get("structured_content"))
        return self._tool_result(at, None, item.get("id"), text)


def _changes_text(item: dict[str, Any]) -> str:
    """A file change as its paths: ``add code/train.py, update README.md (completed)``."""
    changes = []
    for change in as_list(item.get("changes")):
        change = as_dict(change)
        path = as_text(change.get("path"))
        if path:
            kind = ident(change.get("kind"))
            changes.append(f"{kind} {path}" if kind else path)
    status = ident(item.get("status"))
    text = ", ".join(changes) or "file change"
    return f"{text} ({status})" if status else text
