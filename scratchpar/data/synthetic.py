"""A seeded random order-k Markov language whose cross-entropy floor is known exactly."""

from __future__ import annotations

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_int, check_positive, check_rows, check_step
from scratchpar.data.errors import DataError
from scratchpar.data.fresh import Fresh

MAX_TABLE_ENTRIES = 2**22
_TABLE_STREAM = 1
_BATCH_STREAM = 2


class SyntheticLanguage(Fresh):
    """Sentences ``BOS w1 … wk EOS`` from a random n-gram source, padded with ``PAD``.

    Token ids: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``, words ``3 … vocab_size-1``. The source is
    an order-k Markov chain: the next token depends on the last ``order`` tokens, where positions
    before the sentence start count as ``BOS``. ``table[c_1, …, c_k, w]`` (``c_k`` the most recent
    token) is ``P(w | c)``, a dense float64 array of shape ``(V,)*order + (V,)``. Every context's
    distribution puts ``eos_prob = 1/(mean_length+1)`` on ``EOS`` and the rest on the words as
    drawn from ``Dirichlet(concentration)`` (small concentration: peaked, hence learnable); ``PAD``
    and ``BOS`` are never produced. Sentence lengths are thus geometric with mean ``mean_length``
    words before truncation. Contexts holding ``PAD`` or ``EOS`` are never reached but are filled
    too, so the table stays dense.

    ``batch(step, b)`` is a pure function of ``(seed, step)``: a resumed run regenerates batch
    ``step`` without state, and ranks shard it by slicing rows. For language modelling take
    ``X = B[:, :-1]``, ``Y = B[:, 1:]`` and ignore targets equal to ``PAD``.
    """

    PAD = 0
    BOS = 1
    EOS = 2

    def __init__(
        self,
        vocab_size: int = 32,
        order: int = 2,
        seq_len: int = 64,
        concentration: float = 0.1,
        mean_length: float = 20.0,
        seed: int = 0,
    ):
        _check_arguments(vocab_size, order, seq_len, concentration, mean_length, seed)
        self.vocab_size = int(vocab_size)
        self.order = int(order)
        self.seq_len = int(seq_len)
        self.concentration = float(concentration)
        self.mean_length = float(mean_length)
        self.seed = int(seed)
        self.eos_prob = 1.0 / (self.mean_length + 1.0)
        self.n_contexts = self.vocab_size**self.order
        self.table = self._draw_table()  # (V,)*order + (V,)
        cdf = np.cumsum(self.table.reshape(self.n_contexts, self.vocab_size), axis=1)  # (C, V)
        self._cdf = cdf / cdf[:, -1:]  # (C, V), last column exactly 1
        # The all-BOS context that starts every sentence, as a flat index into the table rows.
        self._start = sum(self.BOS * self.vocab_size**j for j in range(self.order))
        self._floor = None

    def _draw_table(self) -> np.ndarray:
        """Dirichlet word distributions with ``EOS`` mixed in, one row per context."""
        V, n_words = self.vocab_size, self.vocab_size - 3
        alpha = np.full(n_words, self.concentration)  # (V-3,)
        words = rng(self.seed, _TABLE_STREAM).dirichlet(alpha, size=self.n_contexts)  # (C, V-3)
        table = np.zeros((self.n_contexts, V))  # (C, V)
        table[:, self.EOS] = self.eos_prob
        table[:, 3:] = (1.0 - self.eos_prob) * words
        return table.reshape((V,) * (self.order + 1))

    def batch(self, step: int, batch_size: int, rows=None) -> np.ndarray:
        """Batch ``step``: int32 ``(batch_size, seq_len + 1)``, one sentence per row (ids fit
        32 bits, half the bytes of NumPy's default integers); with ``rows = (start, stop)``,
        those rows of it alone, drawn at their cost.

        All rows are sampled together, position by position, by inverse CDF: the next token is
        the number of cumulative probabilities ``<= u`` for one uniform ``u`` per row and position.
        Each ``u`` takes one 64-bit output of the step's generator, row after row, so row
        ``start`` begins ``start · seq_len`` outputs in (PCG64's ``advance``, O(log n)).
        """
        step, batch_size = check_step(step, batch_size)
        start, stop = check_rows(rows, batch_size)
        V, T = self.vocab_size, self.seq_len
        g = rng(self.seed, _BATCH_STREAM, step)
        g.bit_generator.advance(start * T)
        u = g.random((stop - start, T))  # (b, T)
        out = np.zeros((stop - start, T + 1), dtype=np.int32)  # (b, T+1)
        out[:, 0] = self.BOS
        context = np.full(stop - start, self._start, dtype=np.int64)  # (b,)
        for t in range(T):  # a row runs on past its EOS; those tokens become PAD below
            token = (self._cdf[context] <= u[:, t, None]).sum(axis=1)  # (b,)
            out[:, t + 1] = token
            if t % 16 == 15 and (out[:, 1:t + 2] == self.EOS).any(axis=1).all():
                break  # every sentence has ended
            context = (context * V + token) % self.n_contexts  # drop the oldest token
        ended = np.cumsum(out[:, 1:-1] == self.EOS, axis=1) > 0  # (b, T-1) an EOS came before
        out[:, 2:][ended] = self.PAD
        return out

    def decode(self, ids) -> str:
        """``ids`` as words: ``w3 w17 .`` for ``BOS w3 w17 EOS``, a sentence per line; ``PAD``
        and ``BOS`` are not shown."""
        words = []
        for i in np.asarray(ids).ravel().tolist():
            if i == self.EOS:
                words.append(".\n")
            elif i > self.EOS:
                words.append(f"w{i} ")
        return "".join(words)

    def encode(self, text: str) -> np.ndarray:
        """The int64 ids of words written as :meth:`decode` writes them, after ``BOS``."""
        ids = [self.BOS]
        for word in text.split():
            if word == ".":
                ids.append(self.EOS)
            elif word[:1] == "w" and word[1:].isdigit() and 2 < int(word[1:]) < self.vocab_size:
                ids.append(int(word[1:]))
            else:
                raise DataError(f"{word!r} is not a word of this language: w3 … "
                                f"w{self.vocab_size - 1}, or . to end a sentence")
        return np.array(ids, dtype=np.int64)

    def bayes_risk(self) -> float:
        """The exact expected cross-entropy (nats per non-pad target) of the true source, its
        Bayes risk: the entropy floor no model beats.

        With ``X = B[:, :T]``, ``Y = B[:, 1:]`` the loss at position ``t`` counts iff the row is
        alive there (no ``EOS`` among tokens ``1 … t``). Its context ``c_t`` is the last ``order``
        tokens of ``B[:, :t+1]``. By the tower rule ``E[-log p(Y_t | c_t) | c_t, alive] = H(c_t)``,
        the entropy of the table row of ``c_t``. Let ``m_t(c) = P(alive at t, c_t = c)``; then

            m_0 = δ(all-BOS),   m_{t+1}(c') = Σ_{c, w ≠ EOS : shift(c, w) = c'} m_t(c) P(w | c),

        (the mass that emits ``EOS`` leaves) and the token-averaged loss over many batches
        converges to the ratio of expectations

            floor = Σ_{t<T} Σ_c m_t(c) H(c)  /  Σ_{t<T} Σ_c m_t(c).
        """
        if self._floor is None:
            self._floor = self._propagate()
        return self._floor

    def _propagate(self) -> float:
        V, C = self.vocab_size, self.n_contexts
        p = self.table.reshape(C, V)  # (C, V)
        safe = np.where(p > 0, p, 1.0)  # (C, V), 0 log 0 = 0
        entropy = -(p * np.log(safe)).sum(axis=1)  # (C,)
        go_on = p.copy()  # (C, V)
        go_on[:, self.EOS] = 0.0
        mass = np.zeros(C)  # (C,)
        mass[self._start] = 1.0
        loss, count = 0.0, 0.0
        for _ in range(self.seq_len):
            loss += mass @ entropy
            count += mass.sum()
            joint = mass[:, None] * go_on  # (C, V) = P(alive, c_t = c, next = w)
            mass = joint.reshape(V, C // V, V).sum(axis=0).reshape(C)  # forget oldest token
        return float(loss / count)


def table_fits(vocab_size: int, order: int) -> bool:
    """Whether the table's vocab_size**(order+1) entries stay within MAX_TABLE_ENTRIES (for
    vocab_size >= 4 and order >= 1; a large order is refused before its power is computed)."""
    return order <= 21 and vocab_size ** (order + 1) <= MAX_TABLE_ENTRIES


def _check_arguments(vocab_size, order, seq_len, concentration, mean_length, seed) -> None:
    vocab_size = check_int("vocab_size", vocab_size, 4)
    order = check_int("order", order, 1)
    if not table_fits(vocab_size, order):
        raise ValueError(
            f"vocab_size**(order+1) = {vocab_size}**{order + 1} exceeds {MAX_TABLE_ENTRIES} "
            "table entries; lower the vocabulary or the order"
        )
    check_int("seq_len", seq_len, 1)
    check_positive("concentration", concentration)
    check_positive("mean_length", mean_length)
    check_int("seed", seed, 0)
