"""The calculation engine of the guide: exact model memory, no Streamlit.

Import what you need from the submodules (`calculator.memory.estimate`, `calculator.core.precision`, ...);
importing the package itself is free, and torch is imported only when a model is built.
"""

import os

# huggingface_hub reads these once, when it is first imported (by transformers in a build worker
# too): no telemetry, and none of its agent detection, which fetches a registry from the endpoint
# and writes it into HF_HOME. The guide's own Hub reads send neither (models/hub_http.py).
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

