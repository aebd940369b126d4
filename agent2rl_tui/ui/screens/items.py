"""Items: every per-item result of one evaluation, browsable, with the item shown whole.

Opened with ``i`` from Scores. The rows are the submission's own ``evals/<n>/results.jsonl``
(as the grader wrote them), each marked against the previous scored submission and the
baseline (solved / broke); ``f`` cycles a filter (all, wrong, correct, changed since the
previous submission, changed since the baseline, and where a reference profile's reading
and our stricter one disagree); the highlighted item is shown whole
below the table: the item's question (the prompt's last user turn; ``w``: the whole prompt, few-shot
examples and all), output, extracted answer, gold and any other field recorded.

The items of a judge-graded task are judgements: the list shows each item won or lost, the
judge's preference for the model's output, which side it was shown on and the lengths; below
it the model's output and the reference output side by side, with the judge's raw answer.

The items of an interactive task are episodes: the list then shows each game won or lost,
how it ended and its steps, and below it the episode turn by turn (an ``EpisodeView``);
``enter`` or ``t`` reads the turns (``n`` / ``p`` between them), ``]`` / ``[`` move between
episodes from either. The screen is given the items already read (by the Scores pane's
worker): it reads nothing.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from agent2rl_tui.record.results import ItemRow
from agent2rl_tui.record.store import Submission
from agent2rl_tui.review.episodes_view import all_episodes, episode_rows, facts
from agent2rl_tui.review.items import OtherItems, SubmissionItems
from agent2rl_tui.review.question import last_user_turn
from agent2rl_tui.review.runview import RunView
from agent2rl_tui.ui.format import literal, literal_line
from agent2rl_tui.ui.widgets.episode_view import EpisodeView
from agent2rl_tui.ui.widgets.virtual_table import Column, VirtualTable
from agent2rl_tui.util.inert import one_line

COLUMNS = [Column("#", 6, right=True), Column("ok", 3), Column("vs prev", 7), Column("vs base", 7),
           Column("extracted", 16), Column("gold", 16), Column("question", 0)]
EPISODE_COLUMNS = [Column("#", 6, right=True), Column("won", 3), Column("vs prev", 7), Column("vs base", 7),
                   Column("end", 12), Column("steps", 5, right=True), Column("game", 14), Column("actions", 0)]
JUDGED_COLUMNS = [Column("#", 6, right=True), Column("won", 3), Column("vs prev", 7), Column("vs base", 7),
                  Column("p(model)", 8, right=True), Column("shown", 5), Column("len model/ref", 13, right=True),
                  Column("instruction", 0)]
FILTERS = ("all", "wrong", "correct", "changed vs previous", "changed vs baseline")
JUDGED_FILTERS = ("all", "lost", "won", "changed vs previous", "changed vs baseline", "judge failed")
"""A judge-graded task's: an item is won when the judge prefers the model's output."""
EPISODE_FILTERS = ("all", "lost", "won", "changed vs previous", "changed vs baseline")
"""The same filters, named for episodes."""
EPISODES = Binding.Group("Episode")
CHANGE_STYLES = {"solved": "green", "broke": "red", "": ""}


def _short(value: Any, width: int = 200) -> str:
    text = "-" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _change(now_ok: bool, other: dict[int, bool] | None, index: int) -> str:
    if other is None or index not in other:
        return ""
    was = other[index]
    return "solved" if now_ok and not was else ("broke" if was and not now_ok else "")


def _readings_differ(item: ItemRow) -> bool:
    extra = item.extra
    return "strict_correct" in extra and bool(extra["strict_correct"]) != item.correct


def _correct_by_index(other: OtherItems | None) -> dict[int, bool] | None:
    return {item.index: item.correct for item in other.items} if other is not None else None


def judgement_view(item: ItemRow) -> Group:
    """One judgement: the verdict, the judge's raw answer, then the two outputs side by side."""
    extra = item.extra
    pref = item.preference
    shown = extra.get("model_shown_as")
    if pref is None:
        verdict = literal_line(f"item {item.index} · the judge failed: {extra.get('error')}", style="bold yellow")
    else:
        won = item.correct
        verdict = Text(f"item {item.index} · {'the model wins' if won else 'the reference wins'} · "
                       f"p(model better) {pref - 1:.2f} · the model's output was shown "
                       f"{'first (m)' if shown == 'm' else 'second (M)'}"
                       + (" · from the judgement cache" if extra.get("cached") else ""),
                       style="bold green" if won else "bold red")
    pair = Table.grid(expand=True, padding=(0, 2))
    pair.add_column(ratio=1)
    pair.add_column(ratio=1)
    pair.add_row(Text(f"the model's output ({len(item.output)} chars)", style="bold"),
                 literal_line(f"the reference: {extra.get('reference_generator') or 'reference'} "
                              f"({len(item.gold)} chars)", style="bold"))
    pair.add_row(literal(item.output), literal(item.gold))
    return Group(verdict, Text("instruction", style="dim"), literal(extra.get("instruction", "")),
                 Text("the judge said", style="dim"), literal(str(extra.get("judge_raw"))), Text(""), pair)


class ItemsScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back", id="items-back"),
        Binding("f", "next_filter", "Filter", id="items-filter"),
        Binding("w", "whole_prompt", "Whole prompt", id="items-whole-prompt",
                tooltip="The whole prompt the model saw (few-shot examples, template) or the item's question"),
        Binding("t", "toggle_turns", "Turns", id="items-turns",
                tooltip="Read the highlighted episode's turns; again: back to the list"),
        Binding("]", "episode(1)", "Next episode", id="items-next-episode", group=EPISODES),
        Binding("[", "episode(-1)", "Prev episode", id="items-prev-episode", group=EPISODES),
    ]

    def __init__(self, view: RunView, sub: Submission, read: SubmissionItems) -> None:
        super().__init__()
        self.view = view
        self.sub = sub
        self.whole_prompt = False
        self.items: list[ItemRow] = read.items
        self.episodes = all_episodes(read.items)
        """The items are episodes of an interactive task (shown turn by turn)."""
        self.prev_label = f"#{read.previous.sub_id}" if read.previous else None
        self.prev = _correct_by_index(read.previous)
        self.base = _correct_by_index(read.baseline)
        self.filter_index = 0
        self.shown: list[ItemRow] = []
        self.judged = not self.episodes and any("judge_raw" in i.extra for i in self.items)
        """The items of a judge-graded task: each is the model's output against a reference, judged."""
        self.readings = any("strict_correct" in i.extra for i in self.items)
        """A reference prompt profile's items: each also has our stricter reading (``extra.strict``)."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="items-title")
        yield VirtualTable(EPISODE_COLUMNS if self.episodes else JUDGED_COLUMNS if self.judged else COLUMNS,
                           id="items-table")
        if self.episodes:
            yield EpisodeView(id="episode-view")
        else:
            with VerticalScroll(id="item-detail"):
                yield Static("", id="item-text")
        yield Footer()

    def on_mount(self) -> None:
        self.title = one_line(self.view.run.id)
        self.sub_title = f"items of submission {self.label}"
        self.populate()
        self.query_one("#items-table", VirtualTable).focus()

    @property
    def label(self) -> str:
        return str(self.sub.id) if self.sub.kind == "agent" else "baseline"

    def _row_change(self, item: ItemRow, other: dict[int, bool] | None) -> str:
        return _change(item.correct, other, item.index)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("toggle_turns", "episode"):
            return self.episodes  # Level-1 items: hidden
        return True

    @property
    def filters(self) -> tuple[str, ...]:
        base = EPISODE_FILTERS if self.episodes else JUDGED_FILTERS if self.judged else FILTERS
        return base + (("readings differ",) if self.readings else ())

    def visible_items(self) -> list[ItemRow]:  # not visible: Textual's DOMNode.visible says whether it shows
        name = self.filters[self.filter_index]
        if name == "readings differ":
            return [i for i in self.items if _readings_differ(i)]
        if name == "judge failed":
            return [i for i in self.items if i.preference is None]
        if name in ("wrong", "lost"):
            return [i for i in self.items if not i.correct]
        if name in ("correct", "won"):
            return [i for i in self.items if i.correct]
        if name == "changed vs previous":
            return [i for i in self.items if self._row_change(i, self.prev)]
        if name == "changed vs baseline":
            return [i for i in self.items if self._row_change(i, self.base)]
        return list(self.items)

    def populate(self) -> None:
        self.shown = self.visible_items()
        correct = sum(1 for i in self.items if i.correct)
        against = " · ".join(p for p in (f"vs prev: previous submission {self.prev_label}" if self.prev_label else "",
                                         "vs base: the baseline" if self.base is not None else "") if p)
        counted = (f"{correct} of {len(self.items)} games won" if self.episodes
                   else f"{correct} of {len(self.items)} judgements won" if self.judged
                   else f"{correct} of {len(self.items)} items correct")
        if self.judged:
            failed = sum(1 for i in self.items if i.preference is None)
            counted += f" ({failed} the judge failed on)" if failed else ""
        if self.readings:
            strict = sum(1 for i in self.items if i.extra.get("strict_correct"))
            differ = sum(1 for i in self.items if _readings_differ(i))
            counted += f" (our stricter reading: {strict}, {differ} differ)"
        self.query_one("#items-title", Static).update(
            f"submission {self.label}: {counted} · filter: "
            f"{self.filters[self.filter_index]} ({len(self.shown)} shown)" + (f" · {against}" if against else "")
            if self.items else f"submission {self.label}: no per-item results recorded")
        table = self.query_one("#items-table", VirtualTable)
        cells = self._episode_cells if self.episodes else self._judged_cells if self.judged else self._cells
        table.set_rows(len(self.shown), cells, cursor=0)
        if not self.shown:
            if self.episodes:
                self.query_one("#episode-view", EpisodeView).set_rows([])
            else:
                self.query_one("#item-text", Static).update("")

    def _cells(self, i: int) -> list[str | Text]:
        item = self.shown[i]
        ok = item.correct
        prev, base = self._row_change(item, self.prev), self._row_change(item, self.base)
        return [str(item.index), Text("✓" if ok else "✗", style="green" if ok else "red"),
                Text(prev, style=CHANGE_STYLES[prev]), Text(base, style=CHANGE_STYLES[base]),
                _short(item.extracted, 40), _short(item.gold, 40), _short(last_user_turn(item.prompt))]

    def _judged_cells(self, i: int) -> list[str | Text]:
        item = self.shown[i]
        extra = item.extra
        pref = item.preference
        prev, base = self._row_change(item, self.prev), self._row_change(item, self.base)
        won = Text("?", style="yellow") if pref is None else Text("✓" if item.correct else "✗",
                                                                   style="green" if item.correct else "red")
        return [str(item.index), won, Text(prev, style=CHANGE_STYLES[prev]), Text(base, style=CHANGE_STYLES[base]),
                "failed" if pref is None else f"{pref - 1:.2f}", str(extra.get("model_shown_as", "")),
                f"{len(item.output)}/{len(item.gold)}", _short(extra.get("instruction"), 400)]

    def _episode_cells(self, i: int) -> list[str | Text]:
        item = self.shown[i]
        ep = facts(item)
        prev, base = self._row_change(item, self.prev), self._row_change(item, self.base)
        return [str(item.index), Text("✓" if ep.won else "✗", style="green" if ep.won else "red"),
                Text(prev, style=CHANGE_STYLES[prev]), Text(base, style=CHANGE_STYLES[base]),
                literal_line(ep.end or "-", style="" if ep.won else "dim"), str(ep.steps), ep.game,
                _short(" · ".join(ep.actions), 400)]

    def current_item(self) -> ItemRow | None:
        table = self.query_one("#items-table", VirtualTable)
        return self.shown[table.cursor] if 0 <= table.cursor < len(self.shown) else None

    @on(VirtualTable.CursorMoved, "#items-table")
    def show_item(self) -> None:
        item = self.current_item()
        if item is None:
            return
        if self.episodes:
            self.query_one("#episode-view", EpisodeView).set_rows(episode_rows(item))
            return
        if self.judged:
            self.query_one("#item-text", Static).update(judgement_view(item))
            return
        ok = item.correct
        parts = [literal_line(f"item {item.index} · {'correct' if ok else 'wrong'} · extracted "
                              f"{item.extracted!r} · gold {item.gold!r}",
                              style="bold green" if ok else "bold red")]
        extra = item.extra
        if "strict_correct" in extra:
            parts.append(literal_line(f"our stricter reading: {extra.get('strict')!r}, "
                              f"{'correct' if extra['strict_correct'] else 'wrong'}"
                              + (" (differs from the score's)" if _readings_differ(item) else ""),
                              style="bold yellow" if _readings_differ(item) else "dim"))
        question = last_user_turn(item.prompt)
        shown = (("prompt (whole)", item.prompt) if self.whole_prompt or question == item.prompt.strip()
                 else ("question (the prompt's last user turn; w: the whole prompt)", question))
        for key, value in (shown, ("output", item.output)):
            parts += [Text(key, style="dim"), literal(value)]
        rest = item.beside()
        if rest:
            parts += [Text("other fields", style="dim"), literal(json.dumps(rest, indent=2, ensure_ascii=False,
                                                                            default=str))]
        self.query_one("#item-text", Static).update(Text("\n").join(parts))

    @on(VirtualTable.Selected, "#items-table")
    def read_turns(self) -> None:
        if self.episodes:
            self.query_one("#episode-view", EpisodeView).focus()

    def action_whole_prompt(self) -> None:
        self.whole_prompt = not self.whole_prompt
        self.show_item()

    def action_next_filter(self) -> None:
        self.filter_index = (self.filter_index + 1) % len(self.filters)
        self.populate()

    def action_back(self) -> None:
        """From an episode's turns back to the list; from the list back to Scores."""
        if self.episodes and isinstance(self.focused, EpisodeView):
            self.query_one("#items-table", VirtualTable).focus()
        else:
            self.app.pop_screen()

    def action_toggle_turns(self) -> None:
        view = self.query_one("#episode-view", EpisodeView)
        (self.query_one("#items-table", VirtualTable) if view.has_focus else view).focus()

    def action_episode(self, delta: int) -> None:
        table = self.query_one("#items-table", VirtualTable)
        table.move_to(table.cursor + delta)
