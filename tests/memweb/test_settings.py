"""Settings read from the environment: bad values stop start-up with a message
naming the variable, and production variables pass `check --deploy`."""
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from memweb.env import env_bool, env_choice, env_float, env_int, env_list
from memweb.llm.config import ModelPrice, read_prices, read_role_config
from tests.support.processes import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def test_it_names_the_variable_of_a_bad_boolean(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe'.*true"):
        env_bool("DEBUG", False)


def test_it_names_the_variable_and_bound_of_a_bad_integer(monkeypatch):
    monkeypatch.setenv("MEMWEB_PORT", "eighty")
    with pytest.raises(ImproperlyConfigured, match="MEMWEB_PORT"):
        env_int("MEMWEB_PORT", 8000)
    monkeypatch.setenv("MEMWEB_PORT", "0")
    with pytest.raises(ImproperlyConfigured, match="minimum 1"):
        env_int("MEMWEB_PORT", 8000, minimum=1)


def test_it_lists_accepted_choices(monkeypatch):
    monkeypatch.setenv("MEMWEB_EMBEDDING_MODEL", "word2vec")
    with pytest.raises(ImproperlyConfigured, match="all-MiniLM-L6-v2, bge-m3"):
        env_choice("MEMWEB_EMBEDDING_MODEL", "all-MiniLM-L6-v2", ("all-MiniLM-L6-v2", "bge-m3"))


def test_it_parses_lists_and_floats(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", " a.example , b.example ,")
    monkeypatch.setenv("MEMWEB_LLM_TEMPERATURE", "3.5")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]
    with pytest.raises(ImproperlyConfigured, match="MEMWEB_LLM_TEMPERATURE=3.5 is above the maximum 2.0"):
        env_float("MEMWEB_LLM_TEMPERATURE", 0.0, maximum=2.0)


def test_it_lets_a_role_override_the_shared_llm_settings(monkeypatch):
    monkeypatch.setenv("MEMWEB_LLM_BASE_URL", "http://shared.test/v1")
    monkeypatch.setenv("MEMWEB_LLM_MODEL", "shared-model")
    monkeypatch.setenv("MEMWEB_LLM_REFLECTOR_MODEL", "reflector-model")
    reflector, actor = read_role_config("reflector"), read_role_config("actor")
    assert (reflector.model, actor.model) == ("reflector-model", "shared-model")
    assert not reflector.is_offline and reflector.base_url == "http://shared.test/v1"
    monkeypatch.delenv("MEMWEB_LLM_BASE_URL")
    assert read_role_config("actor").is_offline


def _manage(*args, **env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=120)


def test_it_reads_model_prices_and_names_a_bad_pair():
    prices = read_prices("gpt-4o-mini=0.15:0.6, qwen2.5:7b=0:0")
    assert prices == {"gpt-4o-mini": ModelPrice(0.15, 0.6), "qwen2.5:7b": ModelPrice(0.0, 0.0)}
    assert prices["gpt-4o-mini"].cost(1_000_000, 500_000) == pytest.approx(0.45)
    for bad in ("gpt-4o=cheap", "=1:2", "m=1:-2", "m=1"):
        with pytest.raises(ImproperlyConfigured, match="MEMWEB_LLM_PRICES"):
            read_prices(bad)


def test_it_refuses_to_start_with_a_bad_value():
    result = _manage("check", DEBUG="perhaps")
    assert result.returncode != 0
    assert "DEBUG='perhaps' is not a boolean" in result.stderr


def test_it_refuses_the_onnx_backend_for_bge_m3(tmp_path):
    result = _manage("check", MEMWEB_EMBEDDING_MODEL="bge-m3", MEMWEB_EMBEDDING_MODEL_PATH=str(tmp_path),
                     MEMWEB_EMBEDDING_BACKEND="onnx")
    assert result.returncode != 0
    assert "MEMWEB_EMBEDDING_BACKEND=onnx serves all-MiniLM-L6-v2 only; bge-m3 embeds with torch" in result.stderr


def test_it_refuses_to_start_with_a_trusted_proxy_that_is_not_an_address():
    result = _manage("check", MEMWEB_TRUSTED_PROXIES="10.0.0.0/8,proxy.internal")
    assert result.returncode != 0
    assert "MEMWEB_TRUSTED_PROXIES entry 'proxy.internal' is not an IP address or network" in result.stderr


def test_it_refuses_a_database_url_that_is_not_postgresql():
    result = _manage("check", DATABASE_URL="sqlite:///db.sqlite3")
    assert result.returncode != 0
    assert "DATABASE_URL must be a postgresql:// URL" in result.stderr


def test_it_passes_check_deploy_with_production_variables():
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING",
        DEBUG="false", SECRET_KEY="x" * 60 + "production-secret-key-of-good-length",
        ALLOWED_HOSTS="memweb.example.com", CSRF_TRUSTED_ORIGINS="https://memweb.example.com",
        SECURE_SSL_REDIRECT="true", SECURE_COOKIES="true", SECURE_HSTS_SECONDS="31536000",
    )
    assert result.returncode == 0, result.stderr
