"""Test-run settings shared by pytest and the notebook kernels nbval starts (they inherit the environment)."""

import os

# The test run always uses the offline tutorial model and services it starts itself,
# whatever LLM or service this machine has configured.
os.environ["CHATLAB_LLM"] = "offline"
os.environ.pop("CHAT_HISTORY_SERVICE_URL", None)
