"""A small OpenAI-compatible judge server, run as a real process by the tests.

It speaks ``POST /v1/chat/completions`` as an LLM judge API does for AlpacaEval's pairwise
prompts: it finds the two outputs in the prompt and prefers the longer one (the logistic
of the length difference in characters / ``--scale``). A ``weighted`` request (logprobs,
top_logprobs) gets one token with the top-5 logprobs; a request with a tool gets a
``make_partial_leaderboard`` tool call; without logprobs support (``--no-logprobs``) the
logprobs are left out, as from a judge that has none. Faults for the retry tests:
``--fail-first N`` answers the first N requests with HTTP 500, ``--reset-first N`` resets the
connection of the first N (a TCP RST, no answer, as an overloaded API's load balancer may), ``--fail-on TEXT`` always
fails requests whose prompt holds TEXT, ``--slow-on TEXT`` answers those after
``--delay`` seconds, ``--garbage-on TEXT`` answers them with prose. ``--key K`` requires
``Authorization: Bearer K``. ``GET /stats`` counts the chat requests; ``--log F`` appends each
request's settings (temperature, max_tokens, ...) to F. A DeepSearchQA verdict
request (gold and predicted answer) is answered "correct" when the predicted answer holds
every comma-separated gold item, else "incorrect" (``--verdict-text`` forces a reply). A
narrative request (its system message starts with "You summarise one iteration") is answered
"Iteration N: the agent ran TRAIN_TYPE. Its notes begin: FIRST LINE OF THE NOTES." from the
prompt's facts and notes, with a usage block (``--narrative-text`` forces a reply).

Usage: ``python tests/support/judge_server.py --port-file F [options]`` (binds 127.0.0.1, a free port).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from local_server import send_json, serve

OUTPUT = re.compile(r'"output": """(.*?)"""', re.S)
VERDICT = re.compile(r"Gold answer: (.*)\n\s*Predicted answer: (.*)\n")
NARRATE = "You summarise one iteration"
ITERATION = re.compile(r'"iteration": (\d+)')
TRAIN_TYPE = re.compile(r'"train_type": "([^"]*)"')
NOTES = re.compile(r"<notes>\n(.*)\n</notes>")


def narrate(prompt: str) -> str:
    """A narrative answer built from the prompt: the iteration, its train type, its notes' first line."""
    found = [rx.search(prompt) for rx in (ITERATION, TRAIN_TYPE, NOTES)]
    n, train, quoted = (m.group(1) if m else "?" for m in found)
    try:  # the notes come as one JSON string
        notes = (json.loads(quoted) or "?").splitlines()[0]
    except (ValueError, IndexError):
        notes = "?"
    return f"Iteration {n}: the agent ran {train}. Its notes begin: {notes}"


class Judge:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.requests = 0

    def count(self) -> int:
        with self.lock:
            self.requests += 1
            return self.requests

    def p_first(self, prompt: str) -> float:
        outputs = OUTPUT.findall(prompt)
        if len(outputs) != 2:
            return 0.5
        return 1.0 / (1.0 + math.exp(-(len(outputs[0]) - len(outputs[1])) / self.args.scale))

    def answer(self, body: dict, prompt: str) -> dict:
        p = min(max(self.p_first(prompt), 1e-6), 1 - 1e-6)
        first_wins = p >= 0.5
        if "tools" in body:
            ranks = [{"model": "m", "rank": 1 if first_wins else 2}, {"model": "M", "rank": 2 if first_wins else 1}]
            ranks.sort(key=lambda r: r["rank"])
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_0", "type": "function",
                "function": {"name": "make_partial_leaderboard", "arguments": json.dumps({"ordered_models": ranks})}}]}
            return {"index": 0, "message": message, "finish_reason": "tool_calls"}
        token = "m" if first_wins else "M"
        choice = {"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length"}
        if body.get("logprobs") and not self.args.no_logprobs:
            tops = [{"token": "m", "logprob": math.log(p)}, {"token": "M", "logprob": math.log(1 - p)},
                    {"token": "Both", "logprob": -15.0}, {"token": "The", "logprob": -16.0},
                    {"token": "Based", "logprob": -17.0}]
            tops.sort(key=lambda t: -t["logprob"])
            choice["logprobs"] = {"content": [{"token": token, "logprob": max(t["logprob"] for t in tops),
                                               "top_logprobs": tops}]}
        return choice


def make_handler(judge: Judge) -> type[BaseHTTPRequestHandler]:
    args = judge.args

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _send(self, code: int, data: dict) -> None:
            send_json(self, data, code)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.endswith("/stats"):
                self._send(200, {"requests": judge.requests})
            elif self.path.endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": args.model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if args.key and self.headers.get("Authorization") != f"Bearer {args.key}":
                self._send(401, {"error": {"message": "invalid api key"}})
                return
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            if body.get("model") != args.model:
                self._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
                return
            n = judge.count()
            if args.log:  # each request's decoding, for the tests that check how the judge is asked
                with args.log.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps({k: v for k, v in body.items() if k != "messages"}) + "\n")
            prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
            if n <= args.reset_first:  # close with SO_LINGER 0: the client reads "connection reset by peer"
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if n <= args.fail_first or (args.fail_on and args.fail_on in prompt):
                self._send(500, {"error": {"message": "judge overloaded"}})
                return
            if args.slow_on and args.slow_on in prompt:
                time.sleep(args.delay)
            messages = body.get("messages") or [{}]
            if str(messages[0].get("content", "")).startswith(NARRATE):
                text = args.narrative_text or narrate(prompt)
                self._send(200, {"id": f"cmpl-{n}", "object": "chat.completion", "model": args.model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4}})
                return
            verdict = VERDICT.search(prompt)
            if verdict:  # a DeepSearchQA answer: correct when it holds every gold item
                gold, predicted = (t.strip().lower() for t in verdict.groups())
                text = args.verdict_text or ("correct" if all(g.strip() in predicted for g in gold.split(","))
                                             else "incorrect")
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            elif args.garbage_on and args.garbage_on in prompt:
                choice = {"index": 0, "message": {"role": "assistant", "content": "Both are fine, really."}}
            else:
                choice = judge.answer(body, prompt)
            self._send(200, {"id": f"cmpl-{n}", "object": "chat.completion", "model": args.model,
                             "choices": [choice], "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 1}})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--model", default="local-judge")
    parser.add_argument("--scale", type=float, default=40.0)
    parser.add_argument("--no-logprobs", action="store_true")
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--reset-first", type=int, default=0)
    parser.add_argument("--fail-on")
    parser.add_argument("--slow-on")
    parser.add_argument("--garbage-on")
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--key")
    parser.add_argument("--verdict-text", help="answer every verdict request with this text")
    parser.add_argument("--narrative-text", help="answer every narrative request with this text")
    parser.add_argument("--log", type=Path, help="append each request's settings (not its messages) as JSON lines")
    args = parser.parse_args()
    serve(make_handler(Judge(args)), args.port_file)


if __name__ == "__main__":
    main()
