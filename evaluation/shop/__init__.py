"""memweb's customer-service simulation environment, Django-free: the seeded shop (generator),
its tools, the 130 built-in tasks, task validation, the reward, the offline backends (scripted
agent, agenda-based customer) and the episode loop. The Django app around it stores tasks and
episodes and adds the LLM backends and the memory hook."""
