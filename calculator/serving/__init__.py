"""Serving engines: vLLM's and SGLang's accounting, the deployment plan and its layouts, the commands that start them."""
