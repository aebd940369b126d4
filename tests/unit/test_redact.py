"""The redactor's parts on real files and a real SQLite file: masks of the secret's length, in
place, never through a link, and a run.db whose old values are gone from the file too."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from agent2rl_tui.record.redact import Redactor, mask, redact_db, redact_file, redact_tree
from agent2rl_tui.run.run_secrets import login_secrets, secret_values


def test_a_sweep_masks_in_place_keeps_sizes_and_never_follows_a_link(tmp_path: Path) -> None:
    redactor = Redactor(["sk-secret-0123456789", "short", ""])  # a short one is no secret
    assert redactor.secrets == ("sk-secret-0123456789",)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("key=sk-secret-0123456789\n")
    (tree / "sub" / "b.bin").write_bytes(b"\x00\x01sk-secret-0123456789\xff" * 3)
    outside = tmp_path / "outside.txt"
    outside.write_text("sk-secret-0123456789")
    (tree / "link.txt").symlink_to(outside)
    (tree / "sub" / "loop").symlink_to(tree)
    swept = redact_tree(tree, redactor)
    assert (swept.files, swept.changed, swept.redactions) == (2, 2, 4)
    assert (tree / "a.txt").read_text() == "key=[REDACTED----------]\n"
    assert (tree / "sub" / "b.bin").read_bytes() == b"\x00\x01[REDACTED----------]\xff" * 3  # the same size
    assert outside.read_text() == "sk-secret-0123456789"  # never through a link
    assert redact_file(tree / "a.txt", redactor) == 0
    # What is kept apart is kept apart at the top only: the agent's own folder of that name is swept.
    for folder in (tree / "snapshots.git", tree / "sub" / "snapshots.git"):
        folder.mkdir()
        (folder / "k").write_text("sk-secret-0123456789")
    assert redact_tree(tree, redactor, skip=("snapshots.git",)).redactions == 1
    assert (tree / "snapshots.git" / "k").read_text() == "sk-secret-0123456789"
    assert (tree / "sub" / "snapshots.git" / "k").read_text() == mask(20)
    big = b"x" * (1 << 20) + b"sk-secret-0123456789"  # past the plain search, still found
    assert redactor.data(big).endswith(mask(20).encode()) and redactor.data(b"y" * (1 << 20)) == b"y" * (1 << 20)


def test_run_db_values_are_masked_and_gone_from_the_file(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, message TEXT, data TEXT, n INTEGER)")
    secret = "sk-secret-0123456789"
    with conn:
        for i in range(50):
            conn.execute("INSERT INTO events (message, data, n) VALUES (?, ?, ?)",
                         (f"agent said {secret} {i}", json.dumps({"k": secret}), i))
        conn.execute("INSERT INTO events (message, data, n) VALUES ('nothing here', '{}', 0)")
    conn.close()
    assert redact_db(db, Redactor([secret])) == 50  # rows changed
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert secret.encode() not in data  # neither in a live value nor in a freed page or the log
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM events WHERE message LIKE '%[REDACTED%'").fetchone() == (50,)
    assert conn.execute("SELECT data FROM events WHERE id = 1").fetchone() == (json.dumps({"k": mask(len(secret))}),)


def test_what_counts_as_a_secret(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-proj-Abc123xyz", "HF_TOKEN": "hf_AbCdEf123456", "SERPER_KEY": "0123456789abcdef",
           "DB_PASSWORD": "Hunter2Hunter2", "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin:/bin",
           "CREDS_SECRET": "/etc/secret/file.json", "LOCAL_TOKEN": "localhost", "SHORT_KEY": "Ab1"}
    assert sorted(secret_values(env)) == sorted(["sk-proj-Abc123xyz", "hf_AbCdEf123456", "0123456789abcdef",
                                                 "Hunter2Hunter2"])
    login = tmp_path / "auth.json"
    login.write_text(json.dumps({"tokens": {"access_token": "eyJhbGciOi.JIUzI1NiIs", "id_token": "idTok3n-abcdefgh"},
                                 "OPENAI_API_KEY": "sk-Login-Key-123", "last_refresh": "2026-11-01T10:00:00Z",
                                 "auth_mode": "chatgpt", "account": {"email": "me@example.com"}}))
    dotenv = tmp_path / ".env"
    dotenv.write_text("export GEMINI_API_KEY='AIzaSyA-0123456789'\nGOOGLE_CLOUD_PROJECT=my-project\n")
    found = login_secrets([login, dotenv, tmp_path / "missing.json"])
    assert sorted(found) == sorted(["eyJhbGciOi.JIUzI1NiIs", "idTok3n-abcdefgh", "sk-Login-Key-123",
                                    "AIzaSyA-0123456789"])
