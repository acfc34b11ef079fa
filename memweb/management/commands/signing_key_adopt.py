"""After a deliberate SECRET_KEY rotation: make this node's key the one every node must use."""
from django.core.management import BaseCommand

from memweb.nodes import node_signing_key_adopt


class Command(BaseCommand):
    help = ("Record this node's SECRET_KEY (its fingerprint) as the deployment's signing key. Nodes started "
            "with another key refuse to start until they use this one. Sessions signed with the old key end.")

    def handle(self, *args, **options):
        node_signing_key_adopt()
        self.stdout.write(self.style.SUCCESS("This node's SECRET_KEY is now the deployment's signing key."))
