"""Agent profiles: how each coding agent is started the way its users run it headless.

A profile names the command template, how the driver model is set, the environment
variables passed through (API keys reach the agent but are never written to the record),
the instructions file the CLI reads on its own, and the format of its output stream (for
the transcript normalizer). Built-in profiles cover Claude Code, Codex, Gemini CLI,
OpenCode, OpenHands, the scripted example agent and any shell command; a user TOML file
overrides or adds profiles without touching code.

A profile also says what its CLI needs to start inside the run's own home (the configuration
and login files copied in, never its history or sessions), how a driver URL given with
``run start --driver-url`` reaches it (``gateway``: each CLI has its own variable or config),
and how to check that it starts at all (``check_args``, run in the sandbox at pre-flight).

Flags follow each CLI's documentation as summarised in docs/agent-clis.md (checked there,
not from memory); where a flag is deprecated or version-dependent, the profile sets the
documented environment variable or config instead.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent2rl_tui.util.locks import REPO

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
    home_files: tuple[str, ...] = ()
    """Configuration files (``~/...``) copied from the user's home into the run's own home
    before the agent starts, so the CLI starts as its user set it up. Never its history,
    sessions or projects: those the CLI writes afresh in the run's home, part of the record."""
    login_files: tuple[str, ...] = ()
    """Login files (``~/...``: credentials, tokens), copied in like ``home_files`` and removed
    from the run's folder once the agent has ended, so no login stays in the record."""
    config_dirs: dict[str, str] = field(default_factory=dict)
    """Variables that move the CLI's configuration folder (``CODEX_HOME``: ``~/.codex``): when
    the caller sets one, the files above are read from there, and the agent does not get the
    variable (its CLI uses the folder in its own home)."""
    gateway: str | None = None
    """How a driver URL (``run start --driver-url``) reaches this CLI: one of ``GATEWAYS``."""
    session_dirs: tuple[str, ...] = ()
    """Where the CLI keeps its own sessions (``~/...``, in the run's own home): recorded with the
    run so the report can point at them (``record.sessions``)."""
    check_args: tuple[str, ...] = ()
    """Arguments that make the CLI print its version and exit (``--version``): pre-flight runs
    the executable with them inside the sandbox, so a run whose agent cannot start is refused."""

    @property
    def executable(self) -> str:
        return self.command[0]

    def driver(self, requested: str | None) -> str | None:
        return requested or self.default_model

    def argv(self, *, prompt: str, model: str | None, workspace: Path, command: str | None = None,
             driver_args: Sequence[str] = ()) -> list[str]:
        """The command line, templates filled in. ``driver_args`` (a gateway's, see
        ``driver_setup``) go where ``{model_args}`` stands, else right after the executable."""
        values = {"prompt": prompt, "model": model or "", "workspace": str(workspace),
                  "python": sys.executable, "command": command or ""}
        out: list[str] = []
        placed = False
        for token in self.command:
            if token == "{model_args}":
                if model and self.model_flag:
                    out += [self.model_flag, model]
                out += driver_args
                placed = True
                continue
            out.append(token.format(**values))
        if driver_args and not placed:
            out[1:1] = driver_args
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
        if "PATH" in env and self.executable != "{python}":
            env["PATH"] = path_with_agent_clis(env["PATH"], self.executable)
        return env

    @property
    def own_home(self) -> bool:
        """The agent CLIs get a home of the run's own whether contained or not: one run never
        reads another's sessions."""
        return bool(self.home_files or self.login_files or self.gateway)


# --- pointing a CLI at a driver URL ----------------------------------------------------------

GATEWAY_PROVIDER = "agent2rl"
"""The name of the provider a gateway adds to a CLI's configuration (Codex, OpenCode)."""
GATEWAY_MODEL = "driver"
"""The model name Codex, OpenCode and OpenHands are given through a gateway when the run names none."""


