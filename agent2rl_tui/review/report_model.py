"""report.json as one typed tree: ``Report`` and its parts, the way inspect_ai's EvalLog is one.

Why it exists: report.json is read by report.md, report.html, the CLI (``run start``'s result,
``run show --json``), the supervisor's result line, the TUI's Report pane and the trajectory
chart. As a dict read by string keys, a renamed key broke a reader silently and an older or
damaged file broke it loudly. Here every part is a dataclass (``typed_json.Node``): the
builders (``review.report``) make a ``Report``, every reader reads its attributes, and a file
on disk is read through ``Report.from_json``.

Both ways, exactly: ``Report.to_json()`` is the dict report.json has always held (the same keys
in the same order, the same values), so a run's report.json keeps its bytes.
``Report.from_json`` reads any report.json an earlier version wrote and never raises: a missing
key reads as None (or an empty part), a value of the wrong type as None (or a list's readable
items), and what it could not read or does not know is kept and written back as found, so
``Report.from_json(d).to_json() == d``.

Parts reuse the typed classes that exist: ``RunUsage`` (usage), ``ContaminationResult``,
``Narrative``, ``Iteration`` (with ``Evidence``, ``Setting``, ``Signal``), ``Comparison`` (the
paired significance), ``SessionFiles``, ``StrictReading`` and ``Judgement``.

Versions: report.json has no version key: a file without one is version 1, every report.json
written so far. ``Report.REPORT_VERSION`` is the version this code writes (1). The key is
written only for a version above 1, so that today's report.json keeps its bytes; a later change
of a key's meaning raises the version and writes ``version``, which ``from_json`` reads into
``Report.version``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from agent2rl_tui.record.contamination import ContaminationResult
from agent2rl_tui.record.sessions import SessionFiles
from agent2rl_tui.record.summary_parts import Judgement, StrictReading, as_json
from agent2rl_tui.review.adherence import ModeCheck
from agent2rl_tui.review.codefacts import UNKNOWN, Evidence, Setting
from agent2rl_tui.review.iterations import Changes, Iteration
from agent2rl_tui.review.logscan import Signal
from agent2rl_tui.review.narrative import Narrative
from agent2rl_tui.review.run_usage import LABELS, RunUsage
from agent2rl_tui.review.significance import Comparison
from agent2rl_tui.review.typed_json import (
    BOOL,
    INT,
    LIST,
    NUM,
    TABLE,
    TEXT,
    Codec,
    Node,
    Unreadable,
    an_object,
    foreign,
    foreign_list,
    items_of,
    key,
    need,
    opt,
    part,
    parts,
    scalar,
)

REPORT_VERSION = 1
"""The version of report.json this code writes (a file without a ``version`` key is version 1)."""
OPTIONAL_KEYS = ("redactions", "graded_after", "mode_check", "eval_limit", "eval_seed")
"""Keys added since version 1 that change no other key's meaning: a report made in code writes
each only when it has a value, so a run without it keeps version 1's bytes."""
_TEXT_ITEM = scalar(str, nullable=False)
_NUM_ITEM = scalar(int, float, nullable=False)


# -- readers of the reused classes (each raises on a damaged value; the codec keeps it as found) ----

def comparison_from_json(raw: Any) -> Comparison:
    """A paired comparison as report.json holds it (``Comparison.as_json``)."""
    d = an_object(raw)
    ci = d.get("ci95")
    if not isinstance(ci, list) or len(ci) != 2:
        raise Unreadable()
    return Comparison(n=need(d, "n", INT), diff=need(d, "diff", NUM), low=_NUM_ITEM.read(ci[0]),
                      high=_NUM_ITEM.read(ci[1]), label=need(d, "label", TEXT), p_value=opt(d, "p_value", NUM),
                      gained=opt(d, "gained", INT), lost=opt(d, "lost", INT))


def as_written(c: Comparison | None) -> Comparison | None:
    """``c`` as report.json holds it (rounded), so a built report reads the same as one read back."""
    return None if c is None else comparison_from_json(c.as_json())


def judgement_from_json(raw: Any) -> Judgement:
    """A judge-graded score's facts (``Judgement.to_json``); a value of the wrong type reads as None."""
    d = an_object(raw)
    texts = ("metric", "lc_unavailable", "judge_model", "judge_mode")
    values = {name: _or_none(d.get(name), TEXT if name in texts else NUM)
              for name in Judgement.__dataclass_fields__}
    return Judgement(**values)


def _or_none(value: Any, codec: Codec) -> Any:
    try:
        return codec.read(value)
    except Unreadable:
        return None


def strict_from_json(raw: Any) -> StrictReading:
    return StrictReading.from_json(an_object(raw)) or StrictReading()


_USAGE_COUNTS = ("tokens_in", "tokens_out", "refused", "incomplete", "failed", "unpriced_calls", "no_usage")


def usage_from_json(raw: Any) -> RunUsage:
    """A run's tokens and cost (``RunUsage.as_json``), every field of its type."""
    d = an_object(raw)
    if d.get("source") not in LABELS:
        raise Unreadable()
    for name in _USAGE_COUNTS:
        if name in d:
            need(d, name, INT)
    for name, codec in (("cached_tokens", INT), ("calls", INT), ("cost_usd", NUM), ("meter", TABLE)):
        codec.read(d.get(name))
    items_of(d.get("unpriced_models"), _TEXT_ITEM.read)
    return RunUsage.from_json(d)


def sessions_from_json(raw: Any) -> SessionFiles:
    d = an_object(raw)
    return SessionFiles(folders=tuple(items_of(d.get("folders"), _TEXT_ITEM.read)), files=opt(d, "files", INT, 0),
                        bytes=opt(d, "bytes", INT, 0), capped=opt(d, "capped", BOOL, False))


def narrative_from_json(raw: Any) -> Narrative:
    return Narrative.from_json(an_object(raw))


def narrative_json(narrative: Narrative) -> dict[str, Any]:
    """The narrative as report.json holds it: without its cache of answers."""
    data = narrative.as_json()
    data.pop("cache", None)
    return data


def contamination_from_json(raw: Any) -> ContaminationResult:
    return ContaminationResult.from_dict(raw)


def contamination_found(raw: Any) -> ContaminationResult | str | None:
    """report.json's ``contamination``: the result, why it cannot be read (text), or None (no check ran)."""
    if raw is None or isinstance(raw, ContaminationResult):
        return raw
    try:
        return ContaminationResult.from_dict(raw)
    except ValueError as exc:
        return str(exc)


def _evidence(raw: Any) -> Evidence:
    d = an_object(raw)
    return Evidence(path=need(d, "path", TEXT), line=need(d, "line", INT), text=need(d, "text", TEXT))


def _setting(raw: Any) -> Setting:
    d = an_object(raw)
    return Setting(value=need(d, "value", TEXT), path=need(d, "path", TEXT), line=need(d, "line", INT),
                   source=need(d, "source", TEXT))


def _signal(raw: Any) -> Signal:
    d = an_object(raw)
    return Signal(at=need(d, "at", NUM), kind=need(d, "kind", TEXT), text=need(d, "text", TEXT))


def _changes(raw: Any) -> Changes:
    if raw is None:
        return Changes()
    d = an_object(raw)
    return Changes(files=items_of(d.get("files"), an_object), summary=opt(d, "summary", TEXT, "no change"))


def _table_of(raw: Any, read: Callable[[Any], Any]) -> dict[str, Any]:
    return {k: read(v) for k, v in (TABLE.read(raw) or {}).items()}


