# Runtime image for the runner and the bench scripts. No model is baked in: the Docker backend mounts
# each run's model and script read-only. Build with `make image` (see README, "Docker backend").
#
# Layer order keeps rebuilds quick: the Python packages (slow, rarely changed) come first, the harness
# source (small, often changed) last. Build args:
#   BASE_IMAGE     any Debian-like image with python3 (>= 3.10) and its venv module
#   WITH_TORCH     1 adds PyTorch (CPU build from TORCH_INDEX_URL)
#   WITH_LITERT    1 adds LiteRT (ai-edge-litert) for .tflite models
#   WITH_NCNN      1 adds ncnn for RUNTIME=ncnn and .param models (the host converts ONNX models; pnnx stays there)
# If the build context holds build-ca.pem (the `harness image` command adds the host's pip CA bundle
# there), pip trusts it while installing; it stays in the deps stage and never reaches the final image.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS deps
ARG WITH_TORCH=0
ARG WITH_LITERT=0
ARG WITH_NCNN=0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG RUNTIME_PACKAGES="numpy>=1.24 onnxruntime>=1.17 psutil>=5.9 setuptools>=68"
COPY Dockerfile build-ca.pe[m] /tmp/build/
RUN set -eu; \
    if [ -f /tmp/build/build-ca.pem ]; then export PIP_CERT=/tmp/build/build-ca.pem; fi; \
    python3 -m venv /opt/venv; \
    pip() { /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --quiet "$@"; }; \
    pip $RUNTIME_PACKAGES; \
    if [ "$WITH_TORCH" = 1 ]; then pip --extra-index-url "$TORCH_INDEX_URL" torch; fi; \
    if [ "$WITH_LITERT" = 1 ]; then pip ai-edge-litert; fi; \
    if [ "$WITH_NCNN" = 1 ]; then pip ncnn; fi

FROM ${BASE_IMAGE}
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin harness
COPY --from=deps /opt/venv /opt/venv
COPY pyproject.toml README.md /tmp/src/
COPY harness /tmp/src/harness
RUN /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --quiet --no-deps --no-index \
        --no-build-isolation /tmp/src \
    && rm -rf /tmp/src
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER harness
WORKDIR /tmp
CMD ["python", "-m", "harness.measure.runner", "--help"]