@dataclass(frozen=True)
class DriverSetup:
    """What pointing one CLI at a driver URL takes: variables, arguments, files in its home."""

    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    """Command-line arguments, placed where ``{model_args}`` stands (after the model's)."""
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    """JSON settings merged into files of the agent's home (``~/...`` → keys to set)."""
    model: str | None = None
    """The driver model as the CLI must be given it (OpenCode: ``provider/model``)."""


def _root(url: str) -> str:
    """The gateway's root: a trailing slash and API version (``/v1``, ``/v1beta``) dropped."""
    root = url.strip().rstrip("/")
    for suffix in ("/v1", "/v1beta"):
        if root.endswith(suffix):
            return root[: -len(suffix)]
    return root


def _anthropic(url: str, model: str | None, profile: AgentProfile, env: dict[str, str]) -> DriverSetup:
    # The SDK adds /v1/messages itself.
    return DriverSetup(url, env={"ANTHROPIC_BASE_URL": _root(url)}, model=model)


def _codex(url: str, model: str | None, profile: AgentProfile, env: dict[str, str]) -> DriverSetup:
    # Codex 0.169 ignores OPENAI_BASE_URL; a provider of its own (Responses API) on the command
    # line overrides any in the user's config.toml. Its key is read from the variable named.
    key = next((k for k in ("CODEX_API_KEY", "OPENAI_API_KEY") if env.get(k)), "CODEX_API_KEY")
    p = f"model_providers.{GATEWAY_PROVIDER}"
    settings = [f'model_provider="{GATEWAY_PROVIDER}"', f'{p}.name="agent2rl driver"',
                f"{p}.base_url={json.dumps(_root(url) + '/v1')}", f'{p}.wire_api="responses"',
                f'{p}.env_key="{key}"']
    # Its own default model (gpt-6.1-sol in 0.169) sends no tools through a custom provider: a
    # run that names no driver model gets one named "driver" (Codex warns it has no metadata).
    return DriverSetup(url, args=tuple(a for s in settings for a in ("-c", s)), model=model or GATEWAY_MODEL)


def _gemini(url: str, model: str | None, profile: AgentProfile, env: dict[str, str]) -> DriverSetup:
    # With a base URL alone Gemini CLI 0.61 picks the auth type "gateway" and refuses it itself
    # ("Invalid auth method selected.", exit 41): its settings must select the API key.
    return DriverSetup(url, env={"GOOGLE_GEMINI_BASE_URL": _root(url)},
                       files={"~/.gemini/settings.json": {"security": {"auth": {"selectedType": "gemini-api-key"}}}},
                       model=model)


def _opencode(url: str, model: str | None, profile: AgentProfile, env: dict[str, str]) -> DriverSetup:
    # An OpenAI-compatible provider (Chat Completions) in the inline config, the model listed.
    name = (model or GATEWAY_MODEL).removeprefix(f"{GATEWAY_PROVIDER}/")
    options: dict[str, Any] = {"baseURL": _root(url) + "/v1"}
    if env.get("OPENAI_API_KEY"):
        options["apiKey"] = "{env:OPENAI_API_KEY}"
    try:
        config = json.loads(profile.env.get("OPENCODE_CONFIG_CONTENT") or "{}")
    except ValueError:
        config = {}
    config = config if isinstance(config, dict) else {}
    config.setdefault("provider", {})[GATEWAY_PROVIDER] = {
        "npm": "@ai-sdk/openai-compatible", "name": "agent2rl driver", "options": options, "models": {name: {}}}
    return DriverSetup(url, env={"OPENCODE_CONFIG_CONTENT": json.dumps(config)},
                       model=f"{GATEWAY_PROVIDER}/{name}")


