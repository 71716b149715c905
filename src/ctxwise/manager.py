"""The entry point: :class:`ContextManager`, the store, policy and summarizer many sessions share.

    cm = ContextManager("sqlite:///ctxwise.db", Policy.preset("default"))
    s = cm.session("user-1", "chat-42")      # a ctxwise.Session (ctxwise.engine)
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .compaction import CompactionEvent, Pipeline
from .engine import Session
from .errors import CtxwiseError, PolicyError, PolicyMismatch, StoreUnavailable
from .messages import JSONObject
from .policy import Policy, RuntimeSettings, policy_diff, setting_name, stored_policy
from .summarizers import Summarizer, from_settings
from .tokens import Counter

if TYPE_CHECKING:
    from .memory.facts import Extractor
    from .memory.user import Op
    from .store import MemoryStore, SessionStore

log = logging.getLogger("ctxwise")


class ContextManager:
    """Entry point: a store, a policy and a summarizer shared by many sessions.

    ``store``: a :class:`~ctxwise.store.SessionStore` instance (``SqlStore``,
    ``InMemoryStore``, your own), or a URL (``sqlite:///ctxwise.db`` by default,
    ``postgresql+psycopg://...`` in production, ``memory://`` for an in-memory store).
    ``policy``: the session settings for new sessions; an existing session keeps the policy it
    was created with, and only the fields this one sets are compared with it (see
    :meth:`session`). ``runtime``: the process settings
    (:class:`~ctxwise.policy.RuntimeSettings`: which summarizer, its model, endpoint, timeout,
    retries), never stored or compared. ``counter``: the :class:`~ctxwise.tokens.Counter`
    measuring the policy unit (default: the one the policy names). ``summarizer``: default the
    one ``runtime`` names (the offline digest without it). ``fact_extractor``:
    ``Message -> list[Fact]`` for the pinned facts (default the rules; e.g. an
    :class:`~ctxwise.memory.LLMFactExtractor`). ``memory_decider``: the long-term memory decider, called as ``memory_decider(text, entries, threshold=...)``
    (default the rules of :func:`ctxwise.memory.decide`; e.g. an
    :class:`~ctxwise.memory.LLMMemoryDecider`, held to the same limits). ``memory_store``: where
    long-term user memory lives (default ``store``). ``on_event`` is called with every
    :class:`CompactionEvent`. ``pipeline`` is the compaction
    :class:`~ctxwise.compaction.Pipeline` every session runs (default :meth:`Pipeline.default`);
    the engine stores exactly the changes its stages return. Usable as a context manager
    (``with ContextManager(...) as cm:``; closes the store).
    """

    def __init__(
        self,
        store_url: "str | SessionStore" = "sqlite:///ctxwise.db",
        policy: Policy | Mapping[str, object] | None = None,
        *,
        counter: Counter | None = None,
        summarizer: Summarizer | None = None,
        fact_extractor: "Extractor | None" = None,
        memory_decider: "Callable[..., list[Op]] | None" = None,
        memory_store: "MemoryStore | None" = None,
        on_event: Callable[[CompactionEvent], None] | None = None,
        store: "SessionStore | None" = None,
        pipeline: Pipeline | None = None,
        runtime: RuntimeSettings | None = None,
    ) -> None:
        if policy is not None and not isinstance(policy, Policy):
            if not isinstance(policy, Mapping):
                raise PolicyError(f"policy must be a ctxwise.Policy or a mapping of its settings, got {type(policy).__name__}")
            policy = Policy.model_validate(dict(policy))  # PolicyError names a bad setting
        self.policy_given = policy is not None
        self.policy = policy or Policy.preset("default")
        from .store import open_store  # SQLAlchemy and Alembic load here, not at import

        target = store if store is not None else store_url
        self._owns_store = isinstance(target, str)
        try:
            self.store: Any = open_store(target)
        except CtxwiseError:
            raise
        except Exception as e:
            if not self._owns_store or not type(e).__module__.startswith(("sqlalchemy", "psycopg", "sqlite3")):
                raise
            scheme = str(target).split(":", 1)[0]
            raise StoreUnavailable(f"cannot open the store {scheme}://...: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}") from None
        self.memory_store: Any = memory_store if memory_store is not None else self.store
        self.counter = counter
        self.runtime = runtime or RuntimeSettings()
        self.summarizer = summarizer or from_settings(self.runtime)
        self.fact_extractor = fact_extractor
        self.memory_decider = memory_decider
        self.on_event = on_event
        self.pipeline = pipeline or Pipeline.default()

    def session(self, user_id: str, session_id: str, *, tools: list[JSONObject] | None = None,
                create: bool = True, policy: Policy | None = None, migrate_policy: bool = False) -> Session:
        """Open the session ``(user_id, session_id)``, creating it if missing; with
        ``create=False`` raise :class:`~ctxwise.errors.SessionNotFound` instead (sessions are
        scoped by user: another user's session id is not found). ``tools`` are the tool schemas
        sent with every call (counted inside the budget).

        A session keeps the policy it was created with. Reopening it compares the fields the
        given policy sets (``policy``, or the manager's when one was given; its
        ``model_fields_set``) with the stored ones; the others keep their stored values, so a
        default that moved in a newer ctxwise changes no stored session. A difference raises
        :class:`~ctxwise.errors.PolicyMismatch` naming the fields (``clearing.clear_at``:
        stored vs given), unless ``migrate_policy=True``: then the session takes the given
        fields (the others as stored), recorded as a ``policy_migrated`` event. A manager built
        without a policy opens existing sessions with their stored one. Process settings
        (``runtime``) are never compared."""
        given = policy or self.policy
        explicit = policy is not None or self.policy_given
        if migrate_policy and explicit:
            given = self._adopted(user_id, session_id, given)
        if create:
            state = self.store.open_session(user_id, session_id, provider=given.provider,  # stored by its first write
                                            policy=given.model_dump(mode="json"), defer=True)
        else:
            state = self.store.load(user_id, session_id)
        diff = policy_diff(state.policy, state.provider, given) if explicit else {}
        if diff and not migrate_policy:
            raise PolicyMismatch(session_id, diff, names={k: setting_name(k) for k in diff})
        use = given if diff else stored_policy(state.policy, state.provider, given)
        return Session(self, user_id, session_id, state, use, tools=tools, migrate=diff)

    def _adopted(self, user_id: str, session_id: str, given: Policy) -> Policy:
        """The policy ``migrate_policy=True`` switches a stored session to: the stored one with
        the fields ``given`` sets (``given`` itself for a session not stored yet). Raises
        PolicyError when the two together do not validate."""
        from .errors import SessionNotFound

        try:
            state = self.store.load(user_id, session_id)
        except SessionNotFound:
            return given
        stored = stored_policy(state.policy, state.provider, given)
        return stored.with_(**given.session_settings(only_set=True))

    def emit(self, event: CompactionEvent) -> None:
        """Log ``event`` as one JSON line and hand it to ``on_event``."""
        log.info(json.dumps(event.log_record(), ensure_ascii=False))
        if self.on_event is not None:
            self.on_event(event)

    def close(self) -> None:
        """Release the store's connections."""
        self.store.close()

    def __enter__(self) -> "ContextManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ContextManager"]
