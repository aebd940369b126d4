"""The run report: result (baseline, best, improvement) and AutoRL-Bench's process metrics.

Metrics follow AutoRL-Bench (RD-Agent ``autorl_bench/core/metrics.py``) with two
deliberate differences, both because this record knows more than its scores.json did:
a submission is *valid* when its evaluation completed (status ``scored``), so an honest
score of 0 is valid and a failed load is not; and copies of the base model are found by
the hash of their weights, not by their path. Times are seconds from the budget's start
(the agent's launch; the baseline is scored before it).

- ``valid_submission_rate``: valid / all agent submissions (rejected and failed included).
- ``first_valid_idx``: 1-based position of the first valid submission.
- ``first_valid_delay``: time of the first valid submission.
- ``time_to_first_improvement``: time of the first valid submission scoring above baseline.
- ``time_to_best``: time of the best submission (the earliest of equal bests).
- ``monotonic_ratio``: strict increases between consecutive valid scores / (valid - 1).
- ``time_used_ratio``: (agent end - budget start) / budget, the agent's end capped at the
  deadline (TERM, the grace period and KILL come after it and are not the agent's time).
- ``last_submit_gap``: agent end (capped the same way) - last submission.

The report is a ``report_model.Report`` (one typed tree; report.json is its ``to_json()``, the
same keys, order and values as ever), made by small builders here: ``compute_metrics``,
``baseline_part``, ``paired_significance``, ``submission_entry``, ``diagnose``, ``build_report``.
report.md is rendered from its attributes (``render_markdown``).

report.md quotes text the agent made (model paths, errors that quote them, file names in
warnings and contamination hits): every such field goes in through ``util.inert.md_escape``
or ``md_code``, so it reads as one literal line and can never add a heading, a table row,
a score or a link of its own. report.json keeps the record's text as it is (JSON escapes it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.record.capture import DEFAULT_RULES
from agent2rl_tui.record.contamination import ContaminationResult, read_contamination
from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.sessions import SessionFiles, session_files
from agent2rl_tui.record.store import (
    AFTER_KIND,
    RunStore,
    Submission,
    SubStatus,
    best_of,
    decoding_row_of,
    judgement_of,
    prompt_profile_of,
    scored_score,
    strict_of,
)
from agent2rl_tui.record.transcripts import transcript_totals
from agent2rl_tui.review.adherence import check_mode
from agent2rl_tui.review.codefacts import Evidence, Setting
from agent2rl_tui.review.eval_label import eval_label
from agent2rl_tui.review.items import significance
from agent2rl_tui.review.iterations import TIME_KINDS, Iteration, build_iterations
from agent2rl_tui.review.narrative import narrative_lines, read_narrative
from agent2rl_tui.review.plots import write_trajectory
from agent2rl_tui.review.report_model import (
    Baseline,
    Best,
    Containment,
    Metrics,
    Paired,
    Redactions,
    Report,
    Resolution,
    RevisionsSummary,
    SubmissionEntry,
    TranscriptTotals,
    Vitals,
    WarningEvent,
    as_written,
    contamination_found,
    iteration_from_json,
)
from agent2rl_tui.review.run_usage import RunUsage, run_usage, usage_line, usage_notes
from agent2rl_tui.review.runview import read_rows
from agent2rl_tui.review.samples import summarize_samples
from agent2rl_tui.review.significance import Comparison, p_text, resolution
from agent2rl_tui.review.typed_json import READ_ERRORS
from agent2rl_tui.util.inert import md_block, md_code, md_escape
from agent2rl_tui.util.timeutil import human_duration, iso, now

# -- the builders ------------------------------------------------------------------------------


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def compute_metrics(run: RunRecord, subs: list[Submission], baseline: Submission | None) -> Metrics:
    start = run.budget_start
    agent_end = run.agent_ended_at or run.ended_at
    if agent_end is not None and run.deadline is not None:
        agent_end = min(agent_end, run.deadline)
    base_score = scored_score(baseline)

    def since_start(t: float | None) -> float | None:
        return None if t is None or start is None else round(t - start, 3)

    valid = [s for s in subs if s.status == SubStatus.SCORED]
    first_valid = valid[0] if valid else None
    first_improving = next(
        (s for s in valid if base_score is not None and s.score is not None and s.score > base_score), None
    )
    best = best_of(valid)
    scores = [s.score for s in valid if s.score is not None]
    increases = sum(1 for a, b in zip(scores, scores[1:]) if b > a)
    last_submit = max((s.received_at for s in subs), default=None)
    base_hash = baseline.weights_hash if baseline else None
    return Metrics(
        n_submissions=len(subs),
        n_valid=len(valid),
        valid_submission_rate=_ratio(len(valid), len(subs)),
        first_valid_idx=subs.index(first_valid) + 1 if first_valid else None,
        first_valid_delay=since_start(first_valid.received_at) if first_valid else None,
        time_to_first_improvement=since_start(first_improving.received_at) if first_improving else None,
        time_to_best=since_start(best.received_at) if best else None,
        monotonic_ratio=_ratio(increases, len(scores) - 1) if len(scores) >= 2 else None,
        time_used_ratio=round((agent_end - start) / run.budget_s, 4) if agent_end and start else None,
        last_submit_gap=round(agent_end - last_submit, 3) if agent_end and last_submit else None,
        base_copy_count=sum(1 for s in valid if base_hash and s.weights_hash == base_hash),
        eval_seconds_total=round(sum(s.eval_seconds or 0.0 for s in subs + ([baseline] if baseline else [])), 3),
    )


def revisions_summary(revisions: list[dict[str, Any]]) -> RevisionsSummary:
    """How many revisions, how much changed, and what the capture rules left out (last snapshot)."""
    last_ignored = json.loads(revisions[-1]["ignored_json"]) if revisions else {}
    return RevisionsSummary(count=len(revisions), lines_added=sum(r["added"] for r in revisions),
                            lines_removed=sum(r["removed"] for r in revisions),
                            capture_rules=DEFAULT_RULES.describe(), left_out_at_end=last_ignored)


WARNING_KINDS = {
    "snapshot_failed", "recovered", "stale_lock", "watch_failed", "agent_killed", "strays_killed",
    "workers_killed", "grader_restarted", "grader_died", "report_failed", "meter_died", "overlap",
}
"""Events a reader of the report should see (with every event the vitals sampler raises)."""


NO_CONTAINMENT_RECORD = ("no containment recorded: the agent never started, or the run was made by a "
                         "version of agent2rl-tui without containment")


def containment_of(store: RunStore) -> Containment:
    """How the agent was contained (the supervisor's ``containment`` event, its keys as recorded), or why not."""
    return Containment.from_json(store.last_event_data("containment")
                                 or {"contained": False, "reason": NO_CONTAINMENT_RECORD})


def redactions_of(store: RunStore) -> Redactions | None:
    """What the supervisor's sweep replaced (``redactions`` event), None for a run without one."""
    data = store.last_event_data("redactions")
    return Redactions.from_json(data) if data else None


def warning_events(store: RunStore) -> list[WarningEvent]:
    return [
        WarningEvent(at=iso(e["at"]), source=e["source"], kind=e["kind"], message=e["message"])
        for e in store.events() if e["source"] == "vitals" or e["kind"] in WARNING_KINDS
    ]


@dataclass
class RecordFacts:
    """What the report reads from run.db, in one open."""

    run: RunRecord
    baseline: Submission | None
    subs: list[Submission]
    revisions: list[dict[str, Any]]
    transcript: dict[str, Any]
    usage: RunUsage
    warnings: list[WarningEvent]
    containment: Containment
    sessions: SessionFiles | None
    redactions: Redactions | None
    after: list[Submission]


def read_facts(run_dir: Path) -> RecordFacts:
    with RunStore.of_run(run_dir) as store:
        return RecordFacts(run=store.run(), baseline=store.baseline(), subs=store.submissions(kind="agent"),
                           after=store.submissions(kind=AFTER_KIND),
                           revisions=store.revision_rows(), transcript=transcript_totals(store), usage=run_usage(store),
                           warnings=warning_events(store), containment=containment_of(store),
                           sessions=session_files(run_dir, store), redactions=redactions_of(store))


def baseline_part(baseline: Submission | None) -> Baseline:
    if baseline is None:
        return Baseline()
    return Baseline(score=scored_score(baseline), status=baseline.status, error=baseline.error,
                    eval_seconds=baseline.eval_seconds, weights_hash=baseline.weights_hash,
                    strict=strict_of(baseline), judged=judgement_of(baseline))


def resolution_of(baseline: Submission | None) -> Resolution | None:
    """What the run's eval can tell apart (``significance.resolution``), from the baseline's item count."""
    if baseline is None or not baseline.n_items:
        return None
    return Resolution(n=baseline.n_items, points=round(resolution(baseline.n_items), 2))


class ItemCache:
    """Each evaluation's per-item results, read once."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.read: dict[int, list[ItemRow]] = {}

    def __call__(self, sub_id: int) -> list[ItemRow]:
        if sub_id not in self.read:
            self.read[sub_id] = read_rows(self.run_dir, sub_id)
        return self.read[sub_id]


def paired_significance(run_dir: Path, subs: list[Submission], baseline: Submission | None) -> dict[int, Paired]:
    """Each scored submission against the baseline and the best before it, item by item."""
    items = ItemCache(run_dir)
    base_items = items(baseline.id) if baseline is not None and scored_score(baseline) is not None else []
    out: dict[int, Paired] = {}
    leader: Submission | None = None
    for s in subs:
        prior = leader
        if s.score is None or s.status != SubStatus.SCORED:
            continue
        if leader is None or s.score > (leader.score or 0):
            leader = s
        vs_base = significance(items(s.id), base_items) if base_items else None
        vs_best = significance(items(s.id), items(prior.id)) if prior is not None else None
        out[s.id] = Paired(vs_baseline=as_written(vs_base), vs_previous_best=as_written(vs_best),
                           previous_best=prior.id if prior is not None else None)
    return out


def submission_entry(s: Submission, start: float | None, baseline: Submission | None,
                     paired: Paired | None) -> SubmissionEntry:
    """One agent submission as the report holds it (``start``: the budget's start)."""
    base_score = scored_score(baseline)
    base_hash = baseline.weights_hash if baseline else None
    return SubmissionEntry(
        submission_id=s.id, status=s.status, score=s.score,
        improvement=(s.score - base_score) if s.score is not None and base_score is not None else None,
        received_at=iso(s.received_at), elapsed_s=round(s.received_at - start, 3) if start else None,
        eval_seconds=round(s.eval_seconds, 3) if s.eval_seconds is not None else None,
        model_path=s.model_path, weights_hash=s.weights_hash,
        is_base_copy=bool(base_hash and s.weights_hash == base_hash), revision=s.revision_seq, error=s.error,
        strict=strict_of(s), judged=judgement_of(s), significance=paired)


def _as_read_back(it: Iteration) -> Iteration:
    """``it`` as report.json holds it (times rounded), so a built report renders as one read back."""
    try:
        return iteration_from_json(it.as_json())
    except READ_ERRORS:
        return it


def diagnose(run_dir: Path, entries: list[SubmissionEntry]) -> tuple[str | None, list[Iteration], str | None]:
    """The route, the iterations, and why there are none where the diagnosis failed (it never costs the report)."""
    labels = {e.submission_id: e.significance.vs_baseline.label for e in entries
              if e.submission_id is not None and e.significance and e.significance.vs_baseline}
    try:
        diagnosis = build_iterations(run_dir, labels)
    except Exception as exc:  # noqa: BLE001 - the diagnosis never costs the report
        return None, [], f"{type(exc).__name__}: {exc}"
    return diagnosis.route, [_as_read_back(it) for it in diagnosis.iterations], None


def build_report(run_dir: Path) -> Report:
    """The run's report, from the record as it stands (a live run's too)."""
    run_dir = Path(run_dir)
    facts = read_facts(run_dir)
    run, baseline, subs = facts.run, facts.baseline, facts.subs
    base_score, best = scored_score(baseline), best_of(subs)
    paired = paired_significance(run_dir, subs, baseline)
    entries = [submission_entry(s, run.budget_start, baseline, paired.get(s.id)) for s in subs]
    route, iterations, diagnosis_error = diagnose(run_dir, entries)
    mode_check = check_mode(run.config.mode, iterations) if diagnosis_error is None else None
    return Report(
        run_id=run.id, task=run.task, agent=run.agent, driver=run.driver, base_model=run.base_model,
        prompt_profile=prompt_profile_of(run.config, baseline, *subs),
        decoding_row=decoding_row_of(run.config, baseline, *subs), eval_limit=run.config.eval_limit,
        eval_seed=run.config.eval_seed, status=run.status, end_reason=run.end_reason,
        agent_exit_code=run.agent_exit_code, error=run.error, budget_s=run.budget_s, budget_start=iso(run.budget_start),
        deadline=iso(run.deadline), agent_ended_at=iso(run.agent_ended_at), ended_at=iso(run.ended_at),
        baseline=baseline_part(baseline), resolution=resolution_of(baseline),
        best=Best(submission_id=best.id, score=best.score) if best else None,
        improvement=(best.score - base_score) if best and best.score is not None and base_score is not None else None,
        submissions=entries, route=route, mode_check=mode_check, iterations=iterations,
        diagnosis_error=diagnosis_error,
        graded_after=[submission_entry(s, run.budget_start, baseline, None) for s in facts.after],
        narrative=read_narrative(run_dir), metrics=compute_metrics(run, subs, baseline),
        revisions=revisions_summary(facts.revisions), transcript=TranscriptTotals.from_json(facts.transcript),
        agent_sessions=facts.sessions, usage=facts.usage, vitals=Vitals.from_json(summarize_samples(run_dir)),
        warnings=facts.warnings, containment=facts.containment, redactions=facts.redactions,
        contamination=read_contamination(run_dir),
        generated_at=iso(now()),
    )


# -- report.md -----------------------------------------------------------------------------------


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _number(x: Any, spec: str) -> str:
    """A number formatted by ``spec`` (``-`` for anything else: a damaged report.json)."""
    return format(x, spec) if isinstance(x, int | float) and not isinstance(x, bool) else "-"


def _shifted(x: Any, bits: int) -> str:
    """Bytes in MiB (20) or GiB (30), rounded down (``-`` for anything but an integer)."""
    return str(x >> bits) if isinstance(x, int) and not isinstance(x, bool) else "-"


def _e(x: Any) -> str:
    """A field for prose or a cell, escaped (``-`` for none)."""
    return "-" if x is None else md_escape(x if isinstance(x, str) else str(x))


def _opt(value: Any) -> str:
    """An optional field: escaped, or a plain ``-`` when empty."""
    return _e(value) if value else "-"


def _code(x: Any) -> str:
    return "-" if x is None else md_code(x if isinstance(x, str) else str(x), in_table=False)


def _path(path: str | None) -> str:
    """A path the agent chose, for a table cell: a literal code span (``-`` for none)."""
    return md_code(path) if path else "-"


def head_lines(r: Report) -> list[str]:
    """The title and the run's facts: task, status, the result, containment, contamination, usage."""
    best_score = r.best.score if r.best is not None else None
    lines = [
        f"# Run {_e(r.run_id)}",
        "",
        f"- task **{_e(r.task)}** (prompt profile {_opt(r.prompt_profile)}"
        + (f", decoding row {_e(r.decoding_row)}" if r.decoding_row else "") + "), agent "
        f"**{_e(r.agent)}**, driver {_opt(r.driver)}, base model {_code(r.base_model)}",
        f"- status **{_e(r.status)}** ({_opt(r.end_reason)}), agent exit code "
        f"{_fmt(r.agent_exit_code)}, budget {human_duration(r.budget_s)}",
        f"- baseline **{_fmt(r.baseline.score)}**, best **{_fmt(best_score)}**, improvement **{_fmt(r.improvement)}**",
    ]
    if r.eval_limit is not None or r.eval_seed is not None:
        lines.append(f"- {_e(eval_label(r.eval_limit, r.eval_seed, r.resolution.n if r.resolution else None))}")
    res = r.resolution
    if res is not None and res.points is not None:
        lines.append(f"- resolution: {res.points:.1f} points on its {res.n} eval items (a paired difference "
                     "detected 4 times in 5 at the 5% level when half the items flip; each submission's own "
                     "comparison below says whether its gain is more than noise)")
    if r.error:
        lines.append(f"- error: {_e(r.error)}")
    if r.mode_check is not None:
        mark = "**TRAINED OUTSIDE ITS MODE**: " if r.mode_check.kept is False else ""
        lines.append(f"- training {mark}{_e(r.mode_check.line())}")
    c = r.containment
    lines.append(f"- containment: **contained** by {_e(c.reason)}" if c.contained
                 else f"- containment: **NOT CONTAINED**: {_e(c.reason)}")
    if r.redactions is not None:
        lines.append(f"- secrets: {r.redactions.line()}")
    lines.append(_contamination_line(r.contamination_found))
    return lines + usage_lines(r.usage)


def submission_rows(r: Report) -> list[str]:
    lines = ["", "| # | at | status | score | vs baseline | eval s | revision | model |",
             "|---|---|---|---|---|---|---|---|"]
    for s in r.submissions:
        lines.append(
            f"| {s.submission_id} | {human_duration(s.elapsed_s)} | {_e(s.status)} | {_fmt(s.score)} | "
            f"{_fmt(s.improvement)} | {_fmt(s.eval_seconds, 1)} | {_fmt(s.revision)} | {_path(s.model_path)}"
            f"{' (base copy)' if s.is_base_copy else ''} |"
        )
    return lines


def graded_after_lines(r: Report) -> list[str]:
    """Checkpoints graded after the run (``run grade``), apart from its submissions."""
    if not r.graded_after:
        return []
    lines = ["", f"## Graded after the run ({len(r.graded_after)})", "",
             "Checkpoints a person graded once the run had ended, by the run's grader on its items: outside "
             "its budget, so not among its submissions nor its best.", "",
             "| # | status | score | vs baseline | model |", "|---|---|---|---|---|"]
    lines += [f"| {s.submission_id} | {_e(s.status)} | {_fmt(s.score)} | {_fmt(s.improvement)} | {_path(s.model_path)} |"
              for s in r.graded_after]
    return lines


def render_markdown(report: Report) -> str:
    """report.md: every section, from the report's attributes."""
    lines = head_lines(report) + submission_rows(report) + graded_after_lines(report)
    lines += significance_lines(report)
    lines += iteration_lines(report)
    if report.iterations:
        lines += narrative_lines(report.narrative)
    lines += strict_lines(report)
    lines += judged_lines(report)
    lines += ["", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v, 3)} |" for k, v in report.metrics.rows()]
    lines += revision_lines(report.revisions)
    lines += transcript_lines(report)
    lines += vitals_lines(report.vitals)
    lines += _contamination_section(report.contamination_found)
    lines += warning_lines(report.warnings)
    return "\n".join(lines) + "\n"


def revision_lines(revs: RevisionsSummary) -> list[str]:
    lines = ["", f"## Code revisions: {_fmt(revs.count)} (+{_fmt(revs.lines_added)} / -{_fmt(revs.lines_removed)} "
                 "lines)", ""]
    lines += [f"- {rule}" for rule in revs.capture_rules]
    if revs.left_out_at_end:
        left = ", ".join(f"{_e(reason)}: {n}" for reason, n in sorted(revs.left_out_at_end.items()))
        lines.append(f"- left out of the last snapshot: {left}")
    return lines


def transcript_lines(r: Report) -> list[str]:
    t = r.transcript
    kinds = ", ".join(f"{_e(k)} {n}" for k, n in sorted(t.by_kind.items()))
    lines = ["", f"## Transcript: {_fmt(t.steps)} steps ({kinds or 'none'})"]
    if r.agent_sessions:
        lines += ["", f"- the agent CLI's own sessions, kept with the run: {sessions_text(r.agent_sessions)}"]
    return lines


def vitals_lines(v: Vitals) -> list[str]:
    if not v.samples:
        return []
    gpus = v.gpus if isinstance(v.gpus, str) else ", ".join(
        f"GPU {i}: util max {_number(g.util_pct_max, '.0f')}%, memory max {_shifted(g.mem_used_max, 20)} MiB"
        for i, g in (v.gpus or {}).items())
    return ["", f"## Machine ({v.samples} samples)",
            f"- CPU mean {_fmt(v.cpu_pct_mean, 0)}%, max {_fmt(v.cpu_pct_max, 0)}%; memory max "
            f"{_shifted(v.mem_used_max, 20)} of {_shifted(v.mem_total, 20)} MiB; disk free min "
            f"{_shifted(v.disk_free_min, 30)} GiB",
            f"- agent: up to {v.agent_procs_max} processes, RSS max {_shifted(v.agent_rss_max, 20)} MiB",
            f"- {gpus}"]


def warning_lines(warnings: list[WarningEvent]) -> list[str]:
    if not warnings:
        return []
    lines = ["", f"## Warnings ({len(warnings)})", ""]
    lines += [f"- {w.at} {_e(w.source)}/{_e(w.kind)}: {_e(w.message)}" for w in warnings[:200]]
    if len(warnings) > 200:
        lines.append(f"- … and {len(warnings) - 200} more in run.db's events table")
    return lines


def sessions_text(s: SessionFiles) -> str:
    """``agent-home/.codex/sessions`` (2 files, 41 KiB), the folders as code spans."""
    more = "+" if s.capped else ""
    folders = ", ".join(md_code(str(f), in_table=False) for f in s.folders)
    return f"{folders} ({s.files:,}{more} files, {s.bytes / 1024:,.0f}{more} KiB)"


def usage_lines(u: RunUsage | None) -> list[str]:
    """The run's tokens and cost (``review.run_usage``: metered, else from the agent's stream), what
    the reader must know about them, and how the calls were metered."""
    if u is None:  # a report.json written before the meter
        return []
    lines = [f"- {usage_line(u)}"]  # numbers and our own words only
    lines += [f"  - {md_escape(note)}" for note in usage_notes(u)]
    meter = u.meter or {}
    if meter.get("metered"):
        caps: dict[str, Any] = meter["caps"] if isinstance(meter.get("caps"), dict) else {}
        capped = []
        if isinstance(caps.get("max_tokens"), int | float):
            capped.append(f"{caps['max_tokens']:,} tokens")
        if isinstance(caps.get("max_cost_usd"), int | float):
            capped.append(f"${caps['max_cost_usd']:.2f}")
        upstream = md_code(str(meter.get("upstream")), in_table=False)
        lines.append(f"- metering: **metered** by the loopback meter, calls to {upstream}; "
                     + (f"caps {', '.join(capped)}" if capped else "no caps"))
        keys = meter["keys"] if isinstance(meter.get("keys"), dict) else None
        if keys is not None and keys.get("held"):
            lines.append("- driver key: held by the meter; the agent had a per-run token valid only there")
        elif keys is not None:
            lines.append(f"- driver key: **the agent held its own credential**: {md_escape(str(keys.get('note')))}")
    elif u.not_metered:
        lines.append(f"- metering: **NOT METERED**: {md_escape(u.not_metered)}")
    return lines


def _said(c: Comparison | None) -> str:
    if c is None:
        return "-"
    test = f"; McNemar {p_text(c.p_value)}, {c.gained} gained, {c.lost} lost" if c.p_value is not None else ""
    return f"{c.diff:+.2f} [{c.low:+.2f}, {c.high:+.2f}] **{c.label}**{test}"


def significance_lines(report: Report) -> list[str]:
    """Each scored submission against the baseline and the best before it, on the same items."""
    rows = [(s.submission_id, s.significance) for s in report.submissions if s.significance is not None]
    if not rows:
        return []
    out = ["", "Paired on the same items (points, 95% interval):", "",
           "| # | vs baseline | vs the best before it |", "|---|---|---|"]
    out += [f"| {n} | {_said(sig.vs_baseline)} | {_said(sig.vs_previous_best)} |" for n, sig in rows]
    return out


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} s" if x >= 10 else f"{x:.1f} s"


