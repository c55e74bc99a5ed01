"""Webhook delivery (docs/PROTOCOL.md, "Webhooks"): registration, the SSRF-safe transport, fan-out, delivery.

A sibling of core.worker and core.producer: it imports the store, messaging and model, never the job.
"""
