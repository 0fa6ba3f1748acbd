"""Fuzz bench of the pricing API's request parser: 1,000,000 hostile bodies, 0 exceptions but ours.

Run: ``.venv/bin/python bench/fuzz_requests.py [--inputs 1000000] [--seed 7] [--chunk 20000]``

The target is :func:`serving.body.parse_body`, the very function both pricing
endpoints call, in-process. Hypothesis draws the ingredients of each group of inputs
(a valid seed request, one to six value tokens: arbitrary Unicode text, any float's
repr, large integers, hostile tokens such as ``NaN``, ``Infinity``, ``1e309``, ``1e20``, a
5,000-digit integer, lone surrogates, U+2028, NUL, deep nesting; a content type; single
or batch; a mutation seed); a seeded ``random.Random`` then makes :data:`FANOUT` mutants
of it: tokens put in place of fields' values, duplicated or unknown keys, byte flips,
byte inserts (invalid UTF-8), truncation, trailing garbage, or raw random bytes.
Generation runs in chunks of ``--chunk`` inputs, each with its own Hypothesis seed
(derived from ``--seed``), so memory stays flat and a run is reproducible.

Each input goes through ``parse_body`` once. Counted: inputs, accepted requests, our
validation errors (:class:`~serving.body.BadRequest`, by status), and any other
exception, printed with its input; the run exits 1 if there is one. An accepted body is
also checked by an independent oracle (``json.loads`` refusing constants, then no
non-finite number and no lone surrogate): accepting one that is not strict JSON counts
as a failure too. Timing: the parser's
inputs/s, against the peer, plain ``json.loads`` of the same bytes in the same run
(the ratio says what the strict checks and the contract cost over merely decoding).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from tqdm import tqdm

from serving.body import parse_body
from serving.errors import BadRequest

SEEDS: tuple[dict[str, Any], ...] = (
    {"hotel_id": "h042", "room_type": "double", "stay_date": "2026-12-24", "nights": 2, "channel": "web",
     "event_time": "2026-11-30T09:15:00Z", "last_published_price": 149.0},
    {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-20"},
    {"hotel_id": "h7", "room_type": "suite", "stay_date": "2027-01-02", "nights": 60, "channel": "ota",
     "event_time": 1796083200000, "guest_key": "g-123", "schema_version": 1,
     "request_id": "6f1c1f1e-8d7a-4c1b-9a53-0c6a3f6b2d11"},
)
FIELDS = ("hotel_id", "room_type", "stay_date", "nights", "channel", "event_time", "last_published_price",
          "guest_key", "schema_version", "request_id", "event_id", "event_type")
HOSTILE = (
    "NaN", "-NaN", "Infinity", "-Infinity", "1e309", "-1e309", "1e20", "-1", "0", "1e-400", "9" * 5_000, "-0.0",
    '"\\ud800"', '"\\udfff"', '"a\\ud83d"', '"h\\u2028"', '"h\\u0085"', '"\\u0000"', '""', '"' + "x" * 300 + '"',
    "[" * 40 + "]" * 40, "[" * 3_000, "{}", "[]", "null", "true", "false", '{"a": NaN}', "[1e309]",
    '"2026-02-30"', '"2026-12-24T25:00:00"', '"0001-01-01T00:00:00+14:00"', '"9999-12-31T23:59:59-14:00"',
    "253402300800000", "-62135596800001", "1" + "0" * 30, "0x10", "01", "1.", ".5", "+1",
)
CONTENT_TYPES = ("application/json",) * 12 + (
    "application/json; charset=utf-8", "application/json; charset=latin-1", "text/plain", "", None,
    "APPLICATION/JSON", "application/json;charset=\"UTF-8\"", "multipart/form-data; boundary=x",
)


@st.composite
def _hostile_value(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.sampled_from(HOSTILE))
    if kind == 1:
        return json.dumps(draw(st.text(max_size=80)), ensure_ascii=draw(st.booleans()))
    if kind == 2:
        return repr(draw(st.floats()))  # nan, inf, 1e+300, -0.0: Python's spelling, not always JSON's
    return str(draw(st.integers(-(10**30), 10**30)))


def _replace_field(body: str, name: str, token: str) -> str:
    """``body`` (compact JSON of an object) with ``name``'s value set to the raw ``token``."""
    key = json.dumps(name)
    start = body.find(key + ":")
    if start < 0:
        return body[:-1] + ("," if len(body) > 2 else "") + f"{key}:{token}" + "}"
    value_at = start + len(key) + 1
    end = value_at
    depth, in_text = 0, False
    while end < len(body):  # the end of the (simple) value: our seeds hold no nested containers
        ch = body[end]
        if in_text:
            in_text = ch != '"' or body[end - 1] == "\\"
        elif ch == '"':
            in_text = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        end += 1
    return body[:value_at] + token + body[end:]


