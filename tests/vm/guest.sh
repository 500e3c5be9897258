#!/bin/sh
# PID 1 inside the test VM, after boot.sh mounted the work disk at /work. Mounts cgroup2 as a systemd
# host would, puts the test session in a scope of its own (not the root cgroup, which is exempt from the
# "no internal processes" rule), runs pytest with the arguments from /work/out/args, writes its exit
# status next to the junit file, and powers the VM off.
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /run 2>/dev/null
hostname harness-vm
echo "+memory +cpu +cpuset" > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/system.slice/tests.scope
echo "+memory +cpu +cpuset" > /sys/fs/cgroup/system.slice/cgroup.subtree_control
echo $$ > /sys/fs/cgroup/system.slice/tests.scope/cgroup.procs

set --
while IFS= read -r arg; do set -- "$@" "$arg"; done < /work/out/args
echo "harness-vm: $(uname -r), $(nproc) CPUs, cgroup $(stat -fc %T /sys/fs/cgroup), pytest $*"
cd /work/src
TERM=dumb HOME=/root PATH=/opt/venv/bin:$PATH PYTHONPATH=/work/src PYTHONDONTWRITEBYTECODE=1 HARNESS_IN_VM=1 \
  python -m pytest -p no:cacheprovider -v -s --durations=0 --junitxml=/work/out/junit.xml "$@"
echo $? > /work/out/status
cd /
mount -o remount,ro /work || sync  # this script is open on /work: remount instead of umount
echo o > /proc/sysrq-trigger
sleep 60  # the power-off is asynchronous; PID 1 must not exit before it
