"""The meter: a loopback proxy between a run's agent and its driver API that records every call.

What an agent CLI says about its own tokens is not a record: some report usage only at their
end (a run killed at its deadline loses it), some count it wrongly, none can be made to stop at
a budget. The meter sits on 127.0.0.1 where the agent's base URL points, forwards each request
to the real endpoint (or the scripted driver) and streams the answer back as it comes, chunk by
chunk, while it reads the usage from the bytes passing (``protocols.usage_reader``). Each call
becomes one row of ``llm_calls`` in run.db: protocol, endpoint, model, status, latency, tokens
(input, output, cached, cache writes, reasoning), cost from the price table (``prices``),
whether the reply reached its own end, and why not.

- The key (``keys``): the meter holds the run's driver keys and the agent gets a per-run token
  for each, valid only here; the meter swaps it for the key on the way out and refuses any
  request without one (401). A run whose agent signs in with a login of its own gives the meter
  nothing to hold: its credential passes through, and the ``meter`` event says so. No key or
  token is written (paths are recorded without their query, error texts with every credential
  replaced by ``[key]``).
- Routes: the four APIs' generation and token-count calls and model listings are forwarded;
  any other route is answered 404 naming it, recorded, never forwarded.
- Headers pass through both ways, hop-by-hop ones dropped. The upstream is asked for identity encoding so the
  usage can be read; a gzip or deflate reply is still read (decompressed beside the bytes that
  pass unchanged).
- A Chat Completions stream that did not ask for usage is made to (``fmt.ask_for_usage``): its
  reply then ends with one more chunk (``choices: []`` and the usage), which the OpenAI clients
  read as the usage chunk they asked for.
- Memory is bounded whatever the upstream sends: replies pass in 64 KiB reads, the reader keeps
  at most one bounded event (``usage``), an error body is kept to 64 KiB; a request body is
  read whole to 64 MiB (413 past it), and at most 64 calls are handled at once.
- Caps (`Caps`): once the run's tokens (input + output, every recorded call) or its cost reach
  the cap, each further generation call is answered 429 in the API's own error shape, with
  ``x-should-retry: false`` (the Anthropic and OpenAI SDKs then do not retry; OpenAI's shape
  says ``insufficient_quota``), and recorded as refused. A call's tokens count before its
  reply's last bytes reach the agent, so the next call is checked against them; a reply the
  agent stops reading is read from the upstream to its end and counted all the same. Under
  concurrency each call reserves its most before it goes (``accounting``): the calls under way
  never promise more than the room left, and only a call alone can pass a cap.
- The upstream unreachable: 502 in the API's error shape, recorded.
- Stopped (SIGTERM, or `Meter.stop`): no new connections; calls under way get a few seconds to
  end, then each is recorded as it stood (tokens as far as the reply came, ``complete`` 0).

Rows are written by one thread through `record.store.RunStore` (each row its own short
transaction, a busy timeout: the supervisor and the grader write the same run.db).

As a process (the first line of stdout is its base URL)::

    python -m agent2rl_tui.llm.meter --run-dir DIR --upstream URL [--port 0] [--max-tokens N]
                                     [--max-cost USD] [--prices FILE]

In process::

    with serve_meter(run_dir, upstream_url, caps=Caps(max_tokens=10_000)) as meter:
        meter.url        # base URL: http://127.0.0.1:PORT (point the agent's base-URL variable here)
        meter.flush()    # wait until every finished call is in run.db

One job a module: ``upstream`` (where calls are forwarded: the upstream URL, the headers that
cross, the kept-alive connection), ``handler`` (the HTTP side: a request in, the reply relayed,
the limits on hostile input), ``accounting`` (usage, prices, caps, the rows and the thread that
writes them), ``bodies`` (request JSON, compressed replies, error shapes), ``proxy`` (the `Meter`
that holds them together, and `serve_meter`), ``__main__`` (the process).
"""

from agent2rl_tui.llm.meter.accounting import Caps
from agent2rl_tui.llm.meter.keys import KeyRing
from agent2rl_tui.llm.meter.proxy import Meter, serve_meter
from agent2rl_tui.llm.meter.upstream import Upstream

__all__ = ["Caps", "KeyRing", "Meter", "Upstream", "serve_meter"]
