import os

from django.core.wsgi import get_wsgi_application

from memweb.embedded_db import ensure_configured
from memweb.gunicorn_conf import close_after_refused_body
from memweb.nodes import node_signing_key_check

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
ensure_configured()
application = close_after_refused_body(get_wsgi_application())
node_signing_key_check()
