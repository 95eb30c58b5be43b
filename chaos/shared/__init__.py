"""What the harness and the stand-ins share beside the exception tree: the process helper, the request
signing scheme and the Toxiproxy wire client. Imports nothing of chaos but chaos.errors and itself."""
