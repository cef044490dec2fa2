"""BVH MOTION block scanner: one pass over the raw bytes into a ``(frames, channels)`` array.

Used by :func:`kinema.io.load_bvh`.  The scanner checks the syntax of every
number, that every non-blank line holds exactly ``channels`` values and that
there are exactly ``frames`` such lines; it reports the first problem through
``status`` instead of raising (kernels cannot build kinema errors).

Numbers are converted exactly (the result equals Python's ``float(token)``):
a decimal ``m * 10**e`` with an integer mantissa ``m <= 2**53`` and
``|e| <= 22`` is one correctly rounded multiplication or division of two
exactly representable doubles (Clinger's fast path).  Any other token (more
than 19 significant digits, a huge exponent) is recorded in ``slow`` and the
caller converts it with ``float``.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

#: Exact powers of ten 10**0 .. 10**22 (all exactly representable as doubles).
POW10 = np.array([10.0**k for k in range(23)])

#: Largest mantissa of the exact fast path (every integer up to 2**53 is a double).
MAX_EXACT_MANTISSA = 2**53

#: Mantissa digits accumulated in int64 before a token is handed to ``float``.
MAX_FAST_DIGITS = 18

# status[0] codes
OK = 0
BAD_TOKEN = 1  # status[2] = byte offset of the token, status[1] = line
BAD_COUNT = 2  # status[1] = line, status[3] = values on that line (n_ch + 1 means "more than n_ch")
EXTRA_DATA = 3  # a value after the declared number of frames; status[1] = line
STATUS_LEN = 6  # [code, line, byte, values on line, frames read, slow tokens]


@njit(helper=True)
def _is_blank(c: int) -> bool:
    return c == 32 or c == 9 or c == 11 or c == 12


@njit
def scan_motion(buf, start, out, slow, status):  # type: ignore[no-untyped-def]
    """Parse the numbers of ``buf[start:]`` (uint8) into ``out`` (float64, ``(frames, n_ch)``).

    Lines end at LF, CRLF or a lone CR; spaces, tabs, VT and FF separate
    values; blank lines are skipped.  ``slow`` (int64, ``(cap, 4)``) receives
    ``(byte_start, byte_end, flat_index, line)`` of tokens the fast path
    cannot convert exactly (their ``out`` slot holds 0 until the caller fills
    it); ``status[5]`` counts them even past ``cap`` so the caller can retry
    with room.  Line numbers in ``status`` count from 0 at ``start``.
    ``status[4]`` is the number of complete frames read.
    """
    n = buf.shape[0]
    n_frames = out.shape[0]
    n_ch = out.shape[1]
    cap = slow.shape[0]
    line = 0
    frame = 0
    col = 0
    n_slow = 0
    i = start
    for k in range(STATUS_LEN):
        status[k] = 0
    while i < n:
        c = int(buf[i])  # int: uint8 arithmetic would wrap (plain Python under NUMBA_DISABLE_JIT)
        if c == 10 or c == 13:
            if c == 13 and i + 1 < n and buf[i + 1] == 10:
                i += 1  # CRLF is one line end
            if col != 0:
                if col != n_ch:
                    status[0] = BAD_COUNT
                    status[1] = line
                    status[3] = col
                    status[4] = frame
                    return
                frame += 1
                col = 0
            line += 1
            i += 1
            continue
        if _is_blank(c):
            i += 1
            continue
        # ---- a token starts at i
        tok = i
        if frame >= n_frames:
            status[0] = EXTRA_DATA
            status[1] = line
            status[2] = tok
            status[4] = frame
            return
        if col >= n_ch:
            status[0] = BAD_COUNT
            status[1] = line
            status[3] = n_ch + 1
            status[4] = frame
            return
        neg = False
        if c == 45 or c == 43:  # '-' or '+'
            neg = c == 45
            i += 1
        m = 0
        nd = 0
        dexp = 0
        digits = 0
        many = False
        while i < n and 48 <= buf[i] <= 57:
            d = int(buf[i]) - 48
            digits += 1
            if m == 0 and d == 0:
                pass  # a leading zero carries no significance
            elif nd < MAX_FAST_DIGITS:
                m = m * 10 + d
                nd += 1
            else:
                dexp += 1  # dropped integer digit: exact value needs float()
                many = True
            i += 1
        if i < n and buf[i] == 46:  # '.'
            i += 1
            while i < n and 48 <= buf[i] <= 57:
                d = int(buf[i]) - 48
                digits += 1
                if m == 0 and d == 0:
                    dexp -= 1
                elif nd < MAX_FAST_DIGITS:
                    m = m * 10 + d
                    nd += 1
                    dexp -= 1
                else:
                    many = True
                i += 1
        bad = digits == 0
        if not bad and i < n and (buf[i] == 101 or buf[i] == 69):  # 'e' / 'E'
            i += 1
            eneg = False
            if i < n and (buf[i] == 45 or buf[i] == 43):
                eneg = buf[i] == 45
                i += 1
            edigits = 0
            e = 0
            while i < n and 48 <= buf[i] <= 57:
                if e < 100000:  # larger exponents over/underflow anyway; float() decides
                    e = e * 10 + (int(buf[i]) - 48)
                edigits += 1
                i += 1
            if edigits == 0:
                bad = True
            dexp += -e if eneg else e
        if not bad and i < n:
            t = int(buf[i])
            if not (_is_blank(t) or t == 10 or t == 13):
                bad = True
        if bad:
            status[0] = BAD_TOKEN
            status[1] = line
            status[2] = tok
            status[4] = frame
            return
        flat = frame * n_ch + col
        if many or m > MAX_EXACT_MANTISSA or dexp > 22 or dexp < -22:
            if m == 0 and not many:
                out[frame, col] = -0.0 if neg else 0.0  # zero with any exponent is zero
            else:
                if n_slow < cap:
                    slow[n_slow, 0] = tok
                    slow[n_slow, 1] = i
                    slow[n_slow, 2] = flat
                    slow[n_slow, 3] = line
                n_slow += 1
                out[frame, col] = 0.0
        else:
            v = float(m)
            if dexp >= 0:
                v = v * POW10[dexp]
            else:
                v = v / POW10[-dexp]
            out[frame, col] = -v if neg else v
        col += 1
    # end of data: a last line without a line end
    if col != 0:
        if col != n_ch:
            status[0] = BAD_COUNT
            status[1] = line
            status[3] = col
            status[4] = frame
            return
        frame += 1
    status[4] = frame
    status[5] = n_slow


@njit
def format_fixed(digits, negative, precision, out):  # type: ignore[no-untyped-def]
    """Write rows of fixed-point numbers as text into ``out`` (uint8); returns the byte count.

    ``digits`` (int64, ``(F, C)``, >= 0) holds ``round(|x| * 10**precision)``
    and ``negative`` (bool) the signs; each row becomes ``C`` numbers with
    ``precision`` decimals separated by single spaces and ending in ``\\n``
    (``-`` only before a non-zero number).  The caller sizes ``out``.
    """
    n_rows = digits.shape[0]
    n_cols = digits.shape[1]
    scratch = np.empty(20, dtype=np.uint8)
    k = 0
    for i in range(n_rows):
        for j in range(n_cols):
            if j:
                out[k] = 32
                k += 1
            q = digits[i, j]
            if negative[i, j] and q != 0:
                out[k] = 45
                k += 1
            # digits of q, least significant first, at least precision + 1 of them
            nd = 0
            while q > 0 or nd <= precision:
                scratch[nd] = 48 + q % 10
                q //= 10
                nd += 1
            for d in range(nd - 1, -1, -1):
                out[k] = scratch[d]
                k += 1
                if d == precision and precision > 0:
                    out[k] = 46  # '.'
                    k += 1
        out[k] = 10
        k += 1
    return k