def _openhands(url: str, model: str | None, profile: AgentProfile, env: dict[str, str]) -> DriverSetup:
    # LiteLLM: an OpenAI-compatible endpoint takes a model named openai/<name>; without one the
    # CLI would look for its settings file, which a run's own home does not have.
    model = model or GATEWAY_MODEL
    if "/" not in model:
        model = f"openai/{model}"
    return DriverSetup(url, env={"LLM_BASE_URL": _root(url) + "/v1"}, model=model)


GATEWAYS = {"anthropic": _anthropic, "codex": _codex, "gemini": _gemini, "opencode": _opencode,
            "openhands": _openhands}
"""How a driver URL reaches each kind of CLI; a profile names one as ``gateway``."""


def driver_setup(profile: AgentProfile, url: str | None, model: str | None,
                 env: dict[str, str] | None = None) -> DriverSetup:
    """What the agent of ``profile`` needs to use the driver API at ``url`` (the gateway's root,
    ``http://host:port``; a trailing ``/v1`` is accepted). No URL: the CLI's own defaults."""
    if not url:
        return DriverSetup(model=model)
    if profile.gateway is None:
        raise ProfileError(f"agent {profile.name} takes no --driver-url (its profile names no gateway; "
                           f"one of {', '.join(GATEWAYS)})")
    if not url.startswith(("http://", "https://")):
        raise ProfileError(f"--driver-url {url!r}: give the driver API's root, e.g. http://127.0.0.1:8000")
    return GATEWAYS[profile.gateway](url, model, profile, dict(env or {}))


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
                      "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
                      "AWS_REGION", "AWS_PROFILE", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"),
            required_env=(("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                           "CLAUDE_CODE_USE_VERTEX"),),
            # Bypass mode refuses to run as root unless IS_SANDBOX=1 (anthropics/claude-code#3490).
            env={"IS_SANDBOX": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 "DISABLE_AUTOUPDATER": "1"},
            install_hint="npm install -g @anthropic-ai/claude-code",
            home_files=("~/.claude/settings.json",),
            # ~/.claude.json holds the account (and an API key given to /login); its per-project
            # history ("projects") is left out of the copy.
            login_files=("~/.claude/.credentials.json", "~/.claude.json"),
            config_dirs={"CLAUDE_CONFIG_DIR": "~/.claude"},
            gateway="anthropic",
            session_dirs=("~/.claude/projects",),
            check_args=("--version",),
        ),
        AgentProfile(
            name="codex",
            description="OpenAI Codex CLI, `codex exec --json`",
            # allow_login_shell=false: a login shell reads /etc/profile, which resets PATH for
            # root (then the workspace's python is not found).
            command=("codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox",
                     "--skip-git-repo-check", "-c", "allow_login_shell=false", "{model_args}", "{prompt}"),
            stream_format="codex-jsonl",
            instructions_file="AGENTS.md",
            model_flag="-m",
            env_pass=("CODEX_API_KEY", "OPENAI_API_KEY"),
            required_env=(("CODEX_API_KEY", "OPENAI_API_KEY"),),
            install_hint="npm install -g @openai/codex",
            home_files=("~/.codex/config.toml",),
            login_files=("~/.codex/auth.json",),
            config_dirs={"CODEX_HOME": "~/.codex"},
            gateway="codex",
            session_dirs=("~/.codex/sessions",),
            check_args=("--version",),
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
                      "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GEMINI_BASE_URL"),
            required_env=(("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),),
            # Folder trust: the docs and the source name different variables; set both.
            env={"GEMINI_TRUST_WORKSPACE": "true", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                 "GEMINI_SANDBOX": "false"},
            install_hint="npm install -g @google/gemini-cli",
            home_files=("~/.gemini/settings.json",),
            login_files=("~/.gemini/oauth_creds.json", "~/.gemini/google_accounts.json", "~/.gemini/.env"),
            config_dirs={"GEMINI_CLI_HOME": "~"},
            gateway="gemini",
            session_dirs=("~/.gemini/tmp",),
            check_args=("--version",),
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
            home_files=("~/.config/opencode/opencode.json", "~/.config/opencode/opencode.jsonc",
                        "~/.config/opencode/config.json"),
            login_files=("~/.local/share/opencode/auth.json",),
            gateway="opencode",
            session_dirs=("~/.local/share/opencode",),
            check_args=("--version",),
        ),
        AgentProfile(
            name="openhands",
            description="OpenHands CLI, --headless --json (model and key from LLM_* variables)",
            command=("openhands", "--headless", "--json", "--override-with-envs", "-t", "{prompt}"),
            stream_format="openhands-json",
            instructions_file="AGENTS.md",
            model_env="LLM_MODEL",
            env_pass=("LLM_API_KEY", "LLM_BASE_URL", "LLM_MODEL"),
            required_env=(("LLM_API_KEY",),),
            env={"OPENHANDS_SUPPRESS_BANNER": "1"},
            install_hint="uv tool install openhands --python 3.12",
            home_files=("~/.openhands/mcp.json", "~/.openhands/cli_config.json"),
            # agent_settings.json holds the LLM settings with their API key.
            login_files=("~/.openhands/agent_settings.json",),
            gateway="openhands",
            session_dirs=("~/.openhands/conversations",),
            check_args=("--version",),
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
           "read_only_paths", "home_files", "login_files", "config_dirs", "gateway", "check_args",
           "session_dirs"}


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
        elif key in ("env_pass", "writable_paths", "read_only_paths", "home_files", "login_files", "check_args",
                     "session_dirs"):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ProfileError(f"{source}: [agents.{name}] {key} must be a list of strings")
            value = tuple(value)
        elif key == "required_env":
            value = tuple(tuple([g] if isinstance(g, str) else g) for g in value)
        elif key in ("env", "config_dirs"):
            if not isinstance(value, dict):
                raise ProfileError(f"{source}: [agents.{name}] {key} must be a table of strings")
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
    if profile.gateway is not None and profile.gateway not in GATEWAYS:
        raise ProfileError(f"{source}: [agents.{name}] gateway must be one of {', '.join(GATEWAYS)}")
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
    if exe != "{python}" and shutil.which(exe, path=path_with_agent_clis(env.get("PATH"), exe)) is None:
        hint = f" Install it: {profile.install_hint}" if profile.install_hint else ""
        raise ProfileError(f"{exe!r} (agent {profile.name}) is neither on PATH nor among the agent CLIs "
                           f"`make agent-clis` installs (.agent-clis/).{hint}")
    if allow_missing_key:
        return
    for group in profile.required_env:
        if not any(env.get(k) for k in group):
            names = " or ".join(group)
            raise ProfileError(
                f"agent {profile.name} needs {names} set in the environment. Set it, or pass "
                "--allow-missing-key if the CLI is logged in by other means."
            )


def agent_cli_dirs(repo: Path = REPO) -> list[Path]:
    """The bin folders of the agent CLIs ``make agent-clis`` installed into the checkout (``.agent-clis/``:
    the npm CLIs, and OpenHands in a venv of its own)."""
    base = repo / ".agent-clis"
    return [d for d in (base / "node_modules" / ".bin", *sorted(base.glob("*/bin"))) if d.is_dir()]


def path_with_agent_clis(path: str | None, exe: str, repo: Path = REPO) -> str:
    """``PATH`` (this process's if None) and, when ``exe`` is not on it, the one folder of the checkout's
    agent CLIs that holds it: a CLI that only ``make agent-clis`` installed is found all the same, by
    ``agents check``, the pre-flight and the run, and nothing else of those folders (OpenHands' venv
    has its own ``python`` and ``pip``) comes before or instead of the agent's own."""
    given = os.environ.get("PATH", "") if path is None else path
    if shutil.which(exe, path=given) is not None:
        return given
    home = next((str(d) for d in agent_cli_dirs(repo) if (d / exe).is_file()), None)
    return os.pathsep.join([p for p in (given, home) if p])
