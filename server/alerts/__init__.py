"""Alerts: events worth telling people about (stored, de-duplicated, rate-limited) and their delivery to webhooks
(JSON signed with HMAC, or a Slack-compatible payload) and email."""
