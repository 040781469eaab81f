#!/bin/sh
# Slurm Epilog for GPU hosts running harness jobs: stop and remove the containers labelled
# with the ending job's id (org.harness.slurm-job=$SLURM_JOB_ID).
#
# Why: containers are children of dockerd, not of the job, so Slurm's kill, cgroups and
# device limits never reach them. A job killed with SIGKILL (`scancel -s KILL`, an OOM
# kill of the batch step) leaves its container running on the GPU; this script, run by
# slurmd as root after every job (slurm.conf: Epilog=/path/to/slurm-epilog.sh), stops it.
# The run folder stays unsealed; the next `harness run` on the host seals it `interrupted`.
#
# Exit 0 when nothing of the job runs any more; 1 when a container could not be stopped
# (Slurm then drains the node: a host with a stray GPU container is not fit).
# HARNESS_EPILOG_GRACE: seconds `docker stop` waits before SIGKILL (default 10; keep it
# under slurm.conf's EpilogMsgTime/KillWait budget).
set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
job=${SLURM_JOB_ID:-}
case "$job" in
  ''|*[!0-9]*) exit 0 ;;  # not a job id: nothing of ours to stop
esac
grace=${HARNESS_EPILOG_GRACE:-10}
case "$grace" in
  ''|*[!0-9]*) grace=10 ;;
esac
command -v docker >/dev/null 2>&1 || exit 0
label="org.harness.slurm-job=$job"
ids=$(docker ps -aq --filter "label=$label" 2>/dev/null) || {
  echo "harness epilog: job $job: docker did not answer" >&2; exit 1; }
[ -n "$ids" ] || exit 0
# shellcheck disable=SC2086  # ids are docker's hex ids, one per line
docker stop -t "$grace" $ids >/dev/null 2>&1
# shellcheck disable=SC2086
docker rm -f $ids >/dev/null 2>&1
left=$(docker ps -q --filter "label=$label" 2>/dev/null)
if [ -n "$left" ]; then
  echo "harness epilog: job $job: containers still running: $left" >&2
  exit 1
fi
echo "harness epilog: job $job: stopped and removed $(echo "$ids" | wc -l) container(s)" >&2
exit 0