FANOUT = 64
"""Inputs expanded from one Hypothesis example. Hypothesis draws the ingredients (arbitrary Unicode text,
any float, integers, a seed body, a content type) at ~0.3-3 ms per example on this host, too slow for
1,000,000 draws; a seeded ``random.Random`` then mixes them into 64 mutants at a few µs each."""


@st.composite
def fuzz_plan(draw: st.DrawFn) -> tuple[int, list[str], str | None, bool, int]:
    """One Hypothesis example: (seed body index, value tokens, content type, batch?, mutation seed)."""
    tokens = draw(st.lists(_hostile_value(), min_size=1, max_size=6))
    return (draw(st.integers(0, len(SEEDS) - 1)), tokens, draw(st.sampled_from(CONTENT_TYPES)),
            draw(st.integers(0, 4)) == 0, draw(st.integers(0, 2**32 - 1)))


def _mutant_text(rng: random.Random, base: int, tokens: list[str]) -> str:
    body = json.dumps(SEEDS[base if rng.random() < 0.7 else rng.randrange(len(SEEDS))], separators=(",", ":"))
    for _ in range(rng.randint(0, 3)):
        token = rng.choice(tokens) if rng.random() < 0.6 else rng.choice(HOSTILE)
        body = _replace_field(body, rng.choice(FIELDS), token)
    if rng.random() < 0.1:  # duplicate key, or an unknown one
        body = body[:-1] + ',"' + rng.choice((*FIELDS, "surprise")) + '":1}'
    return body


def _mutant(rng: random.Random, plan: tuple[int, list[str], str | None, bool, int]) -> tuple[bytes, str | None, bool]:
    base, tokens, content_type, batch, _ = plan
    if rng.random() < 0.2:
        content_type = rng.choice(CONTENT_TYPES)
    if rng.random() < 0.05:
        return rng.randbytes(rng.randint(0, 200)), content_type, batch
    if batch:
        text = "[" + ",".join(_mutant_text(rng, base, tokens) for _ in range(rng.randint(0, 4))) + "]"
    else:
        text = _mutant_text(rng, base, tokens)
    raw = text.encode("utf-8", "surrogatepass")
    for _ in range(rng.choice((0, 0, 1, 2))):
        if not raw:
            break
        at = rng.randrange(len(raw))
        op = rng.randrange(4)
        if op == 0:  # flip a byte
            raw = raw[:at] + bytes([raw[at] ^ rng.randint(1, 255)]) + raw[at + 1 :]
        elif op == 1:  # insert bytes (invalid UTF-8 among them)
            raw = raw[:at] + rng.randbytes(rng.randint(1, 4)) + raw[at:]
        elif op == 2:  # truncate
            raw = raw[:at]
        else:  # trailing garbage
            raw = raw + rng.choice((b" x", b"{}", b"\x00", b"\n1", b"  "))
    return raw, content_type, batch


@dataclass
class Tally:
    """What a run saw."""

    inputs: int = 0
    accepted: int = 0
    refused: Counter[int] = field(default_factory=Counter)
    other: list[tuple[str, bytes, str | None, bool]] = field(default_factory=list)
    parse_s: float = 0.0
    peer_s: float = 0.0
    generate_s: float = 0.0

    @property
    def validation_errors(self) -> int:
        return sum(self.refused.values())


