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

report.md quotes text the agent made (model paths, errors that quote them, file names in
warnings and contamination hits): every such field goes in through ``util.inert.md_escape``
or ``md_code``, so it reads as one literal line and can never add a heading, a table row,
a score or a link of its own. report.json keeps the record's text as it is (JSON escapes it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent2rl_tui.record.capture import DEFAULT_RULES
from agent2rl_tui.record.contamination import ContaminationResult, read_contamination
from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.record.sessions import session_files
from agent2rl_tui.record.store import (
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
from agent2rl_tui.record.summary_parts import as_json
from agent2rl_tui.record.transcripts import transcript_totals
from agent2rl_tui.review.items import significance
from agent2rl_tui.review.iterations import TIME_KINDS, build_iterations
from agent2rl_tui.review.narrative import Narrative, narrative_lines, read_narrative
from agent2rl_tui.review.plots import write_trajectory
from agent2rl_tui.review.run_usage import RunUsage, run_usage, usage_line, usage_notes
from agent2rl_tui.review.runview import read_rows
from agent2rl_tui.review.samples import summarize_samples
from agent2rl_tui.review.significance import resolution
from agent2rl_tui.util.inert import md_block, md_code, md_escape
from agent2rl_tui.util.timeutil import human_duration, iso, now


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def compute_metrics(run: RunRecord, subs: list[Submission], baseline: Submission | None) -> dict[str, Any]:
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
    return {
        "n_submissions": len(subs),
        "n_valid": len(valid),
        "valid_submission_rate": _ratio(len(valid), len(subs)),
        "first_valid_idx": subs.index(first_valid) + 1 if first_valid else None,
        "first_valid_delay": since_start(first_valid.received_at) if first_valid else None,
        "time_to_first_improvement": since_start(first_improving.received_at) if first_improving else None,
        "time_to_best": since_start(best.received_at) if best else None,
        "monotonic_ratio": _ratio(increases, len(scores) - 1) if len(scores) >= 2 else None,
        "time_used_ratio": (
            round((agent_end - start) / run.budget_s, 4) if agent_end and start else None
        ),
        "last_submit_gap": round(agent_end - last_submit, 3) if agent_end and last_submit else None,
        "base_copy_count": sum(1 for s in valid if base_hash and s.weights_hash == base_hash),
        "eval_seconds_total": round(sum(s.eval_seconds or 0.0 for s in subs + ([baseline] if baseline else [])), 3),
    }


def revisions_summary(revisions: list[dict[str, Any]]) -> dict[str, Any]:
    """How many revisions, how much changed, and what the capture rules left out (last snapshot)."""
    last_ignored = json.loads(revisions[-1]["ignored_json"]) if revisions else {}
    return {
        "count": len(revisions),
        "lines_added": sum(r["added"] for r in revisions),
        "lines_removed": sum(r["removed"] for r in revisions),
        "capture_rules": DEFAULT_RULES.describe(),
        "left_out_at_end": last_ignored,
    }


WARNING_KINDS = {
    "snapshot_failed", "recovered", "stale_lock", "watch_failed", "agent_killed", "strays_killed",
    "workers_killed", "grader_restarted", "grader_died", "report_failed", "meter_died",
}
"""Events a reader of the report should see (with every event the vitals sampler raises)."""


NO_CONTAINMENT_RECORD = ("no containment recorded: the agent never started, or the run was made by a "
                         "version of agent2rl-tui without containment")


def containment_of(store: RunStore) -> dict[str, Any]:
    """How the agent was contained (the supervisor's ``containment`` event), or why not."""
    return store.last_event_data("containment") or {"contained": False, "reason": NO_CONTAINMENT_RECORD}


def warning_events(store: RunStore) -> list[dict[str, Any]]:
    return [
        {"at": iso(e["at"]), "source": e["source"], "kind": e["kind"], "message": e["message"]}
        for e in store.events() if e["source"] == "vitals" or e["kind"] in WARNING_KINDS
    ]


def build_report(run_dir: Path) -> dict[str, Any]:
    with RunStore.of_run(run_dir) as store:
        run = store.run()
        baseline = store.baseline()
        subs = store.submissions(kind="agent")
        revisions = store.revision_rows()
        transcript = transcript_totals(store)
        usage = run_usage(store)
        warnings = warning_events(store)
        contained = containment_of(store)
        sessions = session_files(run_dir, store)
    base_score = scored_score(baseline)
    best = best_of(subs)
    start = run.budget_start
    base_hash = baseline.weights_hash if baseline else None

    read: dict[int, list[ItemRow]] = {}

    def items_of(sub_id: int) -> list[ItemRow]:  # each evaluation read once
        if sub_id not in read:
            read[sub_id] = read_rows(run_dir, sub_id)
        return read[sub_id]

    base_items = items_of(baseline.id) if baseline is not None and base_score is not None else []
    best_before: dict[int, Submission | None] = {}
    leader: Submission | None = None
    for s in subs:
        best_before[s.id] = leader
        if s.score is not None and s.status == SubStatus.SCORED and (leader is None or s.score > (leader.score or 0)):
            leader = s

    def paired(s: Submission) -> dict[str, Any] | None:
        """The submission against the baseline and the best before it, item by item."""
        if s.score is None or s.status != SubStatus.SCORED:
            return None
        items = items_of(s.id)
        prior = best_before.get(s.id)
        vs_base = significance(items, base_items) if base_items else None
        vs_best = significance(items, items_of(prior.id)) if prior is not None else None
        return {"vs_baseline": vs_base.as_json() if vs_base else None,
                "vs_previous_best": vs_best.as_json() if vs_best else None,
                "previous_best": prior.id if prior is not None else None}

    def sub_entry(s: Submission) -> dict[str, Any]:
        return {
            "submission_id": s.id,
            "status": s.status,
            "score": s.score,
            "improvement": (s.score - base_score) if s.score is not None and base_score is not None else None,
            "received_at": iso(s.received_at),
            "elapsed_s": round(s.received_at - start, 3) if start else None,
            "eval_seconds": round(s.eval_seconds, 3) if s.eval_seconds is not None else None,
            "model_path": s.model_path,
            "weights_hash": s.weights_hash,
            "is_base_copy": bool(base_hash and s.weights_hash == base_hash),
            "revision": s.revision_seq,
            "error": s.error,
            "strict": as_json(strict_of(s)),
            "judged": as_json(judgement_of(s)),
            "significance": paired(s),
        }

    entries = [sub_entry(s) for s in subs]
    labels = {e["submission_id"]: e["significance"]["vs_baseline"]["label"] for e in entries
              if e["significance"] and e["significance"]["vs_baseline"]}
    try:
        diagnosis = build_iterations(run_dir, labels)
        route, iterations, diagnosis_error = diagnosis.route, [it.as_json() for it in diagnosis.iterations], None
    except Exception as exc:  # noqa: BLE001 - the diagnosis never costs the report
        route, iterations, diagnosis_error = None, [], f"{type(exc).__name__}: {exc}"
    return {
        "run_id": run.id,
        "task": run.task,
        "agent": run.agent,
        "driver": run.driver,
        "base_model": run.base_model,
        "prompt_profile": prompt_profile_of(run.config, baseline, *subs),
        "decoding_row": decoding_row_of(run.config, baseline, *subs),
        "status": run.status,
        "end_reason": run.end_reason,
        "agent_exit_code": run.agent_exit_code,
        "error": run.error,
        "budget_s": run.budget_s,
        "budget_start": iso(start),
        "deadline": iso(run.deadline),
        "agent_ended_at": iso(run.agent_ended_at),
        "ended_at": iso(run.ended_at),
        "baseline": {
            "score": base_score,
            "status": baseline.status if baseline else None,
            "error": baseline.error if baseline else None,
            "eval_seconds": baseline.eval_seconds if baseline else None,
            "weights_hash": base_hash,
            "strict": as_json(strict_of(baseline)),
            "judged": as_json(judgement_of(baseline)),
        },
        "resolution": ({"n": baseline.n_items, "points": round(resolution(baseline.n_items), 2)}
                       if baseline is not None and baseline.n_items else None),
        "best": {"submission_id": best.id, "score": best.score} if best else None,
        "improvement": (best.score - base_score) if best and base_score is not None else None,
        "submissions": entries,
        "route": route,
        "iterations": iterations,
        "diagnosis_error": diagnosis_error,
        "narrative": _narrative_json(run_dir),
        "metrics": compute_metrics(run, subs, baseline),
        "revisions": revisions_summary(revisions),
        "transcript": transcript,
        "agent_sessions": sessions.as_json() if sessions else None,
        "usage": usage.as_json(),
        "vitals": summarize_samples(run_dir),
        "warnings": warnings,
        "containment": contained,
        "contamination": _contamination_json(run_dir),
        "generated_at": iso(now()),
    }


def _contamination_json(run_dir: Path) -> dict[str, Any] | None:
    """report/contamination.json as report.json holds it (None: no check ran, or its file is unreadable)."""
    result = read_contamination(run_dir)
    return result.to_dict() if result is not None else None


def _narrative_json(run_dir: Path) -> dict[str, Any] | None:
    """The run's narrative for report.json, without its cache of answers."""
    narrative = read_narrative(run_dir)
    if narrative is None:
        return None
    data = narrative.as_json()
    data.pop("cache", None)
    return data


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def _path(path: str | None) -> str:
    """A path the agent chose, for a table cell: a literal code span (``-`` for none)."""
    return md_code(path) if path else "-"


def render_markdown(report: dict[str, Any]) -> str:
    e = md_escape

    def opt(value: Any) -> str:  # an optional field: escaped, or a plain -
        return e(value) if value else "-"

    lines = [
        f"# Run {e(report['run_id'])}",
        "",
        f"- task **{e(report['task'])}** (prompt profile {opt(report.get('prompt_profile'))}"
        + (f", decoding row {e(report['decoding_row'])}" if report.get("decoding_row") else "") + "), agent "
        f"**{e(report['agent'])}**, driver {opt(report['driver'])}, base model "
        f"{md_code(report['base_model'], in_table=False)}",
        f"- status **{e(report['status'])}** ({opt(report['end_reason'])}), agent exit code "
        f"{_fmt(report['agent_exit_code'])}, budget {human_duration(report['budget_s'])}",
        f"- baseline **{_fmt(report['baseline']['score'])}**, best **"
        f"{_fmt(report['best']['score'] if report['best'] else None)}**, improvement **"
        f"{_fmt(report['improvement'])}**",
    ]
    res = report.get("resolution")
    if res:
        lines.append(f"- resolution: {res['points']:.1f} points on its {res['n']} eval items (a paired difference "
                     "detected 4 times in 5 at the 5% level when half the items flip; each submission's own "
                     "comparison below says whether its gain is more than noise)")
    if report["error"]:
        lines.append(f"- error: {e(report['error'])}")
    c = report["containment"]
    lines.append(f"- containment: **contained** by {e(c['reason'])}" if c["contained"]
                 else f"- containment: **NOT CONTAINED**: {e(c['reason'])}")
    lines.append(contamination_line(report["contamination"]))
    lines += usage_lines(report.get("usage"))
    lines += ["", "| # | at | status | score | vs baseline | eval s | revision | model |",
              "|---|---|---|---|---|---|---|---|"]
    for s in report["submissions"]:
        lines.append(
            f"| {s['submission_id']} | {human_duration(s['elapsed_s'])} | {e(s['status'])} | {_fmt(s['score'])} | "
            f"{_fmt(s['improvement'])} | {_fmt(s['eval_seconds'], 1)} | {_fmt(s['revision'])} | {_path(s['model_path'])}"
            f"{' (base copy)' if s['is_base_copy'] else ''} |"
        )
    lines += significance_lines(report)
    lines += iteration_lines(report)
    if report.get("iterations"):
        lines += narrative_lines(Narrative.from_json(report["narrative"]) if report.get("narrative") else None)
    lines += strict_lines(report)
    lines += judged_lines(report)
    lines += ["", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v, 3)} |" for k, v in report["metrics"].items()]
    revs = report["revisions"]
    lines += ["", f"## Code revisions: {revs['count']} (+{revs['lines_added']} / -{revs['lines_removed']} lines)", ""]
    lines += [f"- {rule}" for rule in revs["capture_rules"]]
    if revs["left_out_at_end"]:
        left = ", ".join(f"{e(reason)}: {n}" for reason, n in sorted(revs["left_out_at_end"].items()))
        lines.append(f"- left out of the last snapshot: {left}")
    t = report["transcript"]
    kinds = ", ".join(f"{e(k)} {n}" for k, n in sorted(t["by_kind"].items()))
    lines += ["", f"## Transcript: {t['steps']} steps ({kinds or 'none'})"]
    if report.get("agent_sessions"):
        lines += ["", f"- the agent CLI's own sessions, kept with the run: {sessions_text(report['agent_sessions'])}"]
    v = report["vitals"]
    if v.get("samples"):
        gpus = v["gpus"] if isinstance(v["gpus"], str) else ", ".join(
            f"GPU {i}: util max {g['util_pct_max']:.0f}%, memory max {g['mem_used_max'] >> 20} MiB"
            for i, g in v["gpus"].items())
        lines += ["", f"## Machine ({v['samples']} samples)",
                  f"- CPU mean {_fmt(v['cpu_pct_mean'], 0)}%, max {_fmt(v['cpu_pct_max'], 0)}%; memory max "
                  f"{v['mem_used_max'] >> 20} of {v['mem_total'] >> 20} MiB; disk free min {v['disk_free_min'] >> 30} GiB",
                  f"- agent: up to {v['agent_procs_max']} processes, RSS max {v['agent_rss_max'] >> 20} MiB",
                  f"- {gpus}"]
    lines += contamination_section(report["contamination"])
    warnings = report.get("warnings") or []
    if warnings:
        lines += ["", f"## Warnings ({len(warnings)})", ""]
        lines += [f"- {w['at']} {e(w['source'])}/{e(w['kind'])}: {e(w['message'])}" for w in warnings[:200]]
        if len(warnings) > 200:
            lines.append(f"- … and {len(warnings) - 200} more in run.db's events table")
    return "\n".join(lines) + "\n"


