"""Turn a script step (run, write, answer) into a tool call the requesting CLI understands.

Each CLI offers its own tools, with its own names and argument shapes (read from the CLIs'
source; docs/drivers.md has the table):

    Claude Code   Bash{command, description?}           Write{file_path (absolute), content}
    Codex         exec_command{cmd, login?} | shell_command{command} | shell{command: [argv]}
                  apply_patch (custom freeform tool, or a function with {input}): "*** Add File:"
    Gemini CLI    run_shell_command{command, description?}  write_file{file_path, content}
    OpenCode      bash{command, description}             write{filePath, content}
    OpenHands     terminal | execute_bash {command}      file_editor | str_replace_editor
                                                         {command: "create", path (absolute), file_text}

The shell and write tools are found by these names first, then by shape (a command property;
a path and a content property). A write with no write tool offered, or with a relative path
that a tool needs absolute when the request does not say where the agent works, goes through
the shell tool (``printf '%s' … > path``, exact bytes). Required arguments the driver has no
value for are filled from their schema (an enum's first value, "LOW" for a risk level, 0,
false, a short text), so validating CLIs accept the call.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.llm.protocols.base import LlmRequest, Tool
from agent2rl_tui.llm.script import ANSWER, RUN, Step

SHELL_TOOLS = ("Bash", "run_shell_command", "bash", "exec_command", "shell_command", "shell", "terminal",
               "execute_bash")
WRITE_TOOLS = ("Write", "write_file", "write", "create_file")
EDITOR_TOOLS = ("file_editor", "str_replace_editor", "str_replace_based_edit_tool")
PATCH_TOOLS = ("apply_patch",)
PATH_KEYS = ("file_path", "filePath", "path", "absolute_path", "filename")
CONTENT_KEYS = ("content", "file_text", "contents")
COMMAND_KEYS = ("cmd", "command")
# Tools that resolve a relative path against the agent's working folder themselves.
RELATIVE_OK = ("write_file", "write", "apply_patch")
SHELL_HINTS = ("bash", "shell", "exec", "terminal", "command", "run")

CWD_PATTERNS = [re.compile(p, re.MULTILINE) for p in (
    r"<cwd>\s*(/[^<\n]*?)\s*</cwd>",                                  # Codex environment_context
    r"[Ww]orking directory:\s*(/[^\n]*?)\s*$",                        # Claude Code, OpenCode <env>
    r"current working directory is:?\s*(/[^\s]+?)\.?$",               # OpenHands file_editor description
    r"currently working in the directory:\s*(/[^\n]*?)\s*$",          # Gemini CLI (older)
    r"Workspace Directories:\*\*\s*\n\s*-\s*(/[^\n]*?)\s*$",         # Gemini CLI (newer)
)]


@dataclass
class Plan:
    """What to answer for one step: text, and a tool call given as (tool, arguments) for a
    function tool or (tool, input) for a custom one. ``intent`` says what was done (run, write,
    answer, or ``unmapped`` when the request offers no tool for the step); ``note`` why a
    fallback was taken."""

    intent: str
    text: str = ""
    tool: Tool | None = None
    arguments: dict[str, Any] | None = None
    input: str | None = None
    note: str = ""


def by_name(tools: list[Tool], names: tuple[str, ...]) -> Tool | None:
    index = {t.name: t for t in tools}
    for name in names:
        if name in index:
            return index[name]
    return None


def find_shell(tools: list[Tool]) -> Tool | None:
    found = by_name([t for t in tools if t.kind == "function"], SHELL_TOOLS)
    if found is not None:
        return found
    for t in tools:
        if t.kind == "function" and any(k in t.properties for k in COMMAND_KEYS) \
                and any(h in t.name.lower() for h in SHELL_HINTS):
            return t
    return None


def _keys(tool: Tool) -> tuple[str | None, str | None]:
    path = next((k for k in PATH_KEYS if k in tool.properties), None)
    content = next((k for k in CONTENT_KEYS if k in tool.properties), None)
    return path, content


def find_writer(tools: list[Tool]) -> Tool | None:
    functions = [t for t in tools if t.kind == "function"]
    for names in (WRITE_TOOLS, EDITOR_TOOLS):
        found = by_name(functions, names)
        if found is not None and all(_keys(found)):
            return found
    for t in functions:
        if all(_keys(t)) and (t.name not in SHELL_TOOLS):
            return t
    return by_name(tools, PATCH_TOOLS)


def find_cwd(texts: list[str]) -> str | None:
    """The agent's working folder as the request states it (the first statement found)."""
    for text in texts:
        for pattern in CWD_PATTERNS:
            m = pattern.search(text)
            if m:
                return m.group(1).rstrip("/") or "/"
    return None


