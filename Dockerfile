# One image for every ctrlscope process (dashboard, worker, simulated cluster, migrations): the app
# and its runtime pins (requirements.txt) only; no test tooling, no tests/ or bench/ (.dockerignore).
# WORKDIR /app is a checkout's layout: `python manage.py COMMAND` (or `python -m ctrlscope COMMAND`)
# runs anything, and the writable state is /app/run (CTRLSCOPE_RUN_DIR) and /app/db (CTRLSCOPE_DB).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY manage.py pyproject.toml ./
COPY ctrlscope ctrlscope
COPY controllers controllers
COPY dashboard dashboard
COPY templates templates
COPY protocol protocol
# A numeric user, so that Kubernetes' runAsNonRoot can verify it (the manifests run as 1000:1000).
RUN groupadd --gid 1000 ctrlscope \
    && useradd --uid 1000 --gid 1000 --home-dir /app --no-create-home --shell /usr/sbin/nologin ctrlscope \
    && mkdir -p /app/run /app/db && chown 1000:1000 /app/run /app/db
USER 1000:1000
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "dashboard.asgi:application"]
