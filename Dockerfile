# vitalflow: one image for web, cluster and runner (compose.yaml picks the command).
# Build: docker build -t vitalflow .   Run: see the README's Production section.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VAR_DIR=/var/lib/vitalflow \
    STATIC_ROOT=/app/static \
    MEDIA_ROOT=/var/lib/vitalflow/media

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY config ./config
COPY ops ./ops
COPY workflows ./workflows
COPY ingest ./ingest
COPY labs ./labs
COPY graphs ./graphs
# A wheel install (not editable): templates and static files come with the packages.
RUN useradd --system --home-dir /var/lib/vitalflow vitalflow \
    && pip install --no-cache-dir '.[s3]' \
    && rm -rf build *.egg-info \
    && SECRET_KEY=collectstatic-only vitalflow collectstatic --noinput -v0 \
    && mkdir -p /var/lib/vitalflow/media \
    && chown -R vitalflow /var/lib/vitalflow

USER vitalflow
EXPOSE 8000
# The whole process set in one container; compose.yaml runs one kind per service instead.
CMD ["vitalflow", "serve", "--host", "0.0.0.0", "--port", "8000"]
