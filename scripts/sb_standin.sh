#!/usr/bin/env bash
# Azure Service Bus stand-in over AMQP 1.0, for trying qdeck's Service Bus paths by hand and for
# the tests (tests/servicebus_amqp_scene.rs). Runs in the foreground until killed.
#
#   scripts/sb_standin.sh PORT [--queue NAME[,max-delivery=N][,sessions][,lock=SECONDS]]...
#                              [--topic TOPIC] [--subscription TOPIC/SUB[,options]]...
#                              [--management-port N] [--entra-token TOKEN=Listen,Send,Manage]...
#
# stdout line 1: the connection string, emulator form (plain AMQP, no TLS):
#   Endpoint=sb://127.0.0.1:PORT;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=...;UseDevelopmentEmulator=true;
# stdout line 2: management=http://127.0.0.1:MPORT (the ATOM management API; MPORT = PORT+1 by default)
#
# Python: $QDECK_TEST_PYTHON, else ~/.cache/qdeck-ci/venv/bin/python; it needs python-qpid-proton.
# QDECK_SB_STANDIN_FAULT (comma-separated: peek-bumps-delivery-count, slow-accept=MS,
# detach-receiver-after=N) breaks it on purpose; see tests/fixtures/servicebus_amqp/faults.py.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${QDECK_TEST_PYTHON:-$HOME/.cache/qdeck-ci/venv/bin/python}"
if [ ! -x "$py" ] && ! command -v "$py" >/dev/null 2>&1; then
  echo "sb_standin: no Python at $py; create the venv: python3 -m venv ~/.cache/qdeck-ci/venv && ~/.cache/qdeck-ci/venv/bin/pip install python-qpid-proton azure-servicebus (or set QDECK_TEST_PYTHON)" >&2
  exit 2
fi
if ! "$py" -c 'import proton' 2>/dev/null; then
  echo "sb_standin: $py cannot import proton; install it: $py -m pip install python-qpid-proton" >&2
  exit 2
fi
exec "$py" -u "$here/tests/fixtures/servicebus_amqp/standin.py" "$@"
