# Root filesystem of the cgroup v2 test VM (tests/vm/run exports it to an ext4 disk image). The harness's
# runtime dependencies and pytest live in /opt/venv; the checkout itself arrives on a second disk at
# each boot, so only a change to this file, pyproject.toml or boot.sh rebuilds the image.
ARG BASE_IMAGE=harness-base:bookworm
FROM ${BASE_IMAGE}
COPY pyproject.toml build-ca.pe[m] /tmp/build/
RUN set -eu; \
    if [ -f /tmp/build/build-ca.pem ]; then export PIP_CERT=/tmp/build/build-ca.pem; fi; \
    python3 -m venv /opt/venv; \
    deps=$(python3 -c 'import tomllib; p = tomllib.load(open("/tmp/build/pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + [d for d in p["optional-dependencies"]["dev"] if d.startswith("pytest")]))'); \
    echo "$deps" | xargs -d '\n' /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --quiet; \
    rm -rf /tmp/build; \
    useradd --uid 1000 --user-group --create-home --shell /bin/sh delegate; \
    mkdir /work
COPY boot.sh /sbin/harness-vm-boot
