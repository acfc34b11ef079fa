"""The shop an episode acts on: tool calls go through here and are recorded, each with its time."""
from evaluation.environments.world import ToolWorld
from evaluation.shop.tools import tool_execute


class ShopEnv(ToolWorld):
    """The shop an episode acts on, recording every call and the transcript messages it makes."""

    def __init__(self, state: dict):
        super().__init__(state, tool_execute, transfer_tool="transfer_to_human")
