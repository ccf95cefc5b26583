#!/bin/sh
# Run by docker-compose.yml's temporal-schema service (temporalio/admin-tools image) before the
# Temporal server starts: creates Temporal's two PostgreSQL databases and brings their schemas to
# this Temporal version. Every step is a no-op when already done, so it runs on every `up`.
# PostgreSQL answers over TCP (pg_isready -h 127.0.0.1) before this starts, and a failed run is
# retried by Docker (restart: on-failure), so a transient error does not fail `up`.
set -eu

: "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"  # SQL_PASSWORD is read by the tool
port="${DB_PORT:-5432}"
schema=/etc/temporal/schema/postgresql/v12

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$port" -u "$POSTGRES_USER" "$@"
}

for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  dir="$schema/${pair##*:}/versioned"
  sql --db "$db" create  # an existing database is fine
  sql --db "$db" setup-schema -v 0.0  # only the version table; skipped once a version is set
  sql --db "$db" update-schema -d "$dir"
done
echo "Temporal schemas are up to date"
