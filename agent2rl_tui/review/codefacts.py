"""What the agent's code trains, and with what settings, read from the code itself (no LLM).

A run's diagnosis says for each submission how it was trained: SFT, GRPO, PPO, DPO, ..., a
copy of the base model, or unknown. The code a submission was made from (its revision in
snapshots.git) says so: the trainer classes it builds (TRL's ``GRPOTrainer``, transformers'
``Trainer``), the losses and loops it writes by hand (a clipped ratio is PPO, group-normalised
rewards are GRPO, log-probabilities times advantages a policy gradient), whether its rollouts
play the task's environment (online) or sample from a fixed set of prompts. Every finding
keeps its evidence: the file, the line and the line's text.

The key configuration (learning rate, epochs, steps, batch size, group size, KL weight, ...)
is read with ``ast``: keyword arguments of any call (``GRPOConfig(learning_rate=5e-4)``),
assignments (``LR = 1e-5``) and argparse defaults (``add_argument("--lr", default=3e-4)``),
a name or ``args.x`` followed to the constant or default it stands for; in YAML, JSON and
shell files, ``key: value`` and ``--key value`` lines. A flag on the command that ran the
script (``python code/grpo.py --lr 1e-4``) overrides the code's default.

Everything read is the agent's: files are capped (``MAX_FILE_BYTES``, ``MAX_FILES``), parsed
but never run, and quoted back only as capped single lines.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 200
LINE_CAP = 160
CODE_SUFFIXES = (".py", ".sh", ".yaml", ".yml", ".json", ".toml", ".cfg")
SKIPPED_FOLDERS = ("data/", "models/", "output/", "outputs/")
"""The workspace's inputs and the agent's checkpoints: never its training code."""

SFT, GRPO, PPO, DPO, COPY, UNKNOWN = "SFT", "GRPO", "PPO", "DPO", "copy_model", "unknown"
POLICY_GRADIENT = "policy gradient"

# (training type, pattern, what the line shows), tried in this order on every line of Python.
TYPE_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    (GRPO, re.compile(r"\bGRPO(Trainer|Config)\b"), "TRL's GRPO trainer"),
    (PPO, re.compile(r"\bPPO(Trainer|Config|v2Trainer)\b"), "TRL's PPO trainer"),
    ("RLOO", re.compile(r"\bRLOO(Trainer|Config)\b"), "TRL's RLOO trainer"),
    ("online DPO", re.compile(r"\bOnlineDPO(Trainer|Config)\b"), "TRL's online DPO trainer"),
    (DPO, re.compile(r"(?<!Online)\bDPO(Trainer|Config)\b"), "TRL's DPO trainer"),
    ("ORPO", re.compile(r"\bORPO(Trainer|Config)\b"), "TRL's ORPO trainer"),
    ("KTO", re.compile(r"\bKTO(Trainer|Config)\b"), "TRL's KTO trainer"),
    (SFT, re.compile(r"\bSFT(Trainer|Config)\b"), "TRL's SFT trainer"),
    (SFT, re.compile(r"\b(Seq2Seq)?Trainer\s*\("), "transformers' Trainer (language-model loss)"),
    (PPO, re.compile(r"\b(clamp|clip)\s*\([^)]*1\s*-\s*\w*(eps|clip)\w*", re.I), "a clipped probability ratio (PPO)"),
    (GRPO, re.compile(r"(reward|score)s?\w*\s*-\s*\w*(mean|\.mean\()\w*.*(std|\.std\()", re.I),
     "group-normalised rewards (GRPO)"),
    (POLICY_GRADIENT, re.compile(r"log_?probs?\w*\s*\*\s*\w*(advantage|reward|return)s?|"
                                 r"(advantage|reward|return)s?\w*\s*\*\s*\w*log_?probs?", re.I),
     "log-probabilities weighted by rewards (a policy gradient)"),
    (SFT, re.compile(r"\blabels\s*=\s*\w*(input_ids|labels)\b.*\)\s*\.\s*loss|\.loss\.backward\(\)"),
     "the language-model loss trained by hand"),
    (COPY, re.compile(r"\bcopytree\s*\(|\bcp\s+-[a-zA-Z]*r[a-zA-Z]*\s+\S*models/"), "a copy of a model folder"),
]
ONLINE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"TRAIN_ENV_URL"), "the run's train-environment service"),
    (re.compile(r"\brollout_func\b|\benvironment_factory\b"), "TRL rollouts through a function that plays"),
    (re.compile(r"^\s*(from\s+play\s+import|import\s+play\b)|\bdata/play\.py\b"), "the workspace's play kit"),
    (re.compile(r"\benv\w*\.step\s*\(|\b(reset|step)_game\s*\("), "steps of the environment"),
]
COPY_ONLY_TYPES = {COPY}

# Canonical key -> the names code uses for it (keyword arguments, variables, flags).
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "lr": ("learning_rate", "lr", "learningrate"),
    "epochs": ("num_train_epochs", "epochs", "num_epochs", "n_epochs"),
    "max_steps": ("max_steps", "steps", "num_steps", "total_steps", "train_steps"),
    "batch_size": ("per_device_train_batch_size", "batch_size", "train_batch_size", "bs"),
    "grad_accum": ("gradient_accumulation_steps", "grad_accum", "accumulation_steps"),
    "num_generations": ("num_generations", "generations", "group_size", "n_samples", "num_samples"),
    "beta": ("beta", "kl_coef", "init_kl_coef", "kl_beta", "kl_weight"),
    "max_completion_length": ("max_completion_length", "max_new_tokens", "max_completion"),
    "temperature": ("temperature",),
    "loss_type": ("loss_type",),
    "lora_r": ("lora_r", "lora_rank"),
    "lora_alpha": ("lora_alpha",),
    "warmup": ("warmup_ratio", "warmup_steps"),
    "lr_scheduler": ("lr_scheduler_type",),
    "max_length": ("max_length", "max_seq_length"),
}
NAME_TO_KEY = {name: key for key, names in CONFIG_KEYS.items() for name in names}
VALUE_CAP = 60
SCRIPT_RE = re.compile(r"(?:^|[\s/=])((?:[\w.-]+/)*[\w.-]+\.(?:py|sh))\b")


@dataclass(frozen=True)
class Evidence:
    """A line of the agent's code that shows a finding."""

    path: str
    line: int
    text: str

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Setting:
    """A configuration value and where it was found (``source``: code, default, command line, config)."""

    value: str
    path: str
    line: int
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"value": self.value, "path": self.path, "line": self.line, "source": self.source}


