# The docdelta GitHub Action image: Python, git and docdelta in a virtualenv.
#
# BASE_IMAGE defaults to the official Python slim image; any Debian-like image with
# python3 (>= 3.11) works, with or without pip (python3-venv comes from apt), so the tests
# can build on a locally imported base where no container registry is reachable.
#
# No build argument carries a CA certificate: a workflow cannot pass build arguments to a
# container action. Extra CAs (GitHub Enterprise, a TLS-intercepting proxy) are trusted at
# run time from the `ca-bundle` input, for the GitHub API and the agent's image alike; to
# build the image itself behind such a proxy, use a BASE_IMAGE that already trusts it.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG PIP_VERSION=24.3.1

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PATH=/opt/docdelta/bin:$PATH

# git is what docdelta reads repositories with (the slim images do not ship it), and
# a virtualenv needs ensurepip (Debian's own python3 ships it in python3-venv).
RUN set -eu; \
    if ! command -v git >/dev/null || ! python3 -c "import ensurepip" 2>/dev/null; then \
        apt-get update -qq; \
        apt-get install -y -qq --no-install-recommends git ca-certificates python3-venv >/dev/null; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    git config --system --add safe.directory '*'; \
    python3 -m venv /opt/docdelta; \
    pip install -q --upgrade "pip==${PIP_VERSION}"

# Dependencies first, from pyproject.toml alone, so editing the source reuses this layer.
COPY pyproject.toml /src/docdelta/
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/src/docdelta/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -q -r /tmp/requirements.txt && rm /tmp/requirements.txt

COPY . /src/docdelta
RUN pip install -q --no-deps /src/docdelta && rm -rf /src/docdelta && docdelta --version

# An absolute path: the runner passes its own PATH to the container, which need not name the venv.
ENTRYPOINT ["/opt/docdelta/bin/docdelta", "action"]
