"""memweb's infrastructure package. It imports nothing here, so an agent process can import
`memweb.client` alone; the Celery app is loaded by `MemwebConfig.ready()` in Django processes and
found as `memweb.celery` by `celery -A memweb`."""
