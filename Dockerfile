# One image for every ctrlscope process (dashboard, worker, simulated cluster).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN useradd --create-home ctrlscope && mkdir -p /app/run && chown ctrlscope /app/run
USER ctrlscope
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "dashboard.asgi:application"]
