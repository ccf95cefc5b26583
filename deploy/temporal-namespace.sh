#!/bin/sh
# Run by docker-compose.yml's temporal-namespace service (temporalio/admin-tools image): waits until
# Temporal serves, then registers the namespace longtools uses, with RETENTION (how long Temporal
# keeps a closed workflow: a finished task, and the run-once and idempotency records; tasks/get
# still answers for a task only within its LONGTOOLS_TASK_TTL_S), and the search attribute
# longtools sets on every task. Safe on every start. An existing namespace is left as it is:
# change its retention with
#   temporal operator namespace update --namespace NAME --retention 720h
set -eu

: "${TEMPORAL_ADDRESS:?}" "${NAMESPACE:?}" "${RETENTION:?}"

# A keyed hash of each task's owner, which longtools counts a principal's active tasks by. Temporal
# refuses to start a workflow that names an unregistered search attribute, so every task would fail.
OWNER_ATTRIBUTE=LongtoolsOwner

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

# With SQL visibility a search attribute belongs to one namespace. Creating one that exists with
# the same type is a no-op; should the CLI still say it exists, the listing decides.
owner_registered() {
  temporal operator search-attribute list --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS" \
    | grep -Eq "^[[:space:]]*$OWNER_ATTRIBUTE[[:space:]]+Keyword[[:space:]]*\$"
}
if temporal operator search-attribute create --name "$OWNER_ATTRIBUTE" --type Keyword \
  --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS"; then
  echo "search attribute $OWNER_ATTRIBUTE (Keyword) registered in $NAMESPACE"
elif owner_registered; then
  echo "search attribute $OWNER_ATTRIBUTE (Keyword) exists in $NAMESPACE"
else
  echo "search attribute $OWNER_ATTRIBUTE could not be registered in $NAMESPACE" >&2
  exit 1
fi

# Wait until a visibility query may name it (the frontend reads search attributes from a cache).
attempt=1
until temporal workflow count --query "$OWNER_ATTRIBUTE = 'probe'" --namespace "$NAMESPACE" \
  --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  if [ "$attempt" -ge 30 ]; then
    echo "search attribute $OWNER_ATTRIBUTE is not usable in $NAMESPACE" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 1
done
