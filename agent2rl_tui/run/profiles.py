"""Agent profiles: how each coding agent is started the way its users run it headless.

A profile names the command template, how the driver model is set, the environment
variables passed through (API keys reach the agent but are never written to the record),
the instructions file the CLI reads on its own, and the format of its output stream (for
the transcript normalizer). Built-in profiles cover Claude Code, Codex, Gemini CLI,
OpenCode, OpenHands, the scripted example agent and any shell command; a user TOML file
overrides or adds profiles without touching code.

Flags follow each CLI's documentation as summarised in docs/agent-clis.md (checked there,
not from memory); where a flag is deprecated or version-dependent, the profile sets the
documented environment variable or config instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

STREAM_FORMATS = ("claude-stream-json", "codex-jsonl", "gemini-stream-json", "opencode-json",
                  "openhands-json", "text")

# Passed to every agent: what a process needs to run, find its tools, reach its API through a
# proxy, and use the GPU. Profiles add their own keys.
BASE_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "SHELL", "TMPDIR", "TZ",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES",
    "HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT", "TRANSFORMERS_CACHE",
    "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "VIRTUAL_ENV",
    "CONDA_PREFIX", "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "NODE_OPTIONS",
)


class ProfileError(ValueError):
    """A profile is unknown or malformed, or its pre-flight failed; the message says what to do."""


@dataclass(frozen=True)
class AgentProfile:
    """How to start one kind of agent."""

    name: str
    command: tuple[str, ...]
    """argv template; ``{prompt}``, ``{model}``, ``{workspace}``, ``{python}`` are filled in.
    A token ``{model_args}`` expands to ``model_flag MODEL`` when a driver model is set, else
    to nothing."""
    description: str = ""
    stream_format: str = "text"
    instructions_file: str | None = None
    """Written into the workspace with the prompt's standing part (the CLI loads it itself)."""
    model_flag: str | None = None
    model_env: str | None = None
    """Environment variable that sets the driver model, for CLIs configured that way."""
    default_model: str | None = None
    env_pass: tuple[str, ...] = ()
    """Variables passed from the caller's environment ("*" passes everything)."""
    required_env: tuple[tuple[str, ...], ...] = ()
    """Each group needs at least one variable set (an API key, usually)."""
    env: dict[str, str] = field(default_factory=dict)
    """Fixed variables for the agent (e.g. to skip a trust prompt)."""
    install_hint: str = ""
    writable_paths: tuple[str, ...] = ()
    """Paths the contained agent may write besides its workspace (``~/`` is the user's home):
    its CLI's configuration, logins and sessions. See docs/containment.md."""
    read_only_paths: tuple[str, ...] = ()
    """Paths the contained agent may read that containment would otherwise hide (under the
    home, the run's folder, /tmp): a tool's install, a shared dataset."""

    @property
    def executable(self) -> str:
        return self.command[0]

    def driver(self, requested: str | None) -> str | None:
        return requested or self.default_model

    def argv(self, *, prompt: str, model: str | None, workspace: Path, command: str | None = None) -> list[str]:
        """The command line, templates filled in."""
        values = {"prompt": prompt, "model": model or "", "workspace": str(workspace),
                  "python": sys.executable, "command": command or ""}
        out: list[str] = []
        for token in self.command:
            if token == "{model_args}":
                if model and self.model_flag:
                    out += [self.model_flag, model]
                continue
            out.append(token.format(**values))
        return out

    def agent_env(self, source: dict[str, str], model: str | None) -> dict[str, str]:
        """The agent's environment: base variables, the profile's pass-through and fixed ones."""
        if "*" in self.env_pass:
            env = dict(source)
        else:
            env = {k: source[k] for k in (*BASE_ENV, *self.env_pass) if k in source}
        env.update(self.env)
        if model and self.model_env:
            env[self.model_env] = model
        return env


def _py(*args: str) -> tuple[str, ...]:
    return ("{python}", "-u", *args)


