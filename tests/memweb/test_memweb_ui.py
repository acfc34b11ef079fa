"""The list and link filters of templates (memweb/templatetags/memweb_ui.py)."""
import pytest

from memweb.templatetags.memweb_ui import local_path


@pytest.mark.parametrize("url", ["/evaluation/episodes/1/", "/orbs/?status=pending&sort=-created_at"])
def test_it_keeps_a_path_on_this_site(url):
    assert local_path(url) == url


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JavaScript:alert(1)", "https://evil.example/", "//evil.example/x",
                                 "/\\evil.example/path", "/\\\t/evil.example", "/\t/evil.example", " /x", "x/y", ""])
def test_it_drops_a_link_that_could_run_script_or_leave_the_site(url):
    assert local_path(url) == ""
