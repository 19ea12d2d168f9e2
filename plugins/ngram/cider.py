"""CIDEr-D exactly as coco-caption's ``Cider`` computes it, and plain CIDEr (Vedantam et al.).

Weights are tf · (ln N − ln max(1, df)) per n-gram of orders 1-4. CIDEr-D clips the
candidate weight (min(g_c, g_r) · g_r), multiplies by a Gaussian penalty on the difference of
the bigram counts (σ = 6) and by 10; plain CIDEr is the cosine similarity, also × 10 (as in
``vrama91/cider``). The document frequencies come from ``df``: ``"corpus"`` (the references of
the scored call, coco-caption's behaviour) or a file written by :meth:`CiderD.save_df`;
:meth:`CiderD.fit` fixes them from another corpus.
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from capmetrics import Scores, Tokenizer
from capmetrics.errors import MetricError
from capmetrics.io.digests import file_digest
from capmetrics.io.identity import Identity
from capmetrics.plugins.ngram.counts import (
    PTB,
    Batch,
    BatchDistance,
    Matches,
    Ngrams,
    Sentences,
    gram_offsets,
    make_batch,
    match,
    ngrams,
    set_frequencies,
)
from capmetrics.plugins.ngram.dfcounts import (
    MAX_N,
    DfCounts,
    compose,
    counts_digest,
    digits,
    fits_int64,
    from_strings,
    merge,
    strings_digest,
)
from capmetrics.plugins.ngram.inttable import IntTable
from capmetrics.plugins.ngram.pyfloat import py_square, sum_left_to_right

DF_FORMAT = "capmetrics-cider-df"
SIGMA = 6.0


def length_penalty(delta: np.ndarray) -> np.ndarray:
    """coco-caption's ``np.e ** (-(delta ** 2) / (2 * sigma ** 2))`` of integer length differences,
    computed as Python computes it (C ``pow``), once per difference between the smallest and
    the largest (a few dozen), read back by index."""
    delta = np.asarray(delta, dtype=np.int64)
    if delta.size == 0:
        return np.zeros(np.shape(delta))
    low, high = int(delta.min()), int(delta.max())
    if high - low > 4 * delta.size:  # sparse differences: once per distinct one
        distinct, inverse = np.unique(delta, return_inverse=True)
        values, index = distinct.tolist(), inverse.reshape(np.shape(delta))
    else:
        values, index = range(low, high + 1), delta - low
    exponents = [-(float(d) ** 2) / (2 * SIGMA**2) for d in values]
    penalties = np.fromiter(map(pow, repeat(np.e), exponents), np.float64, len(exponents))
    return penalties[index]


def _open(path: Path, mode: str) -> Any:
    return (
        gzip.open(path, mode + "t", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(mode, encoding="utf-8")
    )


def _df_digest(df: Mapping[str, int], n_images: int) -> str:
    """The digest of a fitted table (:func:`~capmetrics.plugins.ngram.dfcounts.digest`: the same
    for the same frequencies however they were counted), read from the integer keys when the
    table came as an index (no n-gram strings are made)."""
    if isinstance(df, IndexedDf):
        return df.index.digest(n_images)
    return strings_digest(df, n_images)


class DfIndex:
    """Fixed document frequencies in a hash table of integer keys, for vectorised look-ups.

    An n-gram's key is its words' ids in base ``base``, ids counted from 1, so the keys of
    different orders differ (an order-n key lies in [base^(n-1), base^n)). Tables whose
    ``base ** MAX_N`` overflows int64 (over ~55,000 distinct words) fall back to string look-ups.
    """

    def __init__(self, df: dict[str, int]) -> None:
        """The index of a table of n-gram strings (words numbered in order of first appearance)."""
        words, rows, counts = from_strings(df)
        base = len(words) + 1
        keyed = (
            [
                (compose(r, base), c) for r, c in zip(rows, counts) if r.shape[1] <= MAX_N
            ]  # longer: never looked up
            if fits_int64(len(words))
            else None
        )
        self._set(df, words, keyed)

    @classmethod
    def from_counts(cls, counts: DfCounts) -> DfIndex:
        """The exact index of summed parts (:func:`~capmetrics.plugins.ngram.dfcounts.merge`),
        without n-gram strings (read back with :meth:`decoded` when asked for)."""
        index = cls.__new__(cls)
        index._set(None, counts.words, counts.keyed)
        return index

    def _set(
        self,
        df: dict[str, int] | None,
        words: Sequence[str],
        keyed: Sequence[tuple[np.ndarray, np.ndarray]] | None,
    ) -> None:
        """Words numbered from 1 in order, and each order's keys and counts (None: the keys
        would overflow int64, so look-ups go by the strings of ``df``)."""
        self.ids = {w: i + 1 for i, w in enumerate(words)}
        self.base, self.df, self.exact = len(self.ids) + 1, df, keyed is not None
        if keyed is None:
            return
        keys = np.concatenate([k for k, _ in keyed]) if keyed else np.zeros(0, np.int64)
        values = np.concatenate([c for _, c in keyed]) if keyed else np.zeros(0, np.int64)
        self.table = IntTable(
            keys, values.astype(np.int64), distinct=True
        )  # distinct grams, distinct keys

    def counts(self, n_images: int) -> DfCounts:
        """An exact index's table as :class:`~capmetrics.plugins.ngram.dfcounts.DfCounts`."""
        keys, values = self.table.items()
        order = np.searchsorted(
            [self.base**n for n in range(1, MAX_N + 1)], keys, side="right"
        )  # 0: unigrams
        return DfCounts(
            list(self.ids), [(keys[order == n], values[order == n]) for n in range(MAX_N)], n_images
        )

    def digest(self, n_images: int) -> str:
        """:func:`~capmetrics.plugins.ngram.dfcounts.counts_digest` of an exact index."""
        return counts_digest(self.counts(n_images))

    def __getstate__(self) -> dict[str, Any]:
        # an exact index never reads its n-gram strings: they stay behind (a pickled, fitted
        # CiderD rebuilds them from the keys if it ever needs them; see IndexedDf)
        state = self.__dict__.copy()
        if self.exact:
            state["df"] = None
        return state

    def decoded(self) -> dict[str, int]:
        """The n-gram strings and counts that an exact index holds, read back from its keys."""
        words = np.array(["", *self.ids], dtype=object)  # id -> word, id 0 unused
        out: dict[str, int] = {}
        for n, (keys, counts) in enumerate(self.counts(0).keyed, 1):
            grams = words[digits(keys, self.base, n)]
            joined = grams[:, 0]
            for t in range(1, n):
                joined = joined + " " + grams[:, t]
            out.update(zip(joined.tolist(), counts.tolist()))
        return out

    def lookup(self, sentences: Sentences, tables: Sequence[Ngrams]) -> np.ndarray:
        """The document frequency of each n-gram id of ``tables``, one table after the other
        (0 when absent)."""
        if not self.exact:
            strings = np.concatenate([table.strings(sentences) for table in tables])
            return np.fromiter(
                map(self.df.get, strings, repeat(0)), dtype=float, count=len(strings)
            )
        ids = np.fromiter(
            map(self.ids.get, sentences.vocab, repeat(0)), np.int64, len(sentences.vocab)
        )
        word = ids[sentences.ids]
        word = np.append(word, np.zeros(len(tables), np.int64))  # windows past the end: unused
        keys, at = [], word  # at[p]: the key of the n-gram starting at token p
        for n, table in enumerate(tables, 1):
            if n > 1:
                at = at[:-1] * self.base + word[n - 1 :]
            keys.append(at[table.first])
        first_word = word[np.concatenate([table.first for table in tables])]
        # an unknown word (id 0) first would make a shorter n-gram's key: such n-grams are absent
        return self.table.get(np.where(first_word > 0, np.concatenate(keys), -1))


