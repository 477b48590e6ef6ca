#!/bin/sh
# Waits until the Temporal frontend at TEMPORAL_ADDRESS serves, then creates
# the namespace TEMPORAL_NAMESPACE (default: default) unless it exists.
# docker-compose.yml's temporal-namespace service runs it in
# temporalio/admin-tools; scripts/engine.sh runs it with the pinned CLI
# (TEMPORAL_CLI).
set -eu
cli=${TEMPORAL_CLI:-temporal}
ns=${TEMPORAL_NAMESPACE:-default}
tries=0
until "$cli" operator cluster health >/dev/null 2>&1 &&
  { "$cli" operator namespace describe --namespace "$ns" >/dev/null 2>&1 ||
    "$cli" operator namespace create --namespace "$ns"; }; do
  tries=$((tries + 1))
  if [ "$tries" -ge 120 ]; then
    echo "namespace: Temporal at ${TEMPORAL_ADDRESS:-127.0.0.1:7233} did not take namespace $ns in 2 minutes" >&2
    exit 1
  fi
  sleep 1
done
echo "namespace: $ns is ready"
