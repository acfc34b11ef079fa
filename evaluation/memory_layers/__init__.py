"""Memory layers as plug-ins: one object per kind of memory a run can compare (docs/MEMORY_LAYERS.md).

protocol.py defines what a layer does in a run; registry.py finds the installed layers. Each
built-in layer lives in its own module here: none, memorb, dmrm, both, naive_rag. Nothing outside
this package branches on a layer's name: it asks the layer.
"""
