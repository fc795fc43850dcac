# The dashboard alone: requirements.txt (no torch, no pipeline) and Debian's Chromium, which
# kaleido drives to export figures as PDF/SVG/PNG. docs/deploy.md has the commands.
FROM python:3.11-slim

# Read-only by default: a deployment shows a workspace and writes nothing to it; study
# answers go to /state (CONCEPTLENS_STATE_DIR) or to $CONCEPTLENS_ANSWERS_URL.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BROWSER_PATH=/usr/bin/chromium \
    HF_HUB_OFFLINE=1 \
    CONCEPTLENS_READ_ONLY=1 \
    CONCEPTLENS_STATE_DIR=/state \
    CONCEPTLENS_WORKSPACE=/workspace

# fonts-liberation: Arial's metrics, the font every figure asks for and a PDF embeds.
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-liberation \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY .streamlit .streamlit
COPY app.py .
COPY serve.py .
COPY components components
COPY pages pages
COPY participant participant
COPY conceptlens conceptlens

RUN useradd --create-home --uid 1000 conceptlens \
    && mkdir -p /state /workspace \
    && chown conceptlens /state
USER conceptlens

EXPOSE 8501
VOLUME ["/state"]
# Healthy once the server has checked its workspace (serve.py's warm-up; 503 until then).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/conceptlens/ready')"
ENTRYPOINT ["streamlit", "run", "serve.py", "--server.port=8501", "--server.address=0.0.0.0", "--"]
# Arguments after the image name replace this, e.g. `--workspace https://host/ws`.
CMD ["--workspace", "/workspace"]
