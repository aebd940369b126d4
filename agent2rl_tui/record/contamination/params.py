"""The check's parameters, apart from the numpy code that applies them (ngrams.py), so that
reading a result (result.py: the report, the run index, ``agent2rl-tui runs``) loads no numpy."""

N_TOKENS = 13
MIN_SHARED = 2
CHUNK_BYTES = 2**20
"""The piece of a stream hashed at once (scanner.py), and the batch of eval texts hashed together."""
