#!/bin/sh
# Run by docker-compose.yml's temporal-namespace service (temporalio/admin-tools image): waits until
# Temporal serves, then registers the namespace longtools uses, with RETENTION (how long Temporal
# keeps a closed workflow: a finished task, and the run-once and idempotency records; tasks/get
# still answers for a task only within its LONGTOOLS_TASK_TTL_S), and the search attributes
# longtools sets on its tasks. Safe on every start. An existing namespace is left as it is:
# change its retention with
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

# With SQL visibility a search attribute belongs to one namespace. Creating one that exists with
# the same type is a no-op; should the CLI still say it exists, the listing decides (the same name
# with another type does not count: Temporal would refuse longtools' values for it). Then wait
# until a visibility query may name it (the frontend reads search attributes from a cache).
register_search_attribute() {
  name=$1
  type=$2
  if temporal operator search-attribute create --name "$name" --type "$type" \
    --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS"; then
    echo "search attribute $name ($type) registered in $NAMESPACE"
  elif temporal operator search-attribute list --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS" \
    | grep -Eq "^[[:space:]]*$name[[:space:]]+$type[[:space:]]*\$"; then
    echo "search attribute $name ($type) exists in $NAMESPACE"
  else
    echo "search attribute $name ($type) could not be registered in $NAMESPACE" >&2
    exit 1
  fi
  attempt=1
  until temporal workflow count --query "$name = 'probe'" --namespace "$NAMESPACE" \
    --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
    if [ "$attempt" -ge 30 ]; then
      echo "search attribute $name is not usable in $NAMESPACE" >&2
      exit 1
    fi
    attempt=$((attempt + 1))
    sleep 1
  done
}

# A keyed hash of each task's owner, which longtools counts a principal's active tasks by. Temporal
# refuses to start a workflow that names an unregistered search attribute, so every task would fail.
register_search_attribute LongtoolsOwner Keyword
# Keyed tags of the people and groups a task's open decision waits for, which /decisions finds
# tasks by. Temporal refuses the workflow's upsert of an unregistered one: every task that asks for
# a decision would fail its workflow task, again and again, until it exists.
register_search_attribute LongtoolsDeciders KeywordList
