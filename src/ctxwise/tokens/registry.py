"""The counter registry: every counter ctxwise can name, built-in or registered by the user.

tiktoken's pattern: a name maps to a factory, the factory runs on the first
:func:`get_counter` of that name (so no vocabulary loads at import), and the counter it builds
is shared from then on. The built-in names (:data:`BUILTIN_COUNTERS`) are registered here;
:func:`register_counter` adds more, usable everywhere a counter name is (a policy's
``tokenizer``, the replay, the inspector).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import PolicyError
from .protocol import Counter

CounterFactory = Callable[[], Counter]
"""A function of no arguments that builds a counter (called once per name and process)."""


def _chars() -> Counter:
    from .counters import CharsCounter

    return CharsCounter()


def _tiktoken(name: str) -> CounterFactory:
    def build() -> Counter:
        from .counters import TiktokenCounter

        return TiktokenCounter(name)

    return build


def _deepseek() -> Counter:
    from .counters import DeepSeekCounter

    return DeepSeekCounter()


def _qwen() -> Counter:
    from .counters import QwenCounter

    return QwenCounter()


def _estimate() -> Counter:
    from .counters import EstimateCounter

    return EstimateCounter()


_FACTORIES: dict[str, CounterFactory] = {
    "chars": _chars,
    "o200k_base": _tiktoken("o200k_base"),
    "cl100k_base": _tiktoken("cl100k_base"),
    "deepseek": _deepseek,
    "qwen": _qwen,
    "estimate": _estimate,
}
BUILTIN_COUNTERS: tuple[str, ...] = tuple(_FACTORIES)
"""The names of the built-in counters, in the order :func:`list_counters` gives them."""

_COUNTERS: dict[str, Counter] = {}
_LOCK = threading.RLock()
_HINT_UNKNOWN = ("use one of the listed names, or register yours first with "
                 "ctxwise.tokens.register_counter(name, factory)")


def list_counters() -> list[str]:
    """The names :func:`get_counter` knows: the built-in ones, then the registered ones in the
    order they were registered. Loads no tokenizer."""
    with _LOCK:
        return list(_FACTORIES)


def register_counter(name: str, factory: CounterFactory) -> None:
    """Make the counter that ``factory()`` builds available as ``name``.

    ``factory`` runs on the first :func:`get_counter` of ``name``; the counter it returns must
    be called ``name`` (a message's cached size is kept under the counter's name) and count in
    ``"chars"`` or ``"tokens"``. Raises :class:`~ctxwise.errors.PolicyError` when ``name`` is
    empty or already known (built-in names cannot be replaced) or ``factory`` is not callable;
    nothing is registered then.
    """
    if not isinstance(name, str) or not name.strip():
        raise PolicyError(f"register_counter: the name must be a non-empty string, got {name!r}",
                          hint="give the name a policy's tokenizer will use, e.g. 'my-tokenizer'")
    if not callable(factory):
        raise PolicyError(f"register_counter {name!r}: the factory must be callable, got {type(factory).__name__}",
                          hint="pass a function of no arguments that returns the counter (e.g. the class)")
    with _LOCK:
        if name in _FACTORIES:
            raise PolicyError(f"register_counter: a counter called {name!r} is already registered",
                              hint="choose another name; a registered counter is never replaced, since "
                                   "sessions measured with it must keep their sizes")
        _FACTORIES[name] = factory


def get_counter(name: str) -> Counter:
    """The shared counter called ``name``, built by its factory on first use.

    Raises :class:`~ctxwise.errors.PolicyError` for an unknown name, listing the known ones,
    and when the factory's counter is not called ``name`` or has a unit other than
    ``"chars"`` / ``"tokens"`` (nothing is kept then, a later call tries again).
    """
    counter = _COUNTERS.get(name)
    if counter is not None:
        return counter
    with _LOCK:
        counter = _COUNTERS.get(name)
        if counter is not None:
            return counter
        factory = _FACTORIES.get(name)
        if factory is None:
            raise PolicyError(f"unknown token counter {name!r}; known counters: {', '.join(_FACTORIES)}",
                              hint=_HINT_UNKNOWN)
        counter = factory()
        _check_built(name, counter)
        _COUNTERS[name] = counter
    return counter


def _check_built(name: str, counter: object) -> None:
    """Raise PolicyError unless ``counter`` is a :class:`Counter` called ``name`` with a known unit."""
    if not isinstance(counter, Counter):
        raise PolicyError(f"token counter {name!r}: the factory returned {type(counter).__name__}, "
                          f"which lacks part of the Counter protocol",
                          hint="subclass ctxwise.TokenCounter and write count_text and count_image")
    if counter.name != name:
        raise PolicyError(f"token counter {name!r}: the factory's counter is called {counter.name!r}",
                          hint="set the counter's name to the name it is registered under")
    if counter.unit not in ("chars", "tokens"):
        raise PolicyError(f"token counter {name!r}: unit {counter.unit!r} is neither 'chars' nor 'tokens'",
                          hint="set unit = 'tokens' (or 'chars')")