def _at(found: Evidence | Setting) -> str:
    """Where a finding is: ``path:line`` as a code span (the path is the agent's)."""
    return md_code(f"{found.path}:{found.line}" if found.line else str(found.path), in_table=False)


def iteration_lines(report: Report) -> list[str]:
    """The route and each iteration: what it trained, with what, what changed, where the time
    went, what failed, each finding with its file and line."""
    if report.diagnosis_error:
        return ["", f"## Iterations: not diagnosed ({md_escape(report.diagnosis_error)})"]
    if not report.iterations:
        return []
    out = ["", f"## Iterations: {_e(report.route or '-')}", "",
           "| # | submission | status | score | improvement | training | failure | training s | eval s | idle s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for it in report.iterations:
        t = it.time
        out.append(f"| {it.iteration} | {_fmt(it.submission_id)} | {_e(it.status)} | {_fmt(it.score)} | "
                   f"{_fmt(it.improvement)} | {_e(it.train_type)}{_ran_note(it)} | "
                   f"{_e(it.failure_type or '-')} | {_fmt(t.get('training_s'), 0)} | {_fmt(t.get('evaluating_s'), 0)} | "
                   f"{_fmt(t.get('idle_s'), 0)} |")
    for it in report.iterations:
        out += iteration_detail(it)
    return out


def _ran_note(it: Iteration) -> str:
    if it.observed is False and it.train_type not in ("unknown", "copy_model"):
        return " (written, not seen running)"
    return " (online)" if it.online else ""


def iteration_detail(it: Iteration) -> list[str]:
    """One iteration's section of report.md."""
    sub = f"submission {it.submission_id}" if it.submission_id is not None else "no submission"
    out = ["", f"### Iteration {it.iteration}: {sub}, {_e(it.train_type)}, {_e(it.status)}"
               + (f" ({_e(it.significance)} vs the baseline)" if it.significance else "")]
    out.append(f"- {_secs(it.duration_s)} long, ending {_secs(it.elapsed_s)} into the run: "
               + ", ".join(f"{k.removesuffix('_s')} {_secs(it.time.get(k))}" for k in TIME_KINDS))
    if it.train_evidence:
        ev = it.train_evidence[0]
        out.append(f"- trained as **{_e(it.train_type)}**: {_at(ev)} {md_code(ev.text, in_table=False)}")
    if it.observed is False and it.train_type not in ("unknown", "copy_model"):
        out.append("- **written, not seen running**: no process sampled in the sandbox ran this code")
    elif it.seen_running:
        out.append(f"- seen running: {md_code(it.seen_running[0], in_table=False)}")
    if it.online and it.online_evidence:
        ev = it.online_evidence[0]
        out.append(f"- online rollouts: {_at(ev)} {md_code(ev.text, in_table=False)}")
    if it.key_config:
        out.append("- key configuration: " + ", ".join(
            f"{_e(k)} {md_code(v.value, in_table=False)} ({_at(v)})" for k, v in it.key_config.items()))
    out.append(f"- changed since the previous submission: {_e(it.changes.summary or 'no change')}")
    if it.key_code:
        out.append("- key code:")
        out += [f"  - {_at(c)} {md_code(c.text, in_table=False)}" for c in it.key_code]
    if it.failure_type:
        out.append(f"- failure: **{_e(it.failure_type)}**")
    out += [f"  - {_e(p)}" for p in it.problems]
    if it.agent_summary:
        out += ["- the agent's own summary.md about it (its words, not checked):", "", md_block(it.agent_summary)]
    return out


def strict_lines(report: Report) -> list[str]:
    """Our stricter reading beside each reference-profile score, where the record has one."""
    rows = [("baseline", report.baseline.strict)]
    rows += [(f"#{s.submission_id}", s.strict) for s in report.submissions]
    found = [(name, st) for name, st in rows if st is not None and not st.empty]
    if not found:
        return []
    lines = ["", f"Scores follow the reference's answer rule; our stricter reading ({found[0][1].rule}) gives:", ""]
    lines += [f"- {name}: {_number(st.score, '.2f')} ({st.n_differ} item(s) read differently)" for name, st in found]
    return lines


def judged_lines(report: Report) -> list[str]:
    """A judge-graded run's scores: which rate each is, both rates, the judge, failed items."""
    rows = [("baseline", report.baseline.judged)]
    rows += [(f"#{s.submission_id}", s.judged) for s in report.submissions]
    found = [(name, j) for name, j in rows if j is not None]
    if not found:
        return []
    first = found[0][1]
    lines = ["", f"Scores are judged by {_code(first.judge_model)} ({_e(first.judge_mode)} "
                 "mode) against the reference "
                 "outputs: the length-controlled win rate where it could be computed, else the win rate.", ""]
    for name, j in found:
        lc = _fmt(j.length_controlled_winrate) if j.length_controlled_winrate is not None else "unavailable"
        lines.append(f"- {name}: win rate {_fmt(j.win_rate)}, LC {lc} (score = {j.metric}); "
                     f"{j.n_judged} judged, {j.n_failed} failed, {j.n_cached} from the cache")
    return lines


NOTHING_CHECKABLE = ("no checkable items: this task's eval items are too short to be told apart from "
                     "ordinary text, so nothing was looked for")


def _contamination_line(c: ContaminationResult | str | None) -> str:
    if isinstance(c, str):
        return f"- contamination check: unreadable result ({md_escape(c)})"
    if c is None:
        return "- contamination check: not run"
    if c.items:
        return (f"- contamination check: **CONTAMINATED?** {len(c.items)} eval item(s) found in "
                f"{len(c.hits)} file(s) the agent wrote")
    if not c.checkable_items:
        return f"- contamination check: not checked ({NOTHING_CHECKABLE})"
    return (f"- contamination check: clean ({c.checkable_items} eval items checked against "
            f"{c.files_scanned} file(s))")


def _contamination_section(c: ContaminationResult | str | None) -> list[str]:
    if not isinstance(c, ContaminationResult) or not c.hits:
        return []  # a damaged result: the line above says why
    lines = ["", f"## Contamination check: {len(c.items)} eval item(s) found",
             f"{c.n}-token overlaps with the eval split (prompts and gold answers), normalised for case "
             "and whitespace; n-grams shared with the train split do not count.", "",
             "| file | revisions | at the end | eval items |", "|---|---|---|---|"]
    for hit in c.hits:
        items = ", ".join(hit.items[:20]) + (" …" if len(hit.items) > 20 else "")
        revs = ", ".join(str(r) for r in hit.revisions) or "-"
        lines.append(f"| {_path(hit.path)} | {revs} | {'yes' if hit.in_final_workspace else 'no'} | {md_escape(items)} |")
    return lines


def contamination_line(result: Any) -> str:
    """The report's contamination line for report.json's ``contamination`` (or the typed result)."""
    return _contamination_line(contamination_found(result))


def contamination_section(result: Any) -> list[str]:
    """The contamination hits' table for report.json's ``contamination`` (or the typed result)."""
    return _contamination_section(contamination_found(result))


# -- the files -----------------------------------------------------------------------------------


def write_report(run_dir: Path, *, status: str | None = None) -> Report:
    """report/report.json and report.md (and iterations.jsonl, trajectory.svg); ``status``: the run's
    final status, when the report is written before the record says it (the supervisor: a run is
    seen ended once its report is there)."""
    report = build_report(run_dir)
    if status is not None:
        report.status = status
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    (out / "report.json.tmp").write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")
    (out / "report.json.tmp").replace(out / "report.json")
    (out / "report.md").write_text(render_markdown(report), encoding="utf-8")
    (out / "iterations.jsonl.tmp").write_text("".join(json.dumps(it.as_json()) + "\n" for it in report.iterations),
                                              encoding="utf-8")
    (out / "iterations.jsonl.tmp").replace(out / "iterations.jsonl")
    write_trajectory(run_dir, report)
    return report


def read_report(run_dir: Path) -> Report | None:
    """report/report.json as written by any version (``Report.from_json``); None when there is none
    or it is not JSON."""
    try:
        data = json.loads((Path(run_dir) / "report" / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Report.from_json(data)
