"""Nodes of one deployment must sign with one SECRET_KEY (memweb.nodes)."""
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from memweb.models import SigningKeyFingerprint
from memweb.nodes import node_signing_key_check, signing_key_fingerprint

pytestmark = pytest.mark.django_db

KEY = "the-deployment-key-" + "k" * 40


def test_it_records_the_first_nodes_key_as_a_fingerprint_not_the_key(settings):
    settings.SECRET_KEY = KEY
    node_signing_key_check()
    node_signing_key_check()  # the same key again: a second node of the same deployment
    stored = SigningKeyFingerprint.objects.get()
    assert stored.fingerprint == signing_key_fingerprint()
    assert KEY not in stored.fingerprint


def test_it_refuses_a_node_with_another_key_naming_the_setting(settings):
    settings.SECRET_KEY, settings.SECRET_KEY_IS_NODE_LOCAL = KEY, False
    node_signing_key_check()
    settings.SECRET_KEY = "another-key-" + "o" * 40
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY differs") as refused:
        node_signing_key_check()
    assert "node-local" not in str(refused.value)


def test_it_says_when_the_refused_key_is_a_node_local_one(settings):
    settings.SECRET_KEY = KEY
    node_signing_key_check()
    settings.SECRET_KEY, settings.SECRET_KEY_IS_NODE_LOCAL = "generated-in-data-folder-" + "g" * 40, True
    with pytest.raises(ImproperlyConfigured, match="node-local key from its data folder"):
        node_signing_key_check()


def test_it_accepts_a_rotated_key_once_adopted(settings):
    settings.SECRET_KEY = KEY
    node_signing_key_check()
    settings.SECRET_KEY = "rotated-key-" + "r" * 40
    call_command("signing_key_adopt")
    node_signing_key_check()
    assert SigningKeyFingerprint.objects.get().fingerprint == signing_key_fingerprint()
