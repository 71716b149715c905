"""Image sizing: how many tokens an image costs, never by the length of its base64 text.

Two rules, one per counter family (documented on each counter):

* **Anthropic** (``anthropic_image_tokens``), used by ``chars``, ``deepseek``, ``qwen`` and
  ``estimate``: ``tokens = width * height / 750``, rounded up, at most 1,600. Source:
  Anthropic's vision docs ("Calculate image costs": ``tokens = (width px * height px)/750``;
  images over ~1.15 megapixels or 1568 px on the long edge are scaled down first, so about
  1,600 tokens is the most one image costs). Qwen-VL's 28x28-pixel merged patches give
  ``w*h/784`` tokens, close to the same figure, so the rule also fits Qwen's vision models.
* **OpenAI tiles** (``openai_image_tokens``), used by ``o200k_base`` and ``cl100k_base``:
  ``85 + 170 * tiles`` at ``detail: high``. The image is scaled down to fit 2048x2048, then
  down again so its shortest side is at most 768 px; ``tiles`` is the number of 512x512 squares
  covering the result. ``detail: low`` costs a flat 85. Source: OpenAI vision guide
  ("Calculating costs", GPT-4o / GPT-4.1 family).

When the size is unknown (a URL, or bytes whose header cannot be read), each rule charges the
most one image can cost under it: 1,600 tokens (Anthropic) or 1,445 tokens (OpenAI, a
2048x768 image: 8 tiles), so an unknown image is never undercounted.

Dimensions come from :class:`~ctxwise.messages.ImageBlock` ``width``/``height`` when set, and
otherwise from the image header inside ``data`` (or a ``data:`` URL): PNG, JPEG, GIF and WebP
are read from the first few kilobytes of the decoded base64. No Pillow, no full decode.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

from ..messages import ImageBlock

ANTHROPIC_PIXELS_PER_TOKEN = 750
"""Anthropic: one token per 750 pixels."""
ANTHROPIC_MAX_IMAGE_TOKENS = 1600
"""Anthropic: the most one (auto-resized) image costs, in tokens."""
OPENAI_BASE_TOKENS = 85
"""OpenAI: the flat part of every image (and the whole cost at ``detail: low``)."""
OPENAI_TILE_TOKENS = 170
"""OpenAI: tokens per 512x512 tile at ``detail: high``."""
OPENAI_MAX_IMAGE_TOKENS = OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * 8
"""OpenAI: the most one image costs at ``detail: high`` (2048x768 after scaling: 8 tiles)."""

_HEADER_B64_CHARS = 64 * 1024
"""How much base64 text is decoded to find the dimensions (JPEG headers can hold big EXIF)."""


def image_size(block: ImageBlock) -> tuple[int, int] | None:
    """``(width, height)`` in pixels, from the block's fields or its header bytes; None if unknown."""
    if block.width and block.height:
        return int(block.width), int(block.height)
    data = block.data
    if not data and block.url and block.url.startswith("data:"):
        data = block.url
    if not data:
        return None
    return sniff_size(_decode_prefix(data))


def _decode_prefix(data: str) -> bytes:
    """Decode the start of a base64 string (a ``data:...;base64,`` prefix is skipped)."""
    if data.startswith("data:"):
        comma = data.find(",")
        data = data[comma + 1 :] if comma >= 0 else ""
    chunk = "".join(data[:_HEADER_B64_CHARS].split())
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk)
    except (binascii.Error, ValueError):
        try:
            return base64.urlsafe_b64decode(chunk)
        except (binascii.Error, ValueError):
            return b""


def sniff_size(head: bytes) -> tuple[int, int] | None:
    """Width and height from the first bytes of a PNG, GIF, JPEG or WebP file, else None."""
    try:
        if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
            w, h = struct.unpack(">II", head[16:24])
        elif head[:6] in (b"GIF87a", b"GIF89a"):
            w, h = struct.unpack("<HH", head[6:10])
        elif head[:2] == b"\xff\xd8":
            return _jpeg_size(head)
        elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            return _webp_size(head)
        else:
            return None
    except struct.error:
        return None
    return (w, h) if w > 0 and h > 0 else None


_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg_size(b: bytes) -> tuple[int, int] | None:
    i = 2
    n = len(b)
    while i + 4 <= n:
        if b[i] != 0xFF:
            return None
        marker = b[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        (length,) = struct.unpack(">H", b[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            h, w = struct.unpack(">HH", b[i + 5 : i + 9])
            return (w, h) if w > 0 and h > 0 else None
        i += 2 + length
    return None


def _webp_size(b: bytes) -> tuple[int, int] | None:
    kind = b[12:16]
    if kind == b"VP8 ":  # lossy: frame header after a 3-byte tag and the 9d 01 2a start code
        w, h = struct.unpack("<HH", b[26:30])
        w, h = w & 0x3FFF, h & 0x3FFF
    elif kind == b"VP8L":  # lossless: 14-bit width-1 and height-1 after the 0x2f signature
        bits = int.from_bytes(b[21:25], "little")
        w, h = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    elif kind == b"VP8X":  # extended: 24-bit canvas width-1 and height-1
        w = int.from_bytes(b[24:27], "little") + 1
        h = int.from_bytes(b[27:30], "little") + 1
    else:
        return None
    return (w, h) if w > 0 and h > 0 else None


def anthropic_image_tokens(block: ImageBlock) -> int:
    """Tokens for one image by Anthropic's rule: ``ceil(w*h/750)``, capped at 1,600; 1,600 if unknown."""
    size = image_size(block)
    if size is None:
        return ANTHROPIC_MAX_IMAGE_TOKENS
    w, h = size
    return max(1, min(ANTHROPIC_MAX_IMAGE_TOKENS, math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN)))


def openai_image_tokens(block: ImageBlock) -> int:
    """Tokens for one image by OpenAI's tile rule (``85 + 170 * tiles``); 85 at ``detail: low``."""
    detail = block.extra.get("detail")
    if detail is None and isinstance(block.extra.get("image_url"), dict):
        detail = block.extra["image_url"].get("detail")
    if detail == "low":
        return OPENAI_BASE_TOKENS
    size = image_size(block)
    if size is None:
        return OPENAI_MAX_IMAGE_TOKENS
    w, h = float(size[0]), float(size[1])
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles
