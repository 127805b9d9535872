#!/bin/sh
# Submits the onceflow job to the docker-compose cluster at most once (service submit-job).
#
# `docker compose up` starts this one-shot container again each time, so submitting must be idempotent:
# - while a job of the same name is running, restarting or scheduled, it does nothing: a second copy
#   with the same transactional id prefixes would abort the first one's transactions;
# - otherwise it resumes from the newest retained checkpoint or savepoint in the state volume (after
#   `docker compose down` and `up`, or a cancel), and starts without state only when there is none.
# For a clean hand-over stop the job with a savepoint before `docker compose down` (docs/testing.md, "docker-compose").
#
# Arguments: the job's settings (--key value ...), passed on unchanged; ${VAR} in them is left for the
# job to replace, so secrets stay off the command line.
# Environment: JOB_NAME (required) the name the job registers, "onceflow <input topics> -> <output topic>";
#   FLINK (/opt/flink/bin/flink) Flink's CLI; JOBMANAGER (jobmanager:8081) its REST address;
#   JOB_JAR_DIR (/opt/onceflow/target) where `mvn package` put the job jar;
#   STATE_DIR (/var/lib/onceflow) holding checkpoints/<job id>/chk-N and savepoints/savepoint-*.
# Exit status: 0 submitted or already running; 2 nothing submitted (no jar, JobManager unreachable).
set -eu

FLINK=${FLINK:-/opt/flink/bin/flink}
JOBMANAGER=${JOBMANAGER:-jobmanager:8081}
JOB_JAR_DIR=${JOB_JAR_DIR:-/opt/onceflow/target}
STATE_DIR=${STATE_DIR:-/var/lib/onceflow}
: "${JOB_NAME:?set JOB_NAME to the name the job registers, e.g. onceflow events -> events-deduplicated}"

jar=
for candidate in "$JOB_JAR_DIR"/onceflow-*-job.jar; do
  if [ -f "$candidate" ]; then jar=$candidate; break; fi
done
if [ -z "$jar" ]; then
  echo "submit-job: no onceflow-*-job.jar in $JOB_JAR_DIR (./target): run 'mvn package -DskipTests', then 'docker compose up -d' again" >&2
  exit 2
fi

if ! jobs=$("$FLINK" list -m "$JOBMANAGER" 2>&1); then
  echo "submit-job: cannot list the jobs of the JobManager at $JOBMANAGER: $(printf '%s' "$jobs" | tail -n 1)" >&2
  exit 2
fi
# `flink list` prints "<date> : <job id> : <job name> (<state>)" for every job that has not ended.
if printf '%s\n' "$jobs" | grep -F -q " : $JOB_NAME ("; then
  echo "submit-job: '$JOB_NAME' is already running on $JOBMANAGER; nothing to submit"
  exit 0
fi

# A complete checkpoint or savepoint has its _metadata file; the newest one is where the job left off.
# (ls -t is the portable way to sort by time; the names are Flink's own, without blanks.)
# shellcheck disable=SC2012
latest=$(ls -1t "$STATE_DIR"/checkpoints/*/chk-*/_metadata "$STATE_DIR"/savepoints/savepoint-*/_metadata 2>/dev/null \
  | head -n 1 || true)
if [ -n "$latest" ]; then
  state=$(dirname "$latest")
  echo "submit-job: resuming '$JOB_NAME' from $state"
  exec "$FLINK" run -m "$JOBMANAGER" --detached --fromSavepoint "$state" "$jar" "$@"
fi
echo "submit-job: starting '$JOB_NAME' without state: no retained checkpoint or savepoint in $STATE_DIR"
exec "$FLINK" run -m "$JOBMANAGER" --detached "$jar" "$@"