BUILTIN_PROFILES: dict[str, AgentProfile] = {
    p.name: p
    for p in [
        AgentProfile(
            name="claude-code",
            description="Anthropic's Claude Code, headless (-p) with stream-json output",
            command=("claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose",
                     "--dangerously-skip-permissions", "{model_args}"),
            stream_format="claude-stream-json",
            instructions_file="CLAUDE.md",
            model_flag="--model",
            env_pass=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
                      "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
                      "AWS_REGION", "AWS_PROFILE", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"),
            required_env=(("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                           "CLAUDE_CODE_USE_VERTEX"),),
            # Bypass mode refuses to run as root unless IS_SANDBOX=1 (anthropics/claude-code#3490).
            env={"IS_SANDBOX": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
            install_hint="npm install -g @anthropic-ai/claude-code",
            writable_paths=("~/.claude", "~/.claude.json"),
        ),
        AgentProfile(
            name="codex",
            description="OpenAI Codex CLI, `codex exec --json`",
            command=("codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox",
                     "--skip-git-repo-check", "{model_args}", "{prompt}"),
            stream_format="codex-jsonl",
            instructions_file="AGENTS.md",
            model_flag="-m",
            env_pass=("CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"),
            required_env=(("CODEX_API_KEY", "OPENAI_API_KEY"),),
            install_hint="npm install -g @openai/codex",
            writable_paths=("~/.codex",),
        ),
        AgentProfile(
            name="gemini-cli",
            description="Google Gemini CLI, headless (-p) with stream-json output",
            command=("gemini", "--approval-mode=yolo", "--output-format", "stream-json", "{model_args}",
                     "-p", "{prompt}"),
            stream_format="gemini-stream-json",
            instructions_file="GEMINI.md",
            model_flag="-m",
            env_pass=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                      "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS", "GEMINI_CLI_HOME"),
            required_env=(("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),),
            # Folder trust: the docs and the source name different variables; set both.
            env={"GEMINI_TRUST_WORKSPACE": "true", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                 "GEMINI_SANDBOX": "false"},
            install_hint="npm install -g @google/gemini-cli",
            writable_paths=("~/.gemini",),
        ),
        AgentProfile(
            name="opencode",
            description="OpenCode, `opencode run --format json`",
            command=("opencode", "run", "--format", "json", "{model_args}", "{prompt}"),
            stream_format="opencode-json",
            instructions_file="AGENTS.md",
            model_flag="-m",
            env_pass=("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY",
                      "GROQ_API_KEY", "OPENCODE_CONFIG"),
            # Headless runs reject any permission that would ask; allow them in config (works
            # across versions, unlike the --auto flag), and keep it from updating or sharing.
            env={"OPENCODE_CONFIG_CONTENT": '{"permission": "allow", "autoupdate": false, "share": "disabled"}',
                 "OPENCODE_DISABLE_AUTOUPDATE": "1"},
            install_hint="npm install -g opencode-ai",
            writable_paths=("~/.config/opencode", "~/.local/share/opencode", "~/.local/state/opencode"),
        ),
        AgentProfile(
            name="openhands",
            description="OpenHands CLI, --headless --json (model and key from LLM_* variables)",
            command=("openhands", "--headless", "--json", "--override-with-envs", "-t", "{prompt}"),
            stream_format="openhands-json",
            instructions_file="AGENTS.md",
            model_env="LLM_MODEL",
            env_pass=("LLM_API_KEY", "LLM_BASE_URL", "LLM_MODEL", "OPENHANDS_CONVERSATIONS_DIR"),
            required_env=(("LLM_API_KEY",),),
            env={"OPENHANDS_SUPPRESS_BANNER": "1"},
            install_hint="uv tool install openhands --python 3.12",
            writable_paths=("~/.openhands",),
        ),
        AgentProfile(
            name="example",
            description="the scripted SFT+GRPO agent shipped with agent2rl-tui (no LLM)",
            command=_py("-m", "agent2rl_tui.agents.example"),
            stream_format="text",
            env_pass=("*",),
            default_model="scripted",
        ),
        AgentProfile(
            name="command",
            description="any shell command line (--command), run with bash in the workspace",
            command=("bash", "-c", "{command}"),
            stream_format="text",
            env_pass=("*",),
        ),
    ]
}


def user_profiles_path() -> Path:
    env = os.environ.get("AGENT2RL_AGENTS")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return base / "agent2rl-tui" / "agents.toml"


_FIELDS = {"command", "description", "stream_format", "instructions_file", "model_flag", "model_env",
           "default_model", "env_pass", "required_env", "env", "install_hint", "writable_paths",
           "read_only_paths"}


def _from_toml(name: str, raw: dict[str, Any], known: dict[str, AgentProfile], source: Path) -> AgentProfile:
    unknown = set(raw) - _FIELDS - {"extends"}
    if unknown:
        raise ProfileError(f"{source}: [agents.{name}] has unknown keys {sorted(unknown)}; "
                           f"known: {sorted(_FIELDS | {'extends'})}")
    base_name = raw.get("extends", name if name in known else None)
    if base_name is not None and base_name not in known:
        raise ProfileError(f"{source}: [agents.{name}] extends unknown profile {base_name!r}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "extends":
            continue
        if key == "command":
            value = tuple(shlex.split(value) if isinstance(value, str) else value)
        elif key in ("env_pass", "writable_paths", "read_only_paths"):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ProfileError(f"{source}: [agents.{name}] {key} must be a list of strings")
            value = tuple(value)
        elif key == "required_env":
            value = tuple(tuple([g] if isinstance(g, str) else g) for g in value)
        elif key == "env":
            value = {str(k): str(v) for k, v in value.items()}
        values[key] = value
    if base_name is not None:
        profile = replace(known[base_name], name=name, **values)
    elif "command" not in values:
        raise ProfileError(f"{source}: [agents.{name}] needs a command (or extends = \"<profile>\")")
    else:
        profile = AgentProfile(name=name, **values)
    if profile.stream_format not in STREAM_FORMATS:
        raise ProfileError(f"{source}: [agents.{name}] stream_format must be one of {', '.join(STREAM_FORMATS)}")
    return profile


def load_profiles(path: Path | None = None) -> dict[str, AgentProfile]:
    """Built-in profiles, overridden and extended by the user's TOML file if there is one."""
    profiles = dict(BUILTIN_PROFILES)
    path = path or user_profiles_path()
    if not path.exists():
        return profiles
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path} is not valid TOML: {exc}") from exc
    for name, raw in data.get("agents", {}).items():
        profiles[name] = _from_toml(name, raw, profiles, path)
    return profiles


def get_profile(name: str, path: Path | None = None) -> AgentProfile:
    profiles = load_profiles(path)
    if name not in profiles:
        raise ProfileError(f"unknown agent {name!r}; known agents: {', '.join(sorted(profiles))} "
                           f"(add your own in {path or user_profiles_path()})")
    return profiles[name]


def preflight(profile: AgentProfile, env: dict[str, str], *, command: str | None = None,
              allow_missing_key: bool = False) -> None:
    """Check what can be checked before a run starts; ProfileError says what to fix."""
    if profile.name == "command" or "{command}" in profile.command:
        if not command:
            raise ProfileError("the 'command' agent needs --command 'CMD' (a shell command line)")
    exe = profile.executable
    if exe != "{python}" and shutil.which(exe, path=env.get("PATH")) is None:
        hint = f" Install it: {profile.install_hint}" if profile.install_hint else ""
        raise ProfileError(f"{exe!r} (agent {profile.name}) is not on PATH.{hint}")
    if allow_missing_key:
        return
    for group in profile.required_env:
        if not any(env.get(k) for k in group):
            names = " or ".join(group)
            raise ProfileError(
                f"agent {profile.name} needs {names} set in the environment. Set it, or pass "
                "--allow-missing-key if the CLI is logged in by other means."
            )
