"""ctxwise: keep the working context of tool-using LLM agents inside a budget."""
__version__ = "0.1.0"
