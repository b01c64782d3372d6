"""Built-in plugin: importers of public production traces (`shock trace import`)."""

from shock.api import Register, hookimpl
from shock.traces.importers import BUILT_IN_IMPORTERS


@hookimpl
def register_trace_importers(register: Register) -> None:
    for importer in BUILT_IN_IMPORTERS:
        register(importer)
