"""What the benchmarks and the tests both use: the scripted OpenAI-compatible server
(fake_openai_server.py). The tests import it from here; nothing here imports tests/."""
