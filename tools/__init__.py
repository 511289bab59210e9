"""Developer tooling: the jars `tools/fetch-jars.sh` fetches and the local Kafka broker; not installed."""
