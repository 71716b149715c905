"""Alembic migrations for the ctxwise store, shipped inside the package.

Run by :func:`ctxwise.store.migrate.upgrade` (every ``Store()`` open) or by hand:
``alembic -c src/ctxwise/alembic.ini -x url=sqlite:///ctxwise.db upgrade head``.
"""