def generate(n: int, chunk_seed: int) -> list[tuple[bytes, str | None, bool]]:
    """``n`` inputs: Hypothesis plans (seeded by ``chunk_seed``), each expanded to :data:`FANOUT` mutants."""
    plans: list[tuple[int, list[str], str | None, bool, int]] = []

    @seed(chunk_seed)
    @settings(max_examples=-(-n // FANOUT), database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(fuzz_plan())
    def collect(plan: tuple[int, list[str], str | None, bool, int]) -> None:
        plans.append(plan)

    collect()
    out: list[tuple[bytes, str | None, bool]] = []
    while len(out) < n:  # Hypothesis may return fewer distinct plans than asked: reuse them with new seeds
        for i, plan in enumerate(plans):
            rng = random.Random(plan[-1] * 7_919 + i + len(out))
            out.extend(_mutant(rng, plan) for _ in range(FANOUT))
    return out[:n]


def _refuse_constant(token: str) -> None:
    msg = f"constant {token}"
    raise ValueError(msg)


def strict_json_problem(raw: bytes) -> str | None:
    """Why ``raw`` is not RFC 8259 JSON (an oracle independent of the target), else ``None``."""
    try:
        stack = [json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)]
    except (ValueError, RecursionError) as exc:
        return str(exc)[:100]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"non-finite number {item!r}"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "lone surrogate"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def parse_all(inputs: list[tuple[bytes, str | None, bool]], tally: Tally) -> None:
    """Run the target on every input, counting outcomes; any exception but ours is kept with its input."""
    t0 = time.perf_counter()
    for raw, content_type, batch in inputs:
        try:
            parse_body(raw, content_type=content_type, batch=batch)  # type: ignore[call-overload]
            tally.accepted += 1
            if (why := strict_json_problem(raw)) is not None:  # the oracle: only strict JSON may be accepted
                tally.other.append((f"accepted a body that is not strict JSON: {why}", raw[:300], content_type,
                                    batch))
        except BadRequest as exc:
            tally.refused[exc.status] += 1
        except Exception as exc:  # noqa: BLE001 - the bench exists to find these
            if len(tally.other) < 20:
                tally.other.append((f"{type(exc).__name__}: {exc}"[:300], raw[:300], content_type, batch))
            else:
                tally.other.append(("(more)", b"", None, batch))
    tally.parse_s += time.perf_counter() - t0
    tally.inputs += len(inputs)


def peer_all(inputs: list[tuple[bytes, str | None, bool]], tally: Tally) -> None:
    """The peer: plain ``json.loads`` of the same bytes (errors swallowed)."""
    loads: Callable[[bytes], Any] = json.loads
    t0 = time.perf_counter()
    for raw, _, _ in inputs:
        try:
            loads(raw)
        except (ValueError, RecursionError):
            pass
    tally.peer_s += time.perf_counter() - t0


def run(inputs: int, *, base_seed: int = 7, chunk: int = 20_000, progress: bool = False) -> Tally:
    """Fuzz ``parse_body`` with ``inputs`` generated inputs; returns the tally (the caller decides on failure)."""
    tally = Tally()
    bar = tqdm(total=inputs, unit="input", disable=not progress, smoothing=0.1)
    done = 0
    index = 0
    while done < inputs:
        n = min(chunk, inputs - done)
        t0 = time.perf_counter()
        batch = generate(n, base_seed * 1_000_003 + index)
        tally.generate_s += time.perf_counter() - t0
        batch = batch[:n]
        parse_all(batch, tally)
        peer_all(batch, tally)
        done += len(batch)
        index += 1
        bar.update(len(batch))
        bar.set_postfix(refused=tally.validation_errors, other=len(tally.other))
    bar.close()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=20_000)
    args = parser.parse_args()
    t0 = time.perf_counter()
    tally = run(args.inputs, base_seed=args.seed, chunk=args.chunk, progress=True)
    wall = time.perf_counter() - t0
    parse_rate = tally.inputs / tally.parse_s if tally.parse_s else float("nan")
    peer_rate = tally.inputs / tally.peer_s if tally.peer_s else float("nan")
    print(f"inputs                 {tally.inputs:,}")
    print(f"accepted               {tally.accepted:,}")
    print(f"validation errors      {tally.validation_errors:,}  by status {dict(sorted(tally.refused.items()))}")
    print(f"other exceptions       {len(tally.other):,}")
    print(f"parse_body             {parse_rate:,.0f} inputs/s")
    print(f"json.loads (peer)      {peer_rate:,.0f} inputs/s on the same inputs")
    print(f"ratio parse_body/peer  {parse_rate / peer_rate:.3f}  (inputs/s; below 1 = slower than json.loads)")
    print(f"generation             {tally.inputs / tally.generate_s:,.0f} inputs/s (Hypothesis)")
    print(f"wall                   {wall:,.1f} s")
    for text, raw, content_type, batch in tally.other[:20]:
        print(f"  {text}\n    input={raw!r} content_type={content_type!r} batch={batch}", file=sys.stderr)
    if tally.other or tally.inputs < args.inputs:
        print("FAIL: exceptions other than BadRequest (or fewer inputs than asked)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
