"""memweb's memory as an MCP server (the official `mcp` SDK), for any MCP-capable agent.

The server holds no rules of its own: every tool and resource is one call to memweb's JSON API made
with the caller's API key (`gateway`), so the key's scopes, its workspace and the review gate are
checked where they are for every other agent. `server` declares the tools and resources;
`manage.py mcp_serve` serves them over stdio or streamable HTTP (docs/MCP.md).
"""