@dataclass
class CodeFacts:
    """What a set of files trains: its training types in order of appearance, each with its
    evidence, whether rollouts go through the environment, and the key configuration."""

    types: list[str] = field(default_factory=list)
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    online: list[Evidence] = field(default_factory=list)
    config: dict[str, Setting] = field(default_factory=dict)

    @property
    def train_type(self) -> str:
        """The submission's training type: the RL one where there is one (SFT before it is a
        warm-up), a copy only when nothing trains, else unknown."""
        trained = [t for t in self.types if t not in COPY_ONLY_TYPES]
        if not trained:
            return COPY if COPY in self.types else UNKNOWN
        for t in trained:
            if t not in (SFT,):
                return t
        return trained[0]

    def rolls_out(self, train_type: str) -> bool:
        """Whether an iteration of ``train_type`` trained on online rollouts (an RL type whose code plays)."""
        return bool(self.online) and train_type not in (SFT, COPY, UNKNOWN)

    def add(self, kind: str, ev: Evidence) -> None:
        if kind not in self.types:
            self.types.append(kind)
        found = self.evidence.setdefault(kind, [])
        if len(found) < 5:
            found.append(ev)


def one_line(text: str, cap: int = LINE_CAP) -> str:
    """A line of the agent's code for the record: stripped, capped, no control characters."""
    text = "".join(c if c.isprintable() else " " for c in text.strip())
    return text if len(text) <= cap else text[: cap - 1] + "…"


def is_code_path(path: str) -> bool:
    """Files that may hold training code or its configuration (not the data, models or outputs)."""
    p = path.lstrip("./")
    if any(p.startswith(folder) or f"/{folder}" in p for folder in SKIPPED_FOLDERS):
        return False
    if p in ("run_meta.json",) or PurePosixPath(p).name.startswith("."):
        return False
    return p.endswith(CODE_SUFFIXES)


