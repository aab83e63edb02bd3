"""Every SQL statement of ingest, by the job it serves: deliveries (the webhook's insert, consume
tickets, trace rows), consumer (claims, outcomes, bodies, due rows) and rows (typed-table upserts,
the daily merge, sync reads). Nothing outside this package writes SQL text.

Statements are named constants or small functions that build one shape of statement once (cached);
each says in one line what it does. PostgreSQL and SQLite differences live here, never in callers.
"""
