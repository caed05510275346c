"""The health-check tests use the shared fixtures in tests/conftest.py."""
