"""The transformers engine's KV cache across the turns of episodes.

An episode's prompt is its last prompt, the action the model wrote and the game's answer: it
only grows. Without a cache every turn computes the whole transcript again (405 prompt tokens
a turn for twc, thousands for ALFWorld's few-shot header), which is most of what a turn costs.
``TurnCache`` keeps, per episode, the token ids the engine saw and generated and their keys and
values, and builds the next call so that each row's longest common token prefix comes from the
cache and only the rest is computed:

    row i:  [pad]*(P - k_i) + cached_i[:k_i]  |  [pad]*(S - s_i) + new_i      (attention 0 on pads)

``P`` the longest cached prefix, ``S`` the longest new part; the positions come from the
attention mask (transformers numbers a row's tokens by its cumulative mask), so every real token
keeps the position it had, and the greedy text is the uncached text (tested turn by turn). A
cache is matched on token ids, not text: a tokenizer may merge across the old end of a prompt,
and the tokens generated after the stop string are in the cache but not in the next prompt.
Episodes not in a call are forgotten; the cache is bounded (``max_bytes``): an episode
forgotten past it computes its whole prompt again, as without a cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Layer = tuple[Any, Any]  # keys, values: (heads, tokens, dim) tensors of one row


@dataclass
class RowState:
    ids: list[int]
    layers: list[Layer]


@dataclass
class TurnCache:
    max_bytes: int = 2 << 30
    """Memory the kept keys and values may take (all episodes); past it the oldest are forgotten."""
    rows: dict[Any, RowState] = field(default_factory=dict)

    def prefix(self, key: Any, ids: list[int]) -> int:
        """How many of ``ids`` the cache of ``key`` holds (at least one token is left to compute)."""
        state = self.rows.get(key)
        if state is None:
            return 0
        old, k, most = state.ids, 0, min(len(state.ids), len(ids) - 1)
        while k < most and old[k] == ids[k]:
            k += 1
        return k

    def inputs(self, keys: list[Any], ids: list[list[int]], pad: int) -> tuple[Any, Any, Any, list[int]]:
        """(input_ids, attention_mask, past_key_values or None, the cached prefix of each row)."""
        import torch
        from transformers import DynamicCache

        cached = [self.prefix(key, row) for key, row in zip(keys, ids)]
        p = max(cached, default=0)
        s = max(len(row) - k for row, k in zip(ids, cached))
        input_ids, mask = [], []
        for row, k in zip(ids, cached):
            new = len(row) - k
            input_ids.append([pad] * (p - k) + row[:k] + [pad] * (s - new) + row[k:])
            mask.append([0] * (p - k) + [1] * k + [0] * (s - new) + [1] * new)
        cache = None
        if p:
            cache = DynamicCache()
            for layer in range(len(next(iter(self.rows.values())).layers)):
                ks, vs = [], []
                for key, k in zip(keys, cached):
                    if k:
                        kk, vv = self.rows[key].layers[layer]
                        kk, vv = kk[:, :k], vv[:, :k]
                    else:
                        kk, vv = self._empty(layer)
                    blank = kk.new_zeros(kk.shape[0], p - k, kk.shape[2])
                    ks.append(torch.cat([blank, kk], 1))
                    vs.append(torch.cat([blank, vv], 1))
                cache.update(torch.stack(ks), torch.stack(vs), layer)
        return torch.tensor(input_ids), torch.tensor(mask), cache, cached

    def _empty(self, layer: int) -> Layer:
        kk, vv = next(iter(self.rows.values())).layers[layer]
        return kk[:, :0], vv[:, :0]

    def keep(self, keys: list[Any], sequences: Any, mask: Any, past: Any, pad: int) -> None:
        """Remember each row's real tokens (the prompt and what was generated) and their keys and
        values, from ``generate``'s output."""
        import torch

        layers = [(layer.keys, layer.values) for layer in past.layers]
        length = layers[0][0].shape[2]  # the last generated token has no keys yet
        new = sequences[:, mask.shape[1]:]
        full = torch.cat([mask, (new != pad).long()], 1)[:, :length]
        for i, key in enumerate(keys):
            real = full[i].nonzero().squeeze(1)
            self.rows[key] = RowState(sequences[i, real].tolist(), [(K[i][:, real], V[i][:, real]) for K, V in layers])
        held = sum(row_bytes(r) for r in self.rows.values())
        while self.rows and held > self.max_bytes:
            held -= row_bytes(self.rows.pop(next(iter(self.rows))))

    def forget_others(self, keys: list[Any]) -> None:
        """Drop the episodes a call no longer plays (they ended)."""
        wanted = set(keys)
        self.rows = {k: v for k, v in self.rows.items() if k in wanted}

    def clear(self) -> None:
        self.rows = {}


def row_bytes(row: RowState) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in row.layers)
