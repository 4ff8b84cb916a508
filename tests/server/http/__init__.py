"""Tests of server/http/ (the HTTP edge under load and abuse)."""
