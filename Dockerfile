# One image for every Hindsight service (worker, flows, later the API and MCP server).
FROM python:3.11-slim
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
RUN pip install -c constraints.txt .
VOLUME /data
ENTRYPOINT ["hindsight"]
CMD ["--help"]
