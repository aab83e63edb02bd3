"""Durable workflow engine (the public authoring API is re-exported here by the engine)."""
