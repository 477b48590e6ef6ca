#!/bin/sh
# Creates Temporal's two PostgreSQL databases and brings both schemas up to
# the server's version. Each step may run again and changes nothing then.
# docker-compose.yml's temporal-schema service runs it in temporalio/admin-tools;
# scripts/engine.sh runs it with the SQL tool built at the same version.
#
# The tool reads its connection from SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER
# and SQL_PASSWORD. TEMPORAL_SQL_TOOL and TEMPORAL_SCHEMA_DIR default to the
# admin-tools image's.
set -eu
tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}
schema=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
for db in temporal temporal_visibility; do
  case $db in
    temporal) versioned=$schema/temporal/versioned ;;
    *) versioned=$schema/visibility/versioned ;;
  esac
  echo "schema: $db"
  "$tool" --db "$db" create-database
  "$tool" --db "$db" setup-schema -v 0.0
  "$tool" --db "$db" update-schema -d "$versioned"
done