def iteration_from_json(raw: Any) -> Iteration:
    """One iteration as report.json holds it (``Iteration.as_json``); missing keys take defaults."""
    d = an_object(raw)
    return Iteration(
        iteration=need(d, "iteration", INT), timestamp=opt(d, "timestamp", TEXT),
        duration_s=opt(d, "duration_s", NUM, 0.0), status=opt(d, "status", TEXT, "?"),
        exit_code=opt(d, "exit_code", INT), score=opt(d, "score", NUM), improvement=opt(d, "improvement", NUM),
        train_type=opt(d, "train_type", TEXT, UNKNOWN), failure_type=opt(d, "failure_type", TEXT),
        submission_id=opt(d, "submission_id", INT), submission_status=opt(d, "submission_status", TEXT),
        elapsed_s=opt(d, "elapsed_s", NUM), best=opt(d, "best", TABLE), revision=opt(d, "revision", INT),
        online=opt(d, "online", BOOL, False), train_evidence=items_of(d.get("train_evidence"), _evidence),
        online_evidence=items_of(d.get("online_evidence"), _evidence),
        key_config=_table_of(d.get("key_config"), _setting), changes=_changes(d.get("changes")),
        key_code=items_of(d.get("key_code"), _evidence), commands=items_of(d.get("commands"), _TEXT_ITEM.read),
        time=_table_of(d.get("time"), _NUM_ITEM.read), problems=items_of(d.get("problems"), _TEXT_ITEM.read),
        failure_evidence=items_of(d.get("failure_evidence"), _signal), significance=opt(d, "significance", TEXT),
        agent_summary=opt(d, "agent_summary", TEXT), observed=opt(d, "observed", BOOL),
        seen_running=items_of(d.get("seen_running"), _TEXT_ITEM.read))


COMPARISON = foreign(comparison_from_json, Comparison.as_json)
STRICT = foreign(strict_from_json, as_json)
JUDGED = foreign(judgement_from_json, as_json)


# -- the parts ---------------------------------------------------------------------------------

@dataclass(kw_only=True)
class Baseline(Node):
    """The baseline (submission 0): its score where it was scored, how, and why not."""

    score: float | None = key(NUM)
    status: str | None = key(TEXT)
    error: str | None = key(TEXT)
    eval_seconds: float | None = key(NUM)
    weights_hash: str | None = key(TEXT)
    strict: StrictReading | None = key(STRICT)
    judged: Judgement | None = key(JUDGED)


@dataclass(kw_only=True)
class Resolution(Node):
    """What the eval can tell apart: ``points`` a paired comparison detects on its ``n`` items."""

    n: int | None = key(INT)
    points: float | None = key(NUM)


@dataclass(kw_only=True)
class Best(Node):
    submission_id: int | None = key(INT)
    score: float | None = key(NUM)


@dataclass(kw_only=True)
class Paired(Node):
    """A scored submission against the baseline and the best before it, item by item."""

    vs_baseline: Comparison | None = key(COMPARISON)
    vs_previous_best: Comparison | None = key(COMPARISON)
    previous_best: int | None = key(INT)


@dataclass(kw_only=True)
class SubmissionEntry(Node):
    """One agent submission: its result, where it came from, and its paired significance."""

    submission_id: int | None = key(INT)
    status: str | None = key(TEXT)
    score: float | None = key(NUM)
    improvement: float | None = key(NUM)
    received_at: str | None = key(TEXT)
    elapsed_s: float | None = key(NUM)
    eval_seconds: float | None = key(NUM)
    model_path: str | None = key(TEXT)
    weights_hash: str | None = key(TEXT)
    is_base_copy: bool | None = key(BOOL)
    revision: int | None = key(INT)
    error: str | None = key(TEXT)
    strict: StrictReading | None = key(STRICT)
    judged: Judgement | None = key(JUDGED)
    significance: Paired | None = key(part(Paired))


@dataclass(kw_only=True)
class Metrics(Node):
    """AutoRL-Bench's process metrics (``review.report``'s docstring defines each)."""

    n_submissions: int | None = key(INT)
    n_valid: int | None = key(INT)
    valid_submission_rate: float | None = key(NUM)
    first_valid_idx: int | None = key(INT)
    first_valid_delay: float | None = key(NUM)
    time_to_first_improvement: float | None = key(NUM)
    time_to_best: float | None = key(NUM)
    monotonic_ratio: float | None = key(NUM)
    time_used_ratio: float | None = key(NUM)
    last_submit_gap: float | None = key(NUM)
    base_copy_count: int | None = key(INT)
    eval_seconds_total: float | None = key(NUM)

    def rows(self) -> list[tuple[str, Any]]:
        """(name, value) of each metric, in report.json's order (a damaged value as found)."""
        return list(self.to_json().items())


