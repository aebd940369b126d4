"""A row-cursor DataTable where home and end go to the first and last row.

Every table in this app selects rows (runs, submissions, revisions); Textual's default
home/end move between columns, which surprises in a row list.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable[str | Text]):  # cells: plain text, or Text for styled or agent-made text
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
