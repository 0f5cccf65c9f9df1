#!/usr/bin/env bash
# `make demo`: sync and index a sample knowledge base on the embedded defaults (no servers to
# install, no API key), then show a vector search, a Cypher query and the services. Runs
# `vedana ask` too when a language model can answer (scripts/demo_model.py decides which).
set -euo pipefail
cd "$(dirname "$0")/.."

VEDANA="${VEDANA:-.venv/bin/vedana}"
PYTHON="${VEDANA_PYTHON:-$(dirname "$VEDANA")/python}"
SAMPLE="${SAMPLE:-samples/people}"
export VEDANA_HOME="${VEDANA_HOME:-.vedana-demo}"

# The words as a shell reads them back: single quotes around any word with more than safe characters.
quoted() {
  local word out=()
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=("$word"); else out+=("'${word//\'/\'\\\'\'}'"); fi
  done
  printf '%s' "${out[*]}"
}

if [[ -t 2 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
# Shows a step's command as it can be pasted back into a shell, then runs it.
step() { printf '\n%s== %s%s\n$ %s\n' "$bold" "$1" "$plain" "$(quoted "${@:2}")" >&2; "${@:2}"; }

step "1/6 sync the sample into Postgres" \
  "$VEDANA" sync --data-model "$SAMPLE/model" --data "$SAMPLE/data"
step "2/6 embed text into pgvector and load the graph" \
  "$VEDANA" index
step "3/6 a second index has nothing to do" \
  "$VEDANA" index
step "4/6 vector search: interests close to \"marsupials\"" \
  "$VEDANA" search interest interest_name "marsupials" --top-n 5
step "5/6 Cypher: the most shared interests" \
  "$VEDANA" cypher "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest)
                    RETURN i.interest_name AS interest, count(p) AS people
                    ORDER BY people DESC LIMIT 5"
step "6/6 the embedded services" \
  "$VEDANA" services status

# `vedana ask` whenever a model can answer: MODEL with its key, an API base, or a local Ollama model.
if model=$("$PYTHON" scripts/demo_model.py); then
  step "ask, with $model" env MODEL="$model" "$VEDANA" ask "Who likes koalas, and where do they live?"
else
  printf '\n(skipping `vedana ask`: %s)\n' "$model" >&2
fi
# The demo never touches the default home (./.vedana, a user's own knowledge base): say how to reach its own.
printf '\nThe knowledge base is in %s. To use it from your shell, first run:\n  export VEDANA_HOME=%s\n' \
  "$VEDANA_HOME" "$VEDANA_HOME" >&2
printf 'then, e.g.: %s   (stop its services with: %s services stop)\n' \
  "$(quoted "$VEDANA" cypher "MATCH (p:person) RETURN count(p) AS people")" "$VEDANA" >&2
