"""Whether a string column's values are all different, told fast for the common answer (yes).

Hashing 82,000 distinct strings into Arrow's dictionary takes 5 to 6 ms here; reading each
string's bytes as a few 64-bit words into one number per string takes a tenth of that. Strings
all of one length, a multiple of 8 bytes (OpenTelemetry's span ids), are read as words where
they lie. Equal strings get equal fingerprints, so fingerprints that all differ prove the
strings do; two equal fingerprints prove nothing, and the caller then asks the exact question.
Whether the fingerprints differ is told by sorting them: NumPy's vectorized sort (AVX2 here)
sorts 82,000 in 1.9 ms and a million in 27 ms, faster than the counting passes that were here
before it (3.1 and 43 ms, measured side by side with NumPy 2.4).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

U64 = npt.NDArray[np.uint64]
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection mod 2**64
_SHIFT = np.uint64(29)
_WORDS = 8
"""A fingerprint reads a string's first `_WORDS` words (64 bytes), and its last 8 bytes."""
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)
"""The low `n` bytes of a little-endian word, by `n`."""


def surely_distinct(strings: pa.Array) -> bool:
    """True when no two values are equal for sure; False when some may be (ask exactly)."""
    if len(strings) < 2:
        return True
    if strings.type != pa.string() or strings.null_count:
        return False
    return all_differ(_fingerprints(strings))


def all_differ(fingerprints: U64) -> bool:
    """Whether no two fingerprints are equal."""
    ordered = np.sort(fingerprints)
    return not (ordered[1:] == ordered[:-1]).any()


def _fingerprints(strings: pa.Array) -> U64:
    """One 64-bit number per string, a function of its bytes only (not of where they lie)."""
    _, offset_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offset_buffer, np.int32, len(strings) + 1, 4 * strings.offset)
    size = int(offsets[1] - offsets[0]) if len(strings) else 0
    if 0 < size <= 8 * _WORDS and size % 8 == 0 and offsets[-1] - offsets[0] == size * len(strings):
        return _whole_words(data_buffer, int(offsets[0]), size, len(strings))
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer else np.zeros(0, np.uint8)
    padded = np.zeros(len(data) + 8 * (_WORDS + 1), dtype=np.uint8)  # words read past the end
    padded[: len(data)] = data
    words = np.ndarray(len(data) + 8 * _WORDS + 1, dtype="<u8", buffer=padded, strides=(1,))
    """`words[i]`: the 8 bytes from byte `i` on, as one little-endian number."""
    start = offsets[:-1].astype(np.int64)
    length = np.diff(offsets).astype(np.int64)
    fingerprint = _mixed(length.astype(np.uint64))
    longest = int(length.max())
    for k in range(min(_WORDS, -(-longest // 8))):
        fingerprint ^= _word(words, start + 8 * k, length - 8 * k)
        _mixed(fingerprint)
    if longest > 8 * _WORDS:
        fingerprint ^= _word(words, np.maximum(start + length - 8, start), length)
        _mixed(fingerprint)
    return fingerprint


def _whole_words(data: pa.Buffer, start: int, size: int, count: int) -> U64:
    """`_fingerprints` of `count` strings of `size` bytes each (a multiple of 8), from `start`.

    OpenTelemetry's ids (16 and 32 hex digits) are such strings: their words are read where
    they lie, without gathering and masking them one by one. The numbers are those the general
    way gives the same strings (it mixes once per word of the longest string, here `size`).
    """
    words = np.frombuffer(data, "<u8", count * size // 8, start).reshape(count, size // 8)
    fingerprint = _mixed(np.full(count, size, dtype=np.uint64))
    for k in range(size // 8):
        fingerprint ^= words[:, k]
        _mixed(fingerprint)
    return fingerprint


def _word(words: U64, at: npt.NDArray[np.int64], size: npt.NDArray[np.int64]) -> U64:
    """The first `size` bytes (0 to 8) of the word at `at`, as a number."""
    word = words[at]
    word &= np.take(_MASKS, np.clip(size, 0, 8))
    return word


def _mixed(values: U64) -> U64:
    """Spread the values' bits, in place (a bijection: distinct values stay distinct)."""
    with np.errstate(over="ignore"):
        np.multiply(values, _MIX, out=values)
    values ^= values >> _SHIFT
    return values
