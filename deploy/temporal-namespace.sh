#!/bin/sh
# Run by docker-compose.yml's temporal-namespace service (temporalio/admin-tools image): waits until
# Temporal serves, then registers the namespace longtools uses, with RETENTION (how long a closed
# task's result stays readable). An existing namespace is left as it is: change its retention with
#   temporal operator namespace update --namespace NAME --retention 720h
set -eu

: "${TEMPORAL_ADDRESS:?}" "${NAMESPACE:?}" "${RETENTION:?}"

attempt=1
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  if [ "$attempt" -ge 60 ]; then
    echo "Temporal at $TEMPORAL_ADDRESS did not become healthy" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done

if temporal operator namespace describe --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE exists; left as it is"
else
  temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" \
    --address "$TEMPORAL_ADDRESS"
  echo "namespace $NAMESPACE registered with retention $RETENTION"
fi

# A new namespace takes a moment to reach every Temporal service; wait until it answers.
attempt=1
until temporal operator namespace describe --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  if [ "$attempt" -ge 30 ]; then
    echo "namespace $NAMESPACE does not answer" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 1
done
