"""A small WebShop store, run as a real process by the tests: AgentGym's environment-server protocol.

A catalogue of five products and four goals (sessions 0-3), pages and actions in WebShop's
text mode: the search page, a results page listing products, an item page with option
buttons and Buy Now. Buying ends the episode with WebShop's reward (``get_reward``'s shape):
``r_type * (attributes matched + options matched + price ok) / (attributes + options + 1)``,
with ``r_type`` 1 for the goal's product type and 0.1 for another, so a near miss gets
partial reward and only the goal's product with its options and price gets 1.0.

Usage: ``python tests/support/webshop_server.py --port-file F``.
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from local_server import send_json, serve

PRODUCTS = {
    "B001": {"name": "Cotton T-Shirt", "type": "t-shirt", "price": 19.99, "attributes": ["cotton", "short sleeve"],
             "options": {"color": ["red", "blue"], "size": ["small", "large"]}},
    "B002": {"name": "Polyester T-Shirt", "type": "t-shirt", "price": 12.50, "attributes": ["polyester"],
             "options": {"color": ["red", "black"], "size": ["large"]}},
    "B003": {"name": "Leather Wallet", "type": "wallet", "price": 45.00, "attributes": ["leather", "slim", "rfid blocking"],
             "options": {"color": ["brown", "black"]}},
    "B004": {"name": "Running Shoes", "type": "shoes", "price": 79.00, "attributes": ["lightweight", "mesh"],
             "options": {"size": ["9", "10"]}},
    "B005": {"name": "Canvas Wallet", "type": "wallet", "price": 15.00, "attributes": ["slim"],
             "options": {"color": ["black"]}},
}
GOALS = [
    {"text": "i need a red cotton short sleeve t-shirt in size large, and price lower than 30.00 dollars",
     "type": "t-shirt", "attributes": ["cotton", "short sleeve"], "options": {"color": "red", "size": "large"},
     "price": 30.0},
    {"text": "find me a slim rfid blocking leather wallet in brown, and price lower than 50.00 dollars",
     "type": "wallet", "attributes": ["leather", "slim", "rfid blocking"], "options": {"color": "brown"},
     "price": 50.0},
    {"text": "i want lightweight mesh running shoes in size 10, and price lower than 100.00 dollars",
     "type": "shoes", "attributes": ["lightweight", "mesh"], "options": {"size": "10"}, "price": 100.0},
    {"text": "i need a black polyester t-shirt in size large, and price lower than 15.00 dollars",
     "type": "t-shirt", "attributes": ["polyester"], "options": {"color": "black", "size": "large"}, "price": 15.0},
]


def reward(goal: dict, asin: str, chosen: dict[str, str]) -> float:
    product = PRODUCTS[asin]
    r_type = 1.0 if product["type"] == goal["type"] else 0.1
    attrs = sum(a in product["attributes"] for a in goal["attributes"])
    opts = sum(chosen.get(k) == v for k, v in goal["options"].items())
    price = 1 if product["price"] <= goal["price"] else 0
    return round(r_type * (attrs + opts + price) / (len(goal["attributes"]) + len(goal["options"]) + 1), 4)


class Session:
    def __init__(self) -> None:
        self.goal = GOALS[0]
        self.page, self.results, self.asin, self.chosen = "search", [], None, {}

    def instruction(self) -> str:
        return f"Instruction: {self.goal['text']}"

    def observation(self) -> str:
        head = f"WebShop [SEP] Instruction: [SEP] {self.goal['text']}"
        if self.page == "search":
            return f"{head} [SEP] Search"
        if self.page == "results":
            listed = " [SEP] ".join(f"{a} [SEP] {PRODUCTS[a]['name']} [SEP] ${PRODUCTS[a]['price']:.2f}"
                                    for a in self.results)
            return f"{head} [SEP] Back to Search [SEP] Page 1 (Total results: {len(self.results)}) [SEP] {listed}"
        product = PRODUCTS[self.asin]
        options = " [SEP] ".join(f"{k} [SEP] " + " [SEP] ".join(v) for k, v in product["options"].items())
        return (f"{head} [SEP] Back to Search [SEP] < Prev [SEP] {options} [SEP] {product['name']} [SEP] "
                f"Price: ${product['price']:.2f} [SEP] Rating: N.A. [SEP] Description [SEP] Buy Now")

    def available(self) -> dict:
        if self.page == "search":
            return {"has_search_bar": True, "clickables": ["search"]}
        if self.page == "results":
            return {"has_search_bar": False, "clickables": ["back to search"] + [a.lower() for a in self.results]}
        options = [o for values in PRODUCTS[self.asin]["options"].values() for o in values]
        return {"has_search_bar": False, "clickables": ["back to search", "< prev", *options, "description", "buy now"]}

    def step(self, action: str) -> tuple[str, float, bool]:
        verb, _, arg = action.partition("[")
        arg = arg.rstrip("]").strip().lower()
        if verb == "search" and self.page == "search":
            words = set(arg.split())
            self.results = sorted(PRODUCTS, key=lambda a: -len(words & set(
                (PRODUCTS[a]["name"] + " " + " ".join(PRODUCTS[a]["attributes"])).lower().split())))[:3]
            self.page = "results"
        elif verb == "click" and arg in self.available()["clickables"]:
            if arg == "back to search":
                self.page, self.asin, self.chosen = "search", None, {}
            elif self.page == "results":
                self.page, self.asin, self.chosen = "item", arg.upper(), {}
            elif arg == "< prev":
                self.page = "results"
            elif arg == "buy now":
                r = reward(self.goal, self.asin, self.chosen)
                return (f"Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] Purchased [SEP] "
                        f"{self.asin} [SEP] Reward [SEP] Your score (min 0.0, max 1.0) [SEP] {r}"), r, True
            elif arg != "description":
                key = next(k for k, v in PRODUCTS[self.asin]["options"].items() if arg in v)
                self.chosen[key] = arg
        else:
            return "Invalid action!", 0.0, False
        return self.observation(), 0.0, False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    sessions: dict[int, Session] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _send(self, data: object, code: int = 200) -> None:
            send_json(self, data, code)

        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlparse(self.path)
            idx = int(urllib.parse.parse_qs(url.query).get("env_idx", ["-1"])[0])
            session = sessions.get(idx)
            if session is None:
                self._send({"detail": "no such env"}, 404)
            elif url.path == "/available_actions":
                self._send(session.available())
            elif url.path == "/instruction_text":
                self._send(session.instruction())
            elif url.path == "/observation":
                self._send(session.observation())
            else:
                self._send({"detail": "not found"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/create":
                with lock:
                    idx = len(sessions)
                    sessions[idx] = Session()
                self._send(idx)
                return
            session = sessions.get(int(body.get("env_idx", -1)))
            if session is None:
                self._send({"detail": "no such env"}, 404)
            elif self.path == "/reset":
                session.__init__()
                session.goal = GOALS[int(body.get("session_id") or 0) % len(GOALS)]
                self._send([session.observation(), None])
            elif self.path == "/step":
                state, r, done = session.step(str(body["action"]))
                self._send({"state": state, "reward": r, "done": done, "info": None})
            elif self.path == "/close":
                self._send({"closed": True})
            else:
                self._send({"detail": "not found"}, 404)

    serve(Handler, args.port_file)


if __name__ == "__main__":
    main()
