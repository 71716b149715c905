#!/usr/bin/env bash
# Run a command with a throwaway PostgreSQL cluster on 127.0.0.1 and CTXWISE_TEST_PG_URL set.
# Placeholder until the persistence work lands: runs the command as is.
exec "$@"
