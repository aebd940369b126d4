"""The grader service: the HTTP API of docs/architecture.md on 127.0.0.1, one evaluation at a time.

Every ``POST /submit`` that reaches the server becomes a row in run.db before anything
else happens, so no submission is lost: bad input is recorded as ``rejected`` with the
error the agent got back, accepted ones are ``queued`` and then evaluated in order by a
single consumer, in one eval worker process that stays up for the run with its engine warm
(a worker that dies or times out is replaced), each evaluation under a timeout. The
baseline (the base model, submission 0) goes through the same path when the server starts,
before the agent's budget begins. All routes live under a per-run secret
path prefix, so only the run's agent (who got the URL) can submit.

Run as ``python -m agent2rl_tui.grader.server --run-dir DIR (--fd N | --port N)``, with
the secret in ``$AGENT2RL_GRADER_SECRET``. Heavy imports stay out of this process.

One job a module: ``config`` (what the grader is set up with), ``validation`` (is a
submission acceptable), ``workers`` (the eval worker processes), ``queue`` (the queue, its
consumer and the answers), ``routes`` (the HTTP endpoints), ``__main__`` (the entry point).
"""