@dataclass(kw_only=True)
class RevisionsSummary(Node):
    """How many code revisions, how much changed, and what the capture rules left out."""

    count: int | None = key(INT)
    lines_added: int | None = key(INT)
    lines_removed: int | None = key(INT)
    capture_rules: list[Any] = key(LIST, factory=list)
    left_out_at_end: dict[str, Any] = key(TABLE, factory=dict)


@dataclass(kw_only=True)
class TranscriptTotals(Node):
    """The transcript's own totals (``transcripts.transcript_totals``): the agent's count, per step."""

    steps: int | None = key(INT)
    tokens_in: int | None = key(INT)
    tokens_out: int | None = key(INT)
    cost_usd: float | None = key(NUM)
    by_kind: dict[str, Any] = key(TABLE, factory=dict)


@dataclass(kw_only=True)
class GpuPeak(Node):
    util_pct_max: float | None = key(NUM)
    mem_used_max: int | None = key(INT)
    mem_total: int | None = key(INT)


def _gpus_read(value: Any) -> str | dict[Any, GpuPeak] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict) or not all(isinstance(g, dict) for g in value.values()):
        raise Unreadable()
    return {i: GpuPeak.from_json(g) for i, g in value.items()}


def _gpus_write(value: str | dict[Any, GpuPeak] | None) -> Any:
    return value if not isinstance(value, dict) else {i: g.to_json() for i, g in value.items()}


@dataclass(kw_only=True)
class Vitals(Node):
    """Peaks and means of the vitals samples (``samples.summarize_samples``); ``gpus``: each GPU's
    peaks, or why there are none (text)."""

    samples: int | None = key(INT)
    cpu_pct_mean: float | None = key(NUM)
    cpu_pct_max: float | None = key(NUM)
    mem_used_max: int | None = key(INT)
    mem_total: int | None = key(INT)
    disk_free_min: int | None = key(INT)
    agent_rss_max: int | None = key(INT)
    agent_procs_max: int | None = key(INT)
    gpus: str | dict[Any, GpuPeak] | None = key(Codec(_gpus_read, _gpus_write))


@dataclass(kw_only=True)
class WarningEvent(Node):
    """An event a reader of the report should see."""

    at: str | None = key(TEXT)
    source: str | None = key(TEXT)
    kind: str | None = key(TEXT)
    message: str | None = key(TEXT)


@dataclass(kw_only=True)
class Containment(Node):
    """How the agent was contained (the supervisor's ``containment`` event: other keys in ``rest``)."""

    contained: bool | None = key(BOOL)
    reason: str | None = key(TEXT)


@dataclass(kw_only=True)
class Redactions(Node):
    """How the run's secrets were kept out of its record (the supervisor's ``redactions`` event):
    how many were known, and how many times one was replaced as the record was written, in files
    swept at the end, and in run.db's values."""

    secrets: int | None = key(INT)
    total: int | None = key(INT)
    while_written: int | None = key(INT)
    in_files: int | None = key(INT)
    files_changed: int | None = key(INT)
    run_db_values: int | None = key(INT)

    def line(self) -> str:
        """One line for a reader: what was replaced where (numbers and our words only)."""
        if not self.total:
            return f"none of the run's {self.secrets or 0} secret(s) was found in its record"
        return (f"{self.total:,} replaced: {self.while_written or 0:,} as the record was written, "
                f"{self.in_files or 0:,} in {self.files_changed or 0:,} file(s) swept at the end, "
                f"{self.run_db_values or 0:,} value(s) in run.db ({self.secrets or 0} secret(s) known)")


