"""What runs inside the limited environment: the runner (spawn, clocks, sampler, kernel peaks), cgroup readers
and writers, the bench-script side (reporting protocol, timed loop, inputs), the frozen RunSpec and the provenance
probes. Stdlib first: this is the code the runtime image carries."""
