"""`vedana mcp`: the knowledge base for AI assistants over the Model Context Protocol."""
