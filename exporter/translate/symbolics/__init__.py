"""Built-in symbolic functions, one module per op family. Importing registers them.

Every module of this package whose name does not start with `_` is imported, in name order: a
new op family is a new module here, nothing else to edit.
"""

from __future__ import annotations

import importlib
import pkgutil

for _family in pkgutil.iter_modules(__path__):
    if not _family.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_family.name}")
