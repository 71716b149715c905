"""Helpers shared by the format adapters (private).

Conventions every adapter follows, so that a message read from one format and written to
another comes back equal:

* **Book.** What a reader must remember to write its own format back byte for byte (``content:
  null`` vs ``""``, a string vs a one-part list, the original key order, ...) goes into
  ``metadata["_<format>"]`` on a message, or ``extra["_<format>"]`` on a block. Only
  *deviations* from the writer's default are recorded, so most messages carry no book. A
  writer consumes its own book and passes other formats' books along like any metadata.
* **Extras.** Keys of a message a format does not know go to ``Message.metadata``; keys of a
  block go to the block's ``extra``. Writers spread them back (``extras=True``).
* **Ids.** A format without message ids gets ``m0000``-style ids (index in the conversation).
  A writer writes an ``id`` key only when the id is not that default.
* **Carry.** When ``extras=True`` a writer checks its output by reading it back; whatever its
  format cannot hold (a signature in OpenAI chat, an ``error`` state, ...) is carried in a
  ``"_ctxwise"`` key on the written message (``fix`` for changed fields, ``all`` when the
  message count itself would change), which the reader applies. ``extras=False`` writes a leaner
  file and drops that (documented per writer). These writers are for files and round trips:
  the request a provider receives comes from :func:`ctxwise.providers.render`, which writes
  only documented keys (block ``extra`` keys, other formats' notes included, are never sent).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable, Iterable

from ..errors import FormatError
from ..messages import ImageBlock, Message

CARRY = "_ctxwise"


def default_id(index: int) -> str:
    """The id given to message ``index`` of a conversation when the format has none."""
    return f"m{index:04d}"


def book_key(fmt: str) -> str:
    """The metadata / extra key that holds format ``fmt``'s round-trip notes."""
    return f"_{fmt}"


def split_known(raw: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The keys of ``raw`` not in ``known`` (order kept)."""
    ks = set(known)
    return {k: v for k, v in raw.items() if k not in ks}


def order_note(raw: dict[str, Any], natural: list[str]) -> list[str] | None:
    """``list(raw)`` when the writer's natural key order (``natural`` first, the rest after, in
    their own order) would not reproduce it, else None."""
    keys = list(raw)
    expected = [k for k in natural if k in raw] + [k for k in keys if k not in natural]
    return None if keys == expected else keys


def reorder(d: dict[str, Any], order: list[str] | None) -> dict[str, Any]:
    """``d`` with the keys listed in ``order`` first, in that order."""
    if not order:
        return d
    out = {k: d[k] for k in order if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


def spread(out: dict[str, Any], extra: dict[str, Any], skip: str | None = None) -> None:
    """Add ``extra``'s keys to ``out`` except ``skip`` and keys ``out`` already has (a clash
    is left to the carry check)."""
    for k, v in extra.items():
        if k != skip and k not in out:
            out[k] = v


def without(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d`` without ``key`` (a new dict when it was there)."""
    return {k: v for k, v in d.items() if k != key} if key in d else d


def with_book(d: dict[str, Any], key: str, book: dict[str, Any]) -> dict[str, Any]:
    """``d`` plus ``{key: book}`` when ``book`` is not empty."""
    if not book:
        return d
    return {**d, key: book}


def b64_size(data: str) -> int | None:
    """Decoded size in bytes of base64 ``data`` (None when it is not valid base64)."""
    s = data.strip()
    try:
        return len(base64.b64decode(s, validate=True))
    except (binascii.Error, ValueError):
        return None


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` for a ``data:<type>;base64,<data>`` URL, else None."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def image_from_b64(media_type: str | None, data: str, extra: dict[str, Any]) -> ImageBlock:
    """An inline :class:`ImageBlock` with its decoded ``byte_size``."""
    return ImageBlock(media_type=media_type, data=data, byte_size=b64_size(data), extra=extra)


def need_dict(raw: Any, place: str, what: str = "an object") -> dict[str, Any]:
    """``raw`` when it is a dict, else a :class:`FormatError` naming ``place``."""
    if not isinstance(raw, dict):
        raise FormatError(place, f"expected {what}, got {type(raw).__name__}")
    return raw


def unknown_block(place: str, t: Any, allowed: Iterable[str]) -> FormatError:
    """The error for a block whose ``type`` this format does not know."""
    return FormatError(place, f"unknown block type {t!r}; expected one of {', '.join(allowed)}")


NO_CALL_HINT = ("a tool result must answer a tool call (tool_use) of the assistant message before it: append "
                "that assistant message first, in this batch or an earlier one, and use its call id; a result "
                "already answered is not sent twice")


def no_call(place: str, call_id: Any, detail: str) -> FormatError:
    """The error for a tool result that answers no earlier tool call (rule ``orphan-tool-result``,
    the slug the provider validators use for the same fault)."""
    return FormatError(place, f"[orphan-tool-result] tool result with no call: {call_id!r} {detail}", hint=NO_CALL_HINT)


# -- carry: make writers lossless for the canonical model -------------------------------

_FIELDS = ("id", "role", "name", "blocks", "metadata")


def _dump_field(m: Message, f: str) -> Any:
    if f == "blocks":
        return [b.model_dump(mode="json") for b in m.blocks]
    return getattr(m, f)


def seal(
    messages: list[Message],
    units: list[dict[str, Any]],
    first_of: list[int],
    read_back: Callable[[list[dict[str, Any]]], list[Message]],
) -> None:
    """Read ``units`` back and record, in ``units[k]["_ctxwise"]``, what the format lost.

    ``first_of[i]`` is the unit where canonical message ``i`` starts. A field that differs goes
    to ``fix[offset]`` (offset = ``i`` minus the first message starting in that unit); when the
    read-back has a different message count, the first unit carries ``all`` messages.
    """
    if not units:
        if messages:
            raise FormatError("writer", "no output unit to carry the messages in")
        return
    back = read_back(units)
    if len(back) != len(messages):
        units[0].setdefault(CARRY, {})["all"] = [m.model_dump(mode="json") for m in messages]
        return
    base: dict[int, int] = {}
    for i, u in enumerate(first_of):
        base.setdefault(u, i)
    for i, (m, b) in enumerate(zip(messages, back)):
        diff = {f: _dump_field(m, f) for f in _FIELDS if getattr(m, f) != getattr(b, f)}
        if diff:
            u = first_of[i]
            units[u].setdefault(CARRY, {}).setdefault("fix", {})[str(i - base[u])] = diff


class Fixes:
    """Collects ``_ctxwise`` carries while reading; :meth:`apply` patches the messages."""

    def __init__(self) -> None:
        self.fix: dict[int, dict[str, Any]] = {}
        self.all: list[dict[str, Any]] | None = None

    def take(self, carry: Any, base: int) -> None:
        """Note the carry of a unit whose first new message has index ``base``."""
        if not isinstance(carry, dict):
            return
        for off, diff in (carry.get("fix") or {}).items():
            self.fix[base + int(off)] = diff
        if carry.get("all") is not None and self.all is None:
            self.all = carry["all"]

    def apply(self, messages: list[Message]) -> list[Message]:
        """The messages with the carried fields restored."""
        if self.all is not None:
            return [Message.model_validate(d) for d in self.all]
        if not self.fix:
            return messages
        out = list(messages)
        for i, diff in self.fix.items():
            if 0 <= i < len(out):
                out[i] = Message.model_validate({**out[i].model_dump(mode="json"), **diff})
        return out
