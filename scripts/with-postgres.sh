#!/usr/bin/env bash
# Run a command with a throwaway PostgreSQL cluster on 127.0.0.1 and CTXWISE_TEST_PG_URL set.
#
#   bash scripts/with-postgres.sh CMD [ARGS...]
#
# * initdb into a fresh temp dir, pg_ctl start on 127.0.0.1 and a free port, trust auth,
#   fsync off (a test cluster), then export
#   CTXWISE_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:PORT/postgres and run CMD.
# * PostgreSQL refuses to run as root: as root, the server runs as the `postgres` system user
#   (created if missing) through `runuser -u postgres --`, and the temp dir is owned by it.
# * The cluster is stopped and its directory removed on exit (trap), whatever CMD returns.
# * Binaries are looked up in /usr/lib/postgresql/*/bin (newest first), then on PATH.
#   Missing binaries: under CI=true this is a failure (exit 3); otherwise CMD runs without
#   the URL and the PostgreSQL-parametrized tests are deselected with a printed warning.
# The exit status is CMD's.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

find_bin() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

if ! PGBIN="$(find_bin)"; then
    if [ "${CI:-}" = "true" ]; then
        echo "with-postgres.sh: ERROR: PostgreSQL binaries (initdb, pg_ctl) not found and CI=true;" \
             "install the postgresql package (see .ci/run)." >&2
        exit 3
    fi
    echo "with-postgres.sh: WARNING: PostgreSQL binaries not found; running WITHOUT PostgreSQL." \
         "PostgreSQL-parametrized tests will be deselected." >&2
    unset CTXWISE_TEST_PG_URL
    exec "$@"
fi

free_port() {
    python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
        useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash postgres
    fi
    as_pg=(runuser -u postgres --)
fi

PGTMP="$(mktemp -d /tmp/ctxwise-pg.XXXXXX)"
chmod 755 "$PGTMP"
if [ "${#as_pg[@]}" -gt 0 ]; then
    chown postgres: "$PGTMP"
fi
PGDATA="$PGTMP/data"
PGLOG="$PGTMP/server.log"

cleanup() {
    local rc=$?
    if [ -f "$PGDATA/postmaster.pid" ]; then
        "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PGTMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${as_pg[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
    >"$PGTMP/initdb.log" 2>&1 || {
    cat "$PGTMP/initdb.log" >&2
    echo "with-postgres.sh: ERROR: initdb failed" >&2
    exit 3
}

started=""
for attempt in 1 2 3 4 5; do
    PGPORT="$(free_port)"
    if "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w -t 60 \
        -o "-h 127.0.0.1 -p $PGPORT -k $PGTMP -c fsync=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null 2>&1; then
        started=1
        break
    fi
done
if [ -z "$started" ]; then
    cat "$PGLOG" >&2 || true
    echo "with-postgres.sh: ERROR: PostgreSQL did not start" >&2
    exit 3
fi

export CTXWISE_TEST_PG_URL="postgresql+psycopg://postgres@127.0.0.1:${PGPORT}/postgres"
echo "with-postgres.sh: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:${PGPORT}" >&2

set +e
"$@"
rc=$?
set -e
exit "$rc"