def sessions_text(data: dict[str, Any]) -> str:
    """``agent-home/.codex/sessions`` (2 files, 41 KiB), the folders as code spans."""
    more = "+" if data.get("capped") else ""
    folders = ", ".join(md_code(str(f), in_table=False) for f in data.get("folders") or [])
    return f"{folders} ({data.get('files', 0):,}{more} files, {data.get('bytes', 0) / 1024:,.0f}{more} KiB)"


def usage_lines(data: dict[str, Any] | None) -> list[str]:
    """The run's tokens and cost (``review.run_usage``: metered, else from the agent's stream), what
    the reader must know about them, and how the calls were metered."""
    if data is None:  # a report.json written before the meter
        return []
    u = RunUsage.from_json(data)
    lines = [f"- {usage_line(u)}"]  # numbers and our own words only
    lines += [f"  - {md_escape(note)}" for note in usage_notes(u)]
    meter = u.meter or {}
    if meter.get("metered"):
        caps = meter.get("caps") or {}
        capped = []
        if caps.get("max_tokens") is not None:
            capped.append(f"{caps['max_tokens']:,} tokens")
        if caps.get("max_cost_usd") is not None:
            capped.append(f"${caps['max_cost_usd']:.2f}")
        upstream = md_code(str(meter.get("upstream")), in_table=False)
        lines.append(f"- metering: **metered** by the loopback meter, calls to {upstream}; "
                     + (f"caps {', '.join(capped)}" if capped else "no caps"))
    elif u.not_metered:
        lines.append(f"- metering: **NOT METERED**: {md_escape(u.not_metered)}")
    return lines


