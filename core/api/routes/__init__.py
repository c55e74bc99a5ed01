"""One router per resource: changes, events, dead letters, webhooks, health."""
