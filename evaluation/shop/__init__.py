"""memweb's customer-service simulation environment, Django-free: the seeded shop (generator),
its tools, the 130 built-in tasks, task validation, the reward, the offline backends (scripted
agent, agenda-based customer) and the shop's episode. The rest of memweb reaches it only as the
`shop` environment (evaluation.environments.shop, docs/ENVIRONMENTS.md)."""
