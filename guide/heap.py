"""Keep the garbage collector off what imports built.

Streamlit runs a full collection after every script run (`runner.postScriptGC`, on by default,
so that a run's cyclic garbage does not wait for Python's own thresholds). A full collection
walks every object the collector tracks, and in the server most of them were made by imports
(Streamlit, plotly, pandas, the engine's tables) and live as long as the process: measured
with py-spy on the serving chapter, 155 ms of the 283 ms the page's thread ran per case change
went to that walk, holding the GIL while the replies waited to be sent.

`gc.freeze()` moves every tracked object into a generation the collector never walks. A
frozen object is still freed when nothing refers to it (reference counting is not the
collector); it is only kept if it ends in a reference cycle. So a run freezes, as it starts,
only if modules were imported since the last freeze (collecting first): the set of modules is
finite, so it happens a bounded number of times in a server's life, and what it may keep is
bounded too (the few sessions alive at those moments). Every later full collection walks only
what was made since.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_when_frozen = 0


def freeze_what_imports_built() -> bool:
    """Collect, then freeze the collector's objects, if modules were imported since the last
    time (called as a page starts: the previous runs' imports are done). True if it froze."""
    global _modules_when_frozen
    if len(sys.modules) == _modules_when_frozen:
        return False
    with _lock:
        if len(sys.modules) == _modules_when_frozen:
            return False
        gc.collect()
        gc.freeze()
        _modules_when_frozen = len(sys.modules)
    return True