def significance_lines(report: dict[str, Any]) -> list[str]:
    """Each scored submission against the baseline and the best before it, on the same items."""
    def said(c: dict[str, Any] | None) -> str:
        if not c:
            return "-"
        low, high = c["ci95"]
        test = f"; McNemar p = {c['p_value']:.4f}, {c['gained']} gained, {c['lost']} lost" if c.get("p_value") is not None else ""
        return f"{c['diff']:+.2f} [{low:+.2f}, {high:+.2f}] **{c['label']}**{test}"

    rows = [(s["submission_id"], s.get("significance")) for s in report["submissions"] if s.get("significance")]
    if not rows:
        return []
    out = ["", "Paired on the same items (points, 95% interval):", "",
           "| # | vs baseline | vs the best before it |", "|---|---|---|"]
    out += [f"| {n} | {said(sig['vs_baseline'])} | {said(sig['vs_previous_best'])} |" for n, sig in rows]
    return out


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} s" if x >= 10 else f"{x:.1f} s"


def _at(found: dict[str, Any]) -> str:
    """Where a finding is: ``path:line`` as a code span (the path is the agent's)."""
    return md_code(f"{found['path']}:{found['line']}" if found.get("line") else str(found["path"]), in_table=False)


def iteration_lines(report: dict[str, Any]) -> list[str]:
    """The route and each iteration: what it trained, with what, what changed, where the time
    went, what failed, each finding with its file and line."""
    if report.get("diagnosis_error"):
        return ["", f"## Iterations: not diagnosed ({md_escape(report['diagnosis_error'])})"]
    iterations = report.get("iterations") or []
    if not iterations:
        return []
    e = md_escape
    out = ["", f"## Iterations: {e(report.get('route') or '-')}", "",
           "| # | submission | status | score | improvement | training | failure | training s | eval s | idle s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for it in iterations:
        t = it.get("time") or {}
        out.append(f"| {it['iteration']} | {_fmt(it.get('submission_id'))} | {e(it['status'])} | {_fmt(it.get('score'))} | "
                   f"{_fmt(it.get('improvement'))} | {e(it['train_type'])}{' (online)' if it.get('online') else ''} | "
                   f"{e(it.get('failure_type') or '-')} | {_fmt(t.get('training_s'), 0)} | {_fmt(t.get('evaluating_s'), 0)} | "
                   f"{_fmt(t.get('idle_s'), 0)} |")
    for it in iterations:
        sub = f"submission {it['submission_id']}" if it.get("submission_id") is not None else "no submission"
        out += ["", f"### Iteration {it['iteration']}: {sub}, {e(it['train_type'])}, {e(it['status'])}"
                    + (f" ({e(it['significance'])} vs the baseline)" if it.get("significance") else "")]
        t = it.get("time") or {}
        out.append(f"- {_secs(it.get('duration_s'))} long, ending {_secs(it.get('elapsed_s'))} into the run: "
                   + ", ".join(f"{k.removesuffix('_s')} {_secs(t.get(k))}" for k in TIME_KINDS))
        if it.get("train_evidence"):
            ev = it["train_evidence"][0]
            out.append(f"- trained as **{e(it['train_type'])}**: {_at(ev)} "
                       f"{md_code(ev['text'], in_table=False)}")
        if it.get("online") and it.get("online_evidence"):
            ev = it["online_evidence"][0]
            out.append(f"- online rollouts: {_at(ev)} "
                       f"{md_code(ev['text'], in_table=False)}")
        config = it.get("key_config") or {}
        if config:
            out.append("- key configuration: " + ", ".join(
                f"{e(k)} {md_code(v['value'], in_table=False)} ({_at(v)})"
                for k, v in config.items()))
        out.append(f"- changed since the previous submission: {e((it.get('changes') or {}).get('summary') or 'no change')}")
        if it.get("key_code"):
            out.append("- key code:")
            out += [f"  - {_at(c)} {md_code(c['text'], in_table=False)}"
                    for c in it["key_code"]]
        if it.get("failure_type"):
            out.append(f"- failure: **{e(it['failure_type'])}**")
        out += [f"  - {e(p)}" for p in (it.get("problems") or [])]
        if it.get("agent_summary"):
            out += ["- the agent's own summary.md about it (its words, not checked):", "", md_block(it["agent_summary"])]
    return out


def strict_lines(report: dict[str, Any]) -> list[str]:
    """Our stricter reading beside each reference-profile score, where the record has one."""
    rows = [("baseline", report["baseline"].get("strict"))]
    rows += [(f"#{s['submission_id']}", s.get("strict")) for s in report["submissions"]]
    rows = [(name, st) for name, st in rows if st]
    if not rows:
        return []
    lines = ["", f"Scores follow the reference's answer rule; our stricter reading ({rows[0][1]['rule']}) gives:", ""]
    lines += [f"- {name}: {st['score']:.2f} ({st['n_differ']} item(s) read differently)" for name, st in rows]
    return lines


def judged_lines(report: dict[str, Any]) -> list[str]:
    """A judge-graded run's scores: which rate each is, both rates, the judge, failed items."""
    rows = [("baseline", report["baseline"].get("judged"))]
    rows += [(f"#{s['submission_id']}", s.get("judged")) for s in report["submissions"]]
    rows = [(name, j) for name, j in rows if j]
    if not rows:
        return []
    first = rows[0][1]
    lines = ["", f"Scores are judged by {md_code(first['judge_model'], in_table=False)} ({md_escape(first['judge_mode'])} "
                 "mode) against the reference "
                 "outputs: the length-controlled win rate where it could be computed, else the win rate.", ""]
    for name, j in rows:
        lc = _fmt(j["length_controlled_winrate"]) if j["length_controlled_winrate"] is not None else "unavailable"
        lines.append(f"- {name}: win rate {_fmt(j['win_rate'])}, LC {lc} (score = {j['metric']}); "
                     f"{j['n_judged']} judged, {j['n_failed']} failed, {j['n_cached']} from the cache")
    return lines


def _contamination_of(result: dict[str, Any] | None) -> ContaminationResult | None:
    """report.json's ``contamination``, typed; ValueError when it is malformed."""
    return None if result is None else ContaminationResult.from_dict(result)


def contamination_line(result: dict[str, Any] | None) -> str:
    try:
        c = _contamination_of(result)
    except ValueError as exc:
        return f"- contamination check: unreadable result ({md_escape(str(exc))})"
    if c is None:
        return "- contamination check: not run"
    if c.items:
        return (f"- contamination check: **CONTAMINATED?** {len(c.items)} eval item(s) found in "
                f"{len(c.hits)} file(s) the agent wrote")
    return (f"- contamination check: clean ({c.checkable_items} eval items checked against "
            f"{c.files_scanned} file(s))")


def contamination_section(result: dict[str, Any] | None) -> list[str]:
    try:
        c = _contamination_of(result)
    except ValueError:
        return []  # the line above says why
    if c is None or not c.hits:
        return []
    lines = ["", f"## Contamination check: {len(c.items)} eval item(s) found",
             f"{c.n}-token overlaps with the eval split (prompts and gold answers), normalised for case "
             "and whitespace; n-grams shared with the train split do not count.", "",
             "| file | revisions | at the end | eval items |", "|---|---|---|---|"]
    for hit in c.hits:
        items = ", ".join(hit.items[:20]) + (" …" if len(hit.items) > 20 else "")
        revs = ", ".join(str(r) for r in hit.revisions) or "-"
        lines.append(f"| {_path(hit.path)} | {revs} | {'yes' if hit.in_final_workspace else 'no'} | {md_escape(items)} |")
    return lines


def write_report(run_dir: Path, *, status: str | None = None) -> dict[str, Any]:
    """report/report.json and report.md; ``status``: the run's final status, when the report is
    written before the record says it (the supervisor: a run is seen ended once its report is there)."""
    report = build_report(run_dir)
    if status is not None:
        report["status"] = status
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    (out / "report.json.tmp").write_text(json.dumps(report, indent=2), encoding="utf-8")
    (out / "report.json.tmp").replace(out / "report.json")
    (out / "report.md").write_text(render_markdown(report), encoding="utf-8")
    if report.get("iterations") is not None:
        (out / "iterations.jsonl.tmp").write_text("".join(json.dumps(it) + "\n" for it in report["iterations"]),
                                                  encoding="utf-8")
        (out / "iterations.jsonl.tmp").replace(out / "iterations.jsonl")
    write_trajectory(run_dir, report)
    return report
