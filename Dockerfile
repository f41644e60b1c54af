# One image for every Hindsight service: the worker (and the flows it runs), the read API and
# the MCP server (docker-compose.yml). Extras by build argument: "dask" (the default) for
# HINDSIGHT_TASK_RUNNER=dask. The local embedding model (ONNX) is in the base install; add
# "embeddings-torch" only for the PyTorch build of it (several hundred MB; pass --build-arg
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu, or a plain torch pulls CUDA).
FROM python:3.11-slim
ARG EXTRAS=dask
ARG PIP_EXTRA_INDEX_URL
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HINDSIGHT_DATA_DIR=/data PREFECT_SERVER_ANALYTICS_ENABLED=false
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY memory_core ./memory_core
COPY memory_cli ./memory_cli
COPY memory_api ./memory_api
COPY tasks ./tasks
COPY flows ./flows
COPY prefect.yaml ./
RUN pip install -c constraints.txt ".[${EXTRAS}]"
VOLUME /data
ENTRYPOINT ["hindsight"]
CMD ["--help"]