class IndexedDf(Mapping[str, int]):
    """A fitted table of document frequencies that came without its strings: a pickled, fitted
    :class:`CiderD` sends only its exact :class:`DfIndex`, whose arrays (un)pickle as bytes, where
    the 445,000 strings of a 20,000-item fit took 0.2 s to pickle and again to unpickle on every
    worker. Scoring uses the index; whatever reads the strings (the signature, ``save_df``) gets
    them decoded from the index's keys, once."""

    def __init__(self, index: DfIndex) -> None:
        self.index = index
        self._strings: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        if self._strings is None:
            self._strings = self.index.decoded()
        return self._strings

    def __getitem__(self, gram: str) -> int:
        return self._table()[gram]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __reduce__(self) -> tuple[Any, ...]:
        return (IndexedDf, (self.index,))


#: Indexes of fixed df tables, keyed by the very table (held with its entry, compared by ``is``).
_DF_INDEXES: dict[Identity, DfIndex] = {}


def _df_index(df: dict[str, int]) -> DfIndex:
    """The index of a fixed df table, built once per table object."""
    key = Identity(df)
    cached = _DF_INDEXES.get(key)
    if cached is None:
        if len(_DF_INDEXES) > 8:
            _DF_INDEXES.clear()
        cached = _DF_INDEXES[key] = DfIndex(df)
    return cached


