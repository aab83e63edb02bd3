"""The SQL of ops' small database checks (health, the silent-connection watch), one constant each.

ops' other statements live in its two stores of their own: auditstore.py and ratestore.py.
"""

# /healthz: the database answers.
PING = "SELECT 1"
# dbwatch: is this backend running a statement? Asked on a connection of the watch's own.
BACKEND_STATE = "SELECT state FROM pg_stat_activity WHERE pid = %s"
