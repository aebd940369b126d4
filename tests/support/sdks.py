"""The providers' SDKs (anthropic, openai, google-genai), as the tests that drive them import them:
named here, imported at their first use (``support.lazy``), so that collecting a file that uses them
costs a worker nothing."""

from __future__ import annotations

from support.lazy import lazy

anthropic = lazy("anthropic")
openai = lazy("openai")
genai = lazy("google.genai")
genai_errors = lazy("google.genai.errors")
gtypes = lazy("google.genai.types")