@dataclass(kw_only=True)
class Report(Node):
    """report.json: the run, its result, each submission, the iterations, the process metrics,
    the record's totals, containment, contamination and warnings."""

    REPORT_VERSION: ClassVar[int] = REPORT_VERSION

    version: int = REPORT_VERSION
    """The file's version (1 for a file without the key); not a key of version 1."""
    run_id: str | None = key(TEXT)
    task: str | None = key(TEXT)
    agent: str | None = key(TEXT)
    driver: str | None = key(TEXT)
    base_model: str | None = key(TEXT)
    prompt_profile: str | None = key(TEXT)
    decoding_row: str | None = key(TEXT)
    eval_limit: int | None = key(INT)
    """``--eval-limit``: the first N eval items only (None: all of them)."""
    eval_seed: int | None = key(INT)
    """The seed of the run's eval draw (which items); None for a run made before eval seeds."""
    status: str | None = key(TEXT)
    end_reason: str | None = key(TEXT)
    agent_exit_code: int | None = key(INT)
    error: str | None = key(TEXT)
    budget_s: float | None = key(NUM)
    budget_start: str | None = key(TEXT)
    deadline: str | None = key(TEXT)
    agent_ended_at: str | None = key(TEXT)
    ended_at: str | None = key(TEXT)
    baseline: Baseline = key(part(Baseline, optional=False), factory=Baseline)
    resolution: Resolution | None = key(part(Resolution))
    best: Best | None = key(part(Best))
    improvement: float | None = key(NUM)
    submissions: list[SubmissionEntry] = key(parts(SubmissionEntry), factory=list)
    graded_after: list[SubmissionEntry] = key(parts(SubmissionEntry), factory=list)
    """Checkpoints a person graded after the run ended (``run grade``): outside its budget, never its best."""
    route: str | None = key(TEXT)
    mode_check: ModeCheck | None = key(foreign(ModeCheck.from_json, ModeCheck.as_json))
    """A run in a training mode: whether the training seen running kept to it (``review.adherence``)."""
    iterations: list[Iteration] = key(foreign_list(iteration_from_json, Iteration.as_json), factory=list)
    diagnosis_error: str | None = key(TEXT)
    narrative: Narrative | None = key(foreign(narrative_from_json, narrative_json))
    metrics: Metrics = key(part(Metrics, optional=False), factory=Metrics)
    revisions: RevisionsSummary = key(part(RevisionsSummary, optional=False), factory=RevisionsSummary)
    transcript: TranscriptTotals = key(part(TranscriptTotals, optional=False), factory=TranscriptTotals)
    agent_sessions: SessionFiles | None = key(foreign(sessions_from_json, SessionFiles.as_json))
    usage: RunUsage | None = key(foreign(usage_from_json, RunUsage.as_json))
    vitals: Vitals = key(part(Vitals, optional=False), factory=Vitals)
    warnings: list[WarningEvent] = key(parts(WarningEvent), factory=list)
    containment: Containment = key(part(Containment, optional=False), factory=Containment)
    redactions: Redactions | None = key(part(Redactions))
    contamination: ContaminationResult | None = key(foreign(contamination_from_json, ContaminationResult.to_dict))
    generated_at: str | None = key(TEXT)

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """Any report.json, as found (see the module's docstring); never raises."""
        report = super().from_json(data)
        version = data.get("version") if isinstance(data, dict) else None
        report.version = version if isinstance(version, int) and not isinstance(version, bool) and version > 1 else 1
        return report

    def to_json(self) -> dict[str, Any]:
        """report.json's object: as read, or (made in code) today's keys in today's order."""
        out = super().to_json()
        for name in OPTIONAL_KEYS:  # added since version 1 without changing a key: written only when known
            if self.order is None and getattr(self, name) in (None, []):
                out.pop(name, None)
        if self.version > 1 and "version" not in out:
            out = {"version": self.version, **out}
        return out

    @property
    def contamination_found(self) -> ContaminationResult | str | None:
        """The contamination check's result; why it cannot be read (text) where report.json holds
        a damaged one; None where no check ran."""
        if self.contamination is not None:
            return self.contamination
        return contamination_found(self.rest.get("contamination"))


__all__ = ["REPORT_VERSION", "Baseline", "Best", "Containment", "GpuPeak", "Metrics", "Paired", "Redactions", "Report",
           "Resolution", "RevisionsSummary", "SubmissionEntry", "TranscriptTotals", "Vitals", "WarningEvent", "as_written",
           "comparison_from_json", "contamination_found", "iteration_from_json", "judgement_from_json",
           "narrative_json", "usage_from_json"]
