"""The NinjaAPI root: every app's Router is mounted here under /api/."""
from ninja import NinjaAPI

api = NinjaAPI(title="memweb API", version="1", urls_namespace="api")
