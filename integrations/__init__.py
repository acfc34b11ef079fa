"""Adapters that give agent frameworks memweb's memory. Each imports its framework, which the
integrator installs; memweb itself never imports this package."""
