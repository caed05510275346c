"""Pulumi component resources. Each imports only the pulumi-gcp modules it uses."""