def analyse(files: dict[str, str], commands: Iterable[str] = ()) -> CodeFacts:
    """Training types, online rollouts and key configuration of ``files`` (path -> text).

    ``commands``: the command lines that ran them, whose flags override the code's defaults."""
    facts = CodeFacts()
    for path in sorted(files):
        text = files[path]
        comment = "#" if path.endswith((".py", ".sh", ".yaml", ".yml", ".toml", ".cfg")) else None
        prose = string_lines(text) if path.endswith(".py") else set()
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0] if comment and path.endswith(".py") else line
            if number in prose or not code.strip() or (comment and code.lstrip().startswith(comment)):
                continue
            if path.endswith(".py"):
                for kind, pattern, _why in TYPE_PATTERNS:
                    if pattern.search(code):
                        facts.add(kind, Evidence(path, number, one_line(line)))
                        break
            elif path.endswith(".sh") and TYPE_PATTERNS[-1][1].search(code):
                facts.add(COPY, Evidence(path, number, one_line(line)))
            for pattern, _why in ONLINE_PATTERNS:
                if pattern.search(code) and len(facts.online) < 5:
                    facts.online.append(Evidence(path, number, one_line(line)))
                    break
        settings = python_settings(path, text) if path.endswith(".py") else text_settings(path, text)
        for key, setting in settings.items():
            facts.config.setdefault(key, setting)
    for key, setting in command_settings(commands).items():
        facts.config[key] = setting
    return facts


def string_lines(text: str) -> set[int]:
    """Lines of a Python file inside a multi-line string (docstrings): prose, not code."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def why(kind: str, text: str) -> str:
    """What a line of evidence shows, in words (for the report)."""
    for k, pattern, reason in TYPE_PATTERNS:
        if k == kind and pattern.search(text):
            return reason
    return kind


# -- configuration -----------------------------------------------------------------------------

def _value_text(node: ast.AST) -> str | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float, str)):
        return one_line(repr(value) if isinstance(value, str) else str(value), VALUE_CAP)
    return None


def _flag_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_").lower()


class _Settings(ast.NodeVisitor):
    """Assignments, argparse defaults and keyword arguments of one Python file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.constants: dict[str, tuple[str, int]] = {}  # NAME -> (value, line)
        self.defaults: dict[str, tuple[str, int]] = {}  # argparse dest -> (default, line)
        self.parameters: dict[str, tuple[str, int]] = {}  # a function parameter -> (default, line)
        self.keywords: list[tuple[str, ast.AST, int]] = []  # (name, value, line)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = _value_text(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and value is not None:
                self.constants.setdefault(target.id, (value, node.lineno))
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name) and node.value is not None:
            value = _value_text(node.value)
            if value is not None:
                self.constants.setdefault(node.target.id, (value, node.lineno))
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # def train(lr=3e-4): a parameter's default
        args = node.args
        for arg, default in zip(args.args[len(args.args) - len(args.defaults):], args.defaults):
            value = _value_text(default)
            if value is not None:
                self.parameters.setdefault(arg.arg.lower(), (value, node.lineno))
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
            value = _value_text(kw_default) if kw_default is not None else None
            if value is not None:
                self.parameters.setdefault(arg.arg.lower(), (value, node.lineno))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument" and node.args:
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = next((k.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)), None)
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            value = _value_text(default) if default is not None else None
            if value is not None:
                for name in ([str(dest)] if dest else []) + [_flag_name(f) for f in flags if f.startswith("-")]:
                    self.defaults.setdefault(name, (value, node.lineno))
        for kw in node.keywords:
            if kw.arg:
                self.keywords.append((kw.arg, kw.value, kw.value.lineno if hasattr(kw.value, "lineno") else node.lineno))
        self.generic_visit(node)

    def resolve(self, node: ast.AST) -> tuple[str, int, str] | None:
        """A value node as (value, line, source): a constant, or the constant or default a name stands for."""
        value = _value_text(node)
        if value is not None:
            return value, getattr(node, "lineno", 0), "code"
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is None:
            return None
        if isinstance(node, ast.Name) and name in self.constants:
            v, line = self.constants[name]
            return v, line, "code"
        for defaults in (self.defaults, self.parameters):  # what the command line passes in, before a parameter's own
            if name.lower() in defaults:
                v, line = defaults[name.lower()]
                return v, line, "default"
        return None


