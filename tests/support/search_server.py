"""A small web search API, run as a real process by the tests: SerpAPI's request and answer shape.

``GET /search?q=QUERY&num=K[&api_key=KEY]`` answers ``{"organic_results": [{"title",
"snippet", "link"}, ...]}`` from a JSONL corpus (title, text, url), ranking documents by how
many query words they contain. Every query is appended to ``--log`` (one JSON line), so a
test sees exactly what reached the search backend. ``--key K`` requires ``api_key=K``.

Usage: ``python tests/support/search_server.py --corpus FILE --port-file F --log FILE [--key K]``.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from local_server import send_json, serve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--key")
    args = parser.parse_args()
    docs = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlparse(self.path)
            params = urllib.parse.parse_qs(url.query)
            query = params.get("q", [""])[0]
            with lock, args.log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"q": query, "num": params.get("num", [""])[0]}) + "\n")
            if args.key and params.get("api_key", [""])[0] != args.key:
                body, code = {"error": "Invalid API key."}, 401
            else:
                words = set(re.findall(r"\w+", query.lower()))
                ranked = sorted(docs, key=lambda d: -len(words & set(re.findall(r"\w+", (d["title"] + " " + d["text"]).lower()))))
                num = int(params.get("num", ["3"])[0])
                body = {"organic_results": [{"title": d["title"], "snippet": d["text"], "link": d.get("url", "")}
                                            for d in ranked[:num]]}
                code = 200
            send_json(self, body, code)

    serve(Handler, args.port_file)


if __name__ == "__main__":
    main()
