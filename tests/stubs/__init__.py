"""Local stand-ins for the network services the package talks to, started by tests on 127.0.0.1.

- :mod:`tests.stubs.openai_server`: an OpenAI-compatible chat-completions server that replies from a
  script and can inject faults (HTTP errors, stalls, truncated bodies, broken tool calls).
- :mod:`tests.stubs.langsmith_recorder`: an endpoint that records what the LangSmith client posts.

Both record every request, so tests check the wire format and that secrets stay out of bodies.
"""