def example(schema: Any, name: str = "", say: str = "", text: str = "scripted") -> Any:
    """A value that validates against ``schema`` (the common subset of JSON Schema and
    Gemini's OpenAPI schema): what a required argument gets when the step gives none, and what
    a JSON-mode utility call gets (with ``text=""``: Gemini CLI's edit corrector keeps the
    original when a ``corrected_*`` string comes back empty)."""
    if not isinstance(schema, dict):
        return text
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "LOW" if "LOW" in enum else enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and str(o.get("type")).lower() == "null")]
            return example((usable or options)[0], name, say, text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    kind = str(kind).lower() if kind else ("object" if "properties" in schema else "string")
    if kind == "object":
        props = found if isinstance(found := schema.get("properties"), dict) else {}
        required = listed if isinstance(listed := schema.get("required"), list) else list(props)
        return {k: example(props.get(k), k, say, text) for k in required if isinstance(k, str)}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        low = schema.get("minimum")
        return low if isinstance(low, (int, float)) and not isinstance(low, bool) else 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if text and ("description" in name.lower() or "summary" in name.lower()):
        return say or "Scripted step."
    return text


def fill_required(tool: Tool, arguments: dict[str, Any], say: str) -> dict[str, Any]:
    for key in tool.required:
        if key not in arguments:
            arguments[key] = example(tool.properties.get(key), key, say)
    return arguments


def shell_arguments(tool: Tool, command: str, say: str) -> dict[str, Any]:
    props = tool.properties
    key = next((k for k in COMMAND_KEYS if k in props), "command")
    is_argv = isinstance(props.get(key), dict) and props[key].get("type") == "array"
    args: dict[str, Any] = {key: ["bash", "-c", command] if is_argv else command}
    if "description" in props:
        args["description"] = say or f"Run {command[:60]}"
    if isinstance(props.get("login"), dict) and props["login"].get("type") == "boolean":
        # A login shell resets PATH from /etc/profile (as root: no venv python); a model may choose.
        args["login"] = False
    return fill_required(tool, args, say)


def shell_write(path: str, content: str) -> str:
    """A shell command that writes ``content`` to ``path`` byte for byte (parents made)."""
    q = shlex.quote(path)
    folder = posixpath.dirname(path)
    mk = f"mkdir -p -- {shlex.quote(folder)} && " if folder else ""
    return f"{mk}printf '%s' {shlex.quote(content)} > {q}"


def add_file_patch(path: str, content: str) -> str:
    """Codex's apply_patch form that creates ``path`` with ``content`` (each line ``+``-prefixed)."""
    body = content[:-1] if content.endswith("\n") else content
    lines = "".join(f"+{line}\n" for line in body.split("\n"))
    return f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"


def plan_step(step: Step, request: LlmRequest, cwd: str | None = None) -> Plan:
    """The reply for ``step`` given the tools ``request`` offers. ``cwd``: the script's own
    statement of the working folder, over what the request says."""
    if step.kind == ANSWER:
        return Plan(ANSWER, text=step.text)
    names = [t.name for t in request.tools]
    shell = find_shell(request.tools)
    if step.kind == RUN:
        if shell is None:
            return Plan("unmapped", text=f"[scripted driver] cannot {step.describe()}: no shell tool among {names}",
                        note="no shell tool")
        return Plan(RUN, step.text, shell, shell_arguments(shell, step.command, step.text))
    writer = find_writer(request.tools)
    path, note = step.path, ""
    if writer is not None and not path.startswith("/"):
        base = cwd or find_cwd(request.texts)
        if base:
            path = posixpath.normpath(posixpath.join(base, path))
        elif writer.name not in RELATIVE_OK:
            note = f"{writer.name} needs an absolute path and the request states no working folder"
            writer = None
    if writer is None:
        if shell is None:
            return Plan("unmapped", text=f"[scripted driver] cannot {step.describe()}: no write or shell tool among {names}",
                        note="no write or shell tool")
        note = note or "no write tool offered"
        return Plan("write", step.text, shell, shell_arguments(shell, shell_write(step.path, step.content), step.text),
                    note=f"through {shell.name}: {note}")
    if writer.name in PATCH_TOOLS:
        patch = add_file_patch(path, step.content)
        if writer.kind == "custom":
            return Plan("write", step.text, writer, input=patch)
        key = next(iter(writer.required or writer.properties), "input")
        return Plan("write", step.text, writer, fill_required(writer, {key: patch}, step.text))
    path_key, content_key = _keys(writer)
    args: dict[str, Any] = {}
    if "command" in writer.properties and writer.name not in WRITE_TOOLS:
        args["command"] = "create"
    args[path_key or "path"] = path
    args[content_key or "content"] = step.content
    return Plan("write", step.text, writer, fill_required(writer, args, step.text))
