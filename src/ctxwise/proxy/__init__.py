"""Provider-compatible proxy routes for ``ctxwise serve`` (issue 27): so far the
tenant-key and 401 rules in :mod:`.auth`; the routes themselves are not built yet."""
