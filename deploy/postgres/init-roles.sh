#!/bin/sh
# The mirror's database and roles, made once when the postgres image
# initialises its data directory (docker-entrypoint-initdb.d):
#
#   shipnotify_owner    LOGIN; owns the database and its tables; `shipnotify migrate` runs as it
#   shipnotify_runtime  NOLOGIN; the migrations grant it only the DML the product uses
#   shipnotify_app      LOGIN, member of shipnotify_runtime; the worker and the CLI run as it
#
# The passwords come from MIRROR_OWNER_PASSWORD and MIRROR_APP_PASSWORD.
# psql connects as POSTGRES_USER (default postgres) through PGHOST/PGPORT or
# the image's socket.
set -eu
: "${MIRROR_OWNER_PASSWORD:?set MIRROR_OWNER_PASSWORD}"
: "${MIRROR_APP_PASSWORD:?set MIRROR_APP_PASSWORD}"
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v owner_password="$MIRROR_OWNER_PASSWORD" -v app_password="$MIRROR_APP_PASSWORD" <<'SQL'
CREATE ROLE shipnotify_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE shipnotify_runtime NOLOGIN;
CREATE ROLE shipnotify_app LOGIN PASSWORD :'app_password' IN ROLE shipnotify_runtime;
CREATE DATABASE shipnotify OWNER shipnotify_owner;
REVOKE ALL ON DATABASE shipnotify FROM PUBLIC;
GRANT CONNECT ON DATABASE shipnotify TO shipnotify_runtime;
SQL
