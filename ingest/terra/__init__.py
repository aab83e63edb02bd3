"""What Terra sends and what we ask of it: the webhook signature, the envelope and payload of a
delivery (and the stream parse of a big one), and the Terra API client."""
