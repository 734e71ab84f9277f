"""A package of castpile kernels made torch ops (docs/torch-ops.md): its kernel modules are transpiled on import."""

import castpile

castpile.install_import_hook(__name__)
