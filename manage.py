#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
    from django.core.management import execute_from_command_line

    from memweb.embedded_db import ensure_configured

    ensure_configured()
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
