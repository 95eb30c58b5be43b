"""What the harness and the stand-ins share beside the exception tree: the process helper, the request
signing scheme, the Toxiproxy wire client and a log's last error line. Imports nothing of chaos but
chaos.errors and itself."""