class CiderD(BatchDistance):
    """CIDEr-D as coco-caption's ``Cider`` (clipping, length penalty σ = 6, × 10).

    Args:
        tokenizer: turns texts into tokens.
        df: ``"corpus"`` for document frequencies from the references of each call, or the path
            of a df file (JSON, optionally gzipped) written by :meth:`save_df`.
    """

    name = "cider-d"
    distance_offset = 10.0
    clipped: ClassVar[bool] = True

    path_params = ("df",)

    def __init__(self, tokenizer: Tokenizer = PTB, df: str = "corpus") -> None:
        self.tokenizer = tokenizer
        self.df = df

    # -- document frequencies (capmetrics.components.protocols: FitsInParts and CountsInParts) -----
    def fit(self, references: Sequence[Sequence[str]]) -> CiderD:
        """Fix the document frequencies from ``references`` (one reference list per image).

        With ``df`` naming a file, the file's frequencies stay in force and this is a no-op, so
        a statistic that fits its distance on the evaluated corpus keeps the user's choice.
        The look-up index is built here too, from the counted arrays (workers forked or sent
        this object after the fit do not build it again); the n-gram strings are made only if
        something reads them (``save_df``, ``dict(df_)``).
        """
        if self.df != "corpus":
            return self
        return self.fit_counts([self.count_state(references)])

    def count_state(
        self, references: Sequence[Sequence[str]]
    ) -> DfCounts | tuple[dict[str, int], int]:
        """:meth:`fit_state` as integer keys (:class:`~capmetrics.plugins.ngram.dfcounts.DfCounts`:
        a few arrays, cheap to send back from a worker); the string table itself when its keys
        would overflow int64. :meth:`fit_counts` sums parts."""
        state, counts = self._count(references, indexed=True, strings=False)
        return counts if counts is not None else state

    def fit_counts(self, parts: Iterable[DfCounts | tuple[dict[str, int], int]]) -> CiderD:
        """Fix the document frequencies to the sum of :meth:`count_state` parts (the same
        table as :meth:`fit` on all their references; a no-op when ``df`` names a file)."""
        if self.df != "corpus":
            return self
        parts = list(parts)
        total = merge(parts) if all(isinstance(p, DfCounts) for p in parts) else None
        if total is None:  # too many words for integer keys: sum the string tables
            return self.fit_states(
                [
                    p
                    if not isinstance(p, DfCounts)
                    else (DfIndex.from_counts(p).decoded(), p.n_images)
                    for p in parts
                ]
            )
        index = DfIndex.from_counts(total)
        self.df_, self.n_images_ = IndexedDf(index), total.n_images
        self._index = (self.df_, index)
        return self

    def __getstate__(self) -> dict[str, Any]:
        # A fitted table whose exact index exists goes as the index alone (see IndexedDf).
        state = self.__dict__.copy()
        fitted = state.get("_index")
        if (
            fitted is not None
            and fitted[1] is not None
            and fitted[0] is state.get("df_")
            and fitted[1].exact
            and not isinstance(fitted[0], IndexedDf)
        ):
            df = IndexedDf(fitted[1])
            state["df_"], state["_index"] = df, (df, fitted[1])
        return state

    def fit_state(self, references: Sequence[Sequence[str]]) -> tuple[dict[str, int], int]:
        """The document frequencies of one part of a corpus's references and the part's image
        count: :meth:`fit_states` sums the parts (a file streamed in chunks, chunks on workers)."""
        return self._count(references, indexed=False)[0]

    def _count(
        self, references: Sequence[Sequence[str]], indexed: bool, strings: bool = True
    ) -> tuple[tuple[dict[str, int], int], DfCounts | None]:
        """:meth:`fit_state` (its string table when ``strings``) and, if ``indexed`` and the
        keys fit in int64, the same frequencies as integer keys."""
        batch = make_batch(
            self.tokenizer, [""] * len(references), references, self.split, self.name
        )
        sentences = batch.sentences
        base = len(sentences.vocab) + 1
        indexed = indexed and fits_int64(len(sentences.vocab))
        df: dict[str, int] = {}
        keyed = []
        for table in ngrams(sentences, MAX_N):
            counts = set_frequencies(batch, match(batch, table, set_grams=True), table.n_grams)
            present = np.flatnonzero(counts)
            if strings or not indexed:
                df.update(
                    zip(
                        table.strings(sentences)[present].tolist(),
                        counts[present].astype(int).tolist(),
                    )
                )
            if indexed:  # word ids 1.. in the batch's vocabulary order
                key = np.zeros(len(present), dtype=np.int64)
                for t in range(table.order):
                    key = key * base + sentences.ids[table.first[present] + t] + 1
                keyed.append((key, counts[present].astype(np.int64)))
        return (df, len(references)), DfCounts(
            list(sentences.vocab), keyed, len(references)
        ) if indexed else None

    @staticmethod
    def merge_fit_states(
        states: Iterable[tuple[dict[str, int], int]],
    ) -> tuple[dict[str, int], int]:
        """The sum of parts' :meth:`fit_state` (it may reuse the first part's dict)."""
        total: dict[str, int] | None = None
        images = 0
        for df, count in states:
            if total is None:
                total = df
            else:
                for gram, n in df.items():
                    total[gram] = total.get(gram, 0) + n
            images += count
        return (total if total is not None else {}), images

    def fit_states(self, states: Iterable[tuple[dict[str, int], int]]) -> CiderD:
        """Fix the document frequencies to the sum of the parts' :meth:`fit_state` (the same as
        :meth:`fit` on all their references; a no-op when ``df`` names a file)."""
        if self.df != "corpus":
            return self
        self.df_, self.n_images_ = self.merge_fit_states(states)
        return self

    def merge_scores(self, parts: Sequence[tuple[Scores, Any]]) -> Scores:
        """Joined parts; with ``df="corpus"`` the parts were scored with the frequencies of the
        whole corpus (fitted by :meth:`fit_states`), which is what ``corpus`` means."""
        merged = super().merge_scores(parts)
        if self.df == "corpus" and parts:
            merged.details["df"] = "corpus"
        return merged

    def save_df(self, path: str | Path) -> None:
        """Write the fixed document frequencies (fitted or loaded) to a JSON file (``.gz``:
        gzipped)."""
        fixed = self.fixed_df()
        if fixed is None:
            raise MetricError(
                f"{self.spec}: no document frequencies to save; call fit(references) first"
            )
        df, n_images = fixed
        data = {
            "format": DF_FORMAT,
            "version": 1,
            "n_images": n_images,
            "max_n": MAX_N,
            "tokenizer": self.tokenizer.spec,
            "df": df if isinstance(df, dict) else dict(df),
        }
        with _open(Path(path), "w") as f:
            json.dump(data, f, ensure_ascii=False)

    def fixed_df(self) -> tuple[dict[str, int], int] | None:
        """The fixed document frequencies and image count (fitted, else from ``df``), or None."""
        if hasattr(self, "df_"):
            return self.df_, self.n_images_
        if self.df == "corpus":
            return None
        loaded = getattr(self, "_loaded", None)
        if loaded is None or loaded[0] != self.df:
            loaded = (self.df, *self._read_df(Path(self.df)))
            self._loaded = loaded
        return loaded[1], loaded[2]

    def _read_df(self, path: Path) -> tuple[dict[str, int], int]:
        try:
            with _open(path, "r") as f:
                data = json.load(f)
        except (OSError, ValueError, RecursionError) as err:  # RecursionError: hostile nesting
            raise MetricError(f"{self.name}: cannot read the df file {path}: {err}") from err
        if (
            not isinstance(data, dict)
            or data.get("format") != DF_FORMAT
            or not {"df", "n_images"} <= data.keys()
        ):
            raise MetricError(
                f"{self.name}: {path} is not a capmetrics CIDEr df file (format {DF_FORMAT!r})"
            )
        return data["df"], int(data["n_images"])

    def signature_extra(self) -> dict[str, str]:
        if hasattr(self, "df_"):
            return {"df": f"fitted:{_df_digest(self.df_, self.n_images_)[:16]}"}
        if self.df != "corpus":
            return {"df": "sha256:" + file_digest(self.df)[:16]}
        return {}

    def weights(
        self,
        batch: Batch,
        tables: Sequence[Ngrams],
        m: Matches,
        fixed: tuple[dict[str, int], int] | None,
    ) -> np.ndarray:
        """ln N − ln max(1, df) for each n-gram (global ids of ``m``): fixed df, else the batch's
        own."""
        if fixed is not None:
            table_df, n_images = fixed
            fitted = getattr(self, "_index", None)
            index = (
                fitted[1] if fitted is not None and fitted[0] is table_df else _df_index(table_df)
            )
            df = index.lookup(batch.sentences, tables)
        else:
            df, n_images = set_frequencies(batch, m, int(gram_offsets(tables)[-1])), len(batch)
        return np.log(float(n_images)) - np.log(np.maximum(1.0, df))

    # -- scores -----------------------------------------------------------------------------
    def order_values(self, batch: Batch, fixed: tuple[dict[str, int], int] | None) -> np.ndarray:
        """Similarity of each item's candidate with each reference, per order (n x width x 4).

        The four orders go through one join (:func:`match` over all tables) and one set of
        array operations, with n-gram ids global across orders."""
        n_sent, n, width = len(batch.sentences), len(batch), batch.width
        tables = ngrams(batch.sentences, MAX_N)
        offsets = gram_offsets(tables)
        m = match(batch, tables, set_grams=fixed is None)
        w = self.weights(batch, tables, m, fixed)
        # the tf-idf norm of every sentence at every order (MAX_N x n_sent)
        order_sent = np.concatenate([t.sent + k * n_sent for k, t in enumerate(tables)])
        # (tf · w)² per entry: most entries occur once (tf = 1, so tf · w is w itself), and their
        # squares are read from the squares of the weights, one per n-gram
        gram = np.concatenate([t.gram + off for t, off in zip(tables, offsets)])
        count = np.concatenate([t.count for t in tables])
        squares = py_square(w)[gram]
        repeated = np.flatnonzero(count != 1)
        squares[repeated] = py_square(count[repeated] * w[gram[repeated]])
        norm = np.sqrt(np.bincount(order_sent, squares, minlength=MAX_N * n_sent)).reshape(
            MAX_N, n_sent
        )
        # the products of the entries that some reference shares (the others add only zeros)
        e = m.matched
        w_e = w[m.gram[e]]
        g_cand = (m.count[e] * w_e)[:, None]
        g_ref = m.ref_counts[e] * w_e[:, None]
        product = np.minimum(g_cand, g_ref) * g_ref if self.clipped else g_cand * g_ref
        cell = ((m.item[e] * MAX_N + m.table[e])[:, None] * width + np.arange(width)).ravel()
        num = np.bincount(cell, product.ravel(), minlength=n * MAX_N * width).reshape(
            n, MAX_N, width
        )
        slots = batch.item_slots
        n_cand = norm[:, batch.cand].T[:, :, None]
        n_ref = np.where(slots >= 0, norm[:, np.maximum(slots, 0)], 0.0).transpose(1, 0, 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where((n_cand != 0) & (n_ref != 0), num / (n_cand * n_ref), num).transpose(
                0, 2, 1
            )
        if self.clipped:
            # coco-caption's "length" is the number of bigrams
            delta = np.maximum(batch.cand_lengths[:, None] - 1, 0) - np.maximum(
                batch.ref_lengths - 1, 0
            )
            out = out * length_penalty(delta)[..., None]
        return out

    def score_batch(self, batch: Batch) -> Scores:
        fixed = self.fixed_df()
        if fixed is None and len(batch) == 1:
            warnings.warn(
                f"{self.name} with document frequencies from the scored corpus and a single item "
                "is always 0 (ln N = 0); fit() on a larger corpus or pass df=<file>",
                stacklevel=3,
            )
        # coco-caption's order of operations: the references' values added one after the other,
        # then the mean over the orders, / references, x 10 (see capmetrics.plugins.ngram.pyfloat)
        by_order = sum_left_to_right(self.order_values(batch, fixed), axis=1)
        values = sum_left_to_right(by_order, axis=1) / MAX_N / batch.n_refs * 10.0
        return Scores(
            values, float(np.mean(values)), {"df": "corpus" if fixed is None else "fixed"}
        )

    def require_fixed(self) -> tuple[dict[str, int], int]:
        fixed = self.fixed_df()
        if fixed is None:
            raise MetricError(
                f"{self.name} pairs need fixed document frequencies (with df from the pair itself "
                "every score is 0): call fit(references) or pass df=<file written by save_df>"
            )
        return fixed

    def slot_scores(self, batch: Batch) -> np.ndarray:
        return (
            sum_left_to_right(self.order_values(batch, self.require_fixed()), axis=-1)
            / MAX_N
            * 10.0
        )

    def pairwise_scores(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> np.ndarray:
        """Scores with the fixed document frequencies (raises if there are none)."""
        self.require_fixed()
        return self.score(candidates, references).values


class Cider(CiderD):
    """The original CIDEr (Vedantam et al. 2015): mean over orders of the tf-idf cosine, × 10; no
    clipping, no length penalty. Same document-frequency options as ``cider-d``. (``cider`` and
    pycocoevalcap's ``CIDEr`` name CIDEr-D, as coco-caption and caption papers use the word.)"""

    name = "cider-original"
    clipped = False
