"""τ²-bench's retail domain as a memweb environment: reading the benchmark (source.py), its 16 tools
(tools.py) on a copy-on-write database (database.py), its reward (reward.py), the offline players
(players.py) and the environment object (environment.py). Django-free."""
from evaluation.environments.tau2_retail.environment import TAU2_RETAIL, Tau2RetailEnvironment

__all__ = ["TAU2_RETAIL", "Tau2RetailEnvironment"]
