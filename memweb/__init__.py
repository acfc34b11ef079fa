"""memweb's infrastructure package. It imports nothing here, so importing one of its modules sets up no
more of the stack than that module needs; the Celery app is loaded by `MemwebConfig.ready()` in Django
processes and found as `memweb.celery` by `celery -A memweb`."""
