"""No memory: the baseline every memory layer is compared with. It retrieves and learns nothing."""
from evaluation.memory_layers.protocol import MemoryLayer
from evaluation.memory_layers.registry import NO_MEMORY


class NoMemory(MemoryLayer):
    name, label = NO_MEMORY, "no memory"
    remembers = False