def python_settings(path: str, text: str) -> dict[str, Setting]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return text_settings(path, text)
    seen = _Settings(path)
    try:
        seen.visit(tree)
    except RecursionError:
        return {}
    found: dict[str, Setting] = {}
    for name, node, line in seen.keywords:  # a trainer's config says what ran
        key = NAME_TO_KEY.get(name.lower())
        if key and key not in found and (got := seen.resolve(node)) is not None:
            found[key] = Setting(got[0], path, got[1] or line, got[2])
    for name, (value, line) in seen.constants.items():
        key = NAME_TO_KEY.get(name.lower())
        if key and key not in found:
            found[key] = Setting(value, path, line, "code")
    for name, (value, line) in [*seen.defaults.items(), *seen.parameters.items()]:
        key = NAME_TO_KEY.get(name)
        if key and key not in found:
            found[key] = Setting(value, path, line, "default")
    return found


KEY_VALUE_RE = re.compile(r"""^\s*["']?([A-Za-z_][\w-]*)["']?\s*[:=]\s*["']?([^\s,"'#}]+)""")
FLAG_RE = re.compile(r"--([A-Za-z_][\w-]*)(?:=|\s+)([^\s\\;|&]+)")


def text_settings(path: str, text: str) -> dict[str, Setting]:
    """``key: value`` / ``key = value`` lines (YAML, JSON, TOML) and ``--key value`` flags (shell)."""
    found: dict[str, Setting] = {}
    for number, line in enumerate(text.splitlines(), 1):
        pairs = FLAG_RE.findall(line) if path.endswith(".sh") else [m.groups() for m in [KEY_VALUE_RE.match(line)] if m]
        for name, value in pairs:
            key = NAME_TO_KEY.get(_flag_name(name))
            if key and key not in found:
                found[key] = Setting(one_line(value, VALUE_CAP), path, number, "config")
    return found


def command_settings(commands: Iterable[str]) -> dict[str, Setting]:
    """Flags given on the command lines that ran the training (the last one wins)."""
    found: dict[str, Setting] = {}
    for command in commands:
        for name, value in FLAG_RE.findall(command):
            key = NAME_TO_KEY.get(_flag_name(name))
            if key:
                found[key] = Setting(one_line(value, VALUE_CAP), "command line", 0, "command line")
    return found


INTERPRETER_RE = re.compile(r"^(?:python[\d.]*|pypy[\d.]*|bash|sh|dash|zsh|torchrun|deepspeed|accelerate)$")
SHELLS = {"bash", "sh", "dash", "zsh"}
WRAPPERS = {"env", "nohup", "nice", "stdbuf", "time", "timeout", "uv", "launch", "run"}
"""Programs that run the command after them (``accelerate launch``, ``uv run``: their second word too)."""


def scripts_executed(cmdline: str) -> list[str]:
    """The script a sampled process runs (its command line as /proc gives it): the program when that
    is a script, else an interpreter's script argument (``python -u code/sft.py``, ``torchrun
    --nproc_per_node 2 train.py``, ``accelerate launch x.py``). Unlike ``scripts_in``, a script a
    command line only names is not run by it: ``bash -c 'printf .. > code/grpo.py'`` runs an inline
    script (its children are sampled themselves), and ``python -c`` or ``-m`` runs no file."""
    try:
        words = shlex.split(cmdline, posix=True)
    except ValueError:
        words = cmdline.split()
    while words:
        name = PurePosixPath(words[0]).name
        if SCRIPT_RE.search(" " + words[0]):
            return [SCRIPT_RE.search(" " + words[0]).group(1)]  # type: ignore[union-attr]
        if name in WRAPPERS:
            words = [w for w in words[1:] if "=" not in w or w.startswith("-")]
            while words and (words[0].startswith("-") or words[0].replace(".", "").isdigit()):
                words = words[1:]
            continue
        if not INTERPRETER_RE.match(name):
            return []
        for i, word in enumerate(words[1:], start=1):
            if word in ("-c", "-m") or (name in SHELLS and word.startswith("-") and "c" in word[1:]):
                return []  # inline code or a module: no file of ours is the program
            if word.startswith("-"):
                continue
            m = SCRIPT_RE.search(" " + word)
            if m and words[i - 1] not in (">", ">>", "<"):
                return [m.group(1)]
            if name in ("accelerate", "deepspeed", "torchrun") and not m:
                continue  # launch, an option's value
            return []
        return []
    return []


def scripts_in(command: str) -> list[str]:
    """The .py/.sh files a command line runs (``python -u code/sft.py --x``: ``code/sft.py``)."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    out = []
    for word in words:
        m = SCRIPT_RE.search(" " + word)
        if m and not word.startswith("-"):
            out.append(m.group(1))
    return out
