"""The HTML report's two long sections: every scored submission's item flips, and the transcript.

Item flips: for each scored agent submission, the items it solved and broke against the
previous scored submission and against the baseline (``items.read_submission_items``,
``runview.compare_items``); episodes (interactive tasks) as their facts
(``episodes_view.facts``). Transcript: the ``steps`` table in order, read a page at a time
(``transcripts.page_steps``). Both are capped (see the constants) and say what they left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import RunStore, SubStatus
from agent2rl_tui.record.transcripts import StepRow, count_steps, page_steps
from agent2rl_tui.review.episodes_view import facts, is_episode
from agent2rl_tui.review.html_parts import Capped, block, num, signed, table, text
from agent2rl_tui.review.items import SubmissionItems, read_submission_items
from agent2rl_tui.review.runview import compare_items, load_run_view
from agent2rl_tui.review.significance import Comparison
from agent2rl_tui.util.timeutil import iso

MAX_FLIPS_SHOWN = 30
"""Items listed per list (solved or broken, against one other evaluation); the rest are counted."""
MAX_ITEM_CHARS = 200
"""Characters shown of an item's prompt, output or episode goal."""
ITEMS_BYTES = 1_000_000
"""The item-flips section's budget in bytes; submissions past it are named, not detailed."""
MAX_STEPS = 5_000
"""Transcript steps shown (the first ones); the rest are counted."""
MAX_STEP_CHARS = 2_000
"""Characters shown of one step's text."""
TRANSCRIPT_BYTES = 2_000_000
"""The transcript section's budget in bytes; steps past it are counted, not shown."""
_PAGE = 100  # steps read at once: tool arguments are kept whole in run.db, so a page can be large


def _item_rows(items: list[ItemRow]) -> str:
    shown = items[:MAX_FLIPS_SHOWN]
    if shown and all(is_episode(i) for i in shown):
        rows: list[tuple[str, ...]] = [
            (num(f.index), text(f.game, MAX_ITEM_CHARS), text(f.goal, MAX_ITEM_CHARS), text(f.outcome),
             num(f.steps), num(f.score)) for f in map(facts, shown)]
        out = table(("item", "game", "goal", "outcome", "steps", "score"), rows, numeric=(0, 4, 5))
    else:
        rows = [(num(i.index), text(i.prompt, MAX_ITEM_CHARS), text(i.gold, MAX_ITEM_CHARS),
                 text(i.extracted, MAX_ITEM_CHARS), text(i.output, MAX_ITEM_CHARS)) for i in shown]
        out = table(("item", "prompt", "gold", "answer", "output"), rows, numeric=(0,))
    if len(items) > MAX_FLIPS_SHOWN:
        out += f'<p class="cut">… and {len(items) - MAX_FLIPS_SHOWN:,} more (evals/&lt;n&gt;/results.jsonl holds them all)</p>'
    return out


def _said(c: Comparison | None) -> str:
    if c is None:
        return ""
    return f" ({signed(c.diff)} points, [{signed(c.low)}, {signed(c.high)}], {text(c.label)})"


def _against(items: list[ItemRow], other: list[ItemRow], name: str, c: Comparison | None) -> tuple[str, str]:
    """One line for the summary, and the solved and broken tables."""
    cmp = compare_items(items, other)
    line = (f"vs {name}: {len(cmp.solved):,} solved, {len(cmp.broken):,} broken, {cmp.kept:,} kept, "
            f"{cmp.still_wrong:,} still wrong{_said(c)}")
    body = f"<h4>Against {name}</h4>"
    for title, flipped in (("solved (wrong before, right now)", cmp.solved),
                           ("broken (right before, wrong now)", cmp.broken)):
        body += f"<p><b>{len(flipped):,} {title}</b></p>" + (_item_rows(flipped) if flipped else "")
    return line, body


def _flips(si: SubmissionItems, score: Any) -> str:
    lines, bodies = [], []
    if si.previous is not None and si.previous.items:
        line, body = _against(si.items, si.previous.items, f"submission {si.previous.sub_id}", si.vs_previous)
        lines.append(line)
        bodies.append(body)
    if si.baseline is not None and si.baseline.items:
        line, body = _against(si.items, si.baseline.items, "the baseline", si.vs_baseline)
        lines.append(line)
        bodies.append(body)
    if not lines:
        lines.append("nothing scored before it to compare with")
    head = f"Submission {si.sub_id} (score {num(score)}, {len(si.items):,} items): " + "; ".join(lines)
    return f'<details id="items-{int(si.sub_id)}"><summary>{head}</summary>{"".join(bodies)}</details>\n'


def item_flips_html(run_dir: Path) -> str:
    """Every scored agent submission's flips against the previous scored one and the baseline."""
    view = load_run_view(run_dir)
    scored = [s for s in view.submissions if s.status == SubStatus.SCORED]
    if not scored:
        return "<p>No scored submission.</p>"
    out = Capped(ITEMS_BYTES)
    for sub in scored:
        si = read_submission_items(view, sub)
        if not si.items:
            out.add(f"<p>Submission {int(sub.id)}: no per-item results recorded.</p>")
        elif not out.add(_flips(si, sub.score)):
            break
    if out.dropped or len(out.parts) < len(scored):
        left = scored[len(out.parts):]
        out.parts.append(f'<p class="cut">… {len(left):,} more submissions not detailed here (the page\'s size cap): '
                         + ", ".join(str(int(s.id)) for s in left[:200]) + "</p>")
    return out.html()


def _steps(store: RunStore, limit: int) -> Iterator[StepRow]:
    for offset in range(0, limit, _PAGE):
        page = page_steps(store, offset, min(_PAGE, limit - offset))
        yield from page
        if len(page) < _PAGE:
            return


def _step_text(step: StepRow) -> str:
    body = step.text
    if not body and step.args:
        body = json.dumps(step.args, ensure_ascii=False)
    cell = block(body, MAX_STEP_CHARS)
    if step.size and step.size > len(step.text or ""):
        cell += f'<span class="cut"> (the record kept {len(step.text or ""):,} of {step.size:,} characters)</span>'
    return cell


def transcript_html(run_dir: Path) -> str:
    """The transcript's first ``MAX_STEPS`` steps (time, kind, role or tool, text), capped."""
    with RunStore.of_run(run_dir) as store:
        budget_start = store.run().budget_start
        total = count_steps(store)
        out = Capped(TRANSCRIPT_BYTES)
        for step in _steps(store, MAX_STEPS):
            at = iso(step.at) or ""
            since = f"+{step.at - budget_start:,.1f} s" if budget_start is not None else ""
            who = " ".join(text(x) for x in (step.role, step.tool) if x)
            row = (f'<tr><td class="mono">{at[11:23]}</td><td class="num">{since}</td><td>{text(step.kind)}</td>'
                   f'<td>{who}</td><td class="text">{_step_text(step)}</td></tr>\n')
            if not out.add(row):
                break
    shown = len(out.parts)
    note = f"{total:,} steps"
    if shown < total:
        why = "the page's size cap" if out.dropped else f"the first {MAX_STEPS:,} are shown"
        note += f'; <span class="cut">{shown:,} shown ({why}); run.db\'s steps table holds them all</span>'
    head = "<tr><th>time (UTC)</th><th>since start</th><th>kind</th><th>role / tool</th><th>text</th></tr>"
    return f"<p>{note}</p><table><thead>{head}</thead><tbody>\n{out.html()}</tbody></table>"
