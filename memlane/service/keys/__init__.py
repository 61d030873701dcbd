"""API keys as data: who a request is (keyring), what it may do and which users it
reaches (reach), how a key's secret is kept (secrets) and how fast it may call
(rate_limit)."""
