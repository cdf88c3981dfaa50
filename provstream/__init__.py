"""provstream: W3C PROV-O provenance for AI agents and RAG queries, event-sourced on Kafka."""

__version__ = "0.1.0"
