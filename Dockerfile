FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
COPY pyproject.toml README.md ./
COPY memlane memlane
COPY examples examples
RUN pip install --no-cache-dir .
EXPOSE 8000 5555
CMD ["memlane", "serve", "--host", "0.0.0.0", "--port", "8000"]
