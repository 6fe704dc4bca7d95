"""Build hook: ship the repository's top-level vectors/ inside the wheel.

vectors/ is data, kept at the top of the repository (docs/design.md, layout). In a wheel it goes
inside the package, at reference/golden/vectors/, so an install adds no generic top-level name
to site-packages; reference.golden.store.vectors_dir() looks there first. Editable installs and
source checkouts read the top-level folder directly.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

VECTORS = Path(__file__).resolve().parent / "vectors"


class build_py_with_vectors(build_py):
    def run(self):
        super().run()
        if VECTORS.is_dir() and not self.editable_mode:
            shutil.copytree(VECTORS, Path(self.build_lib, "reference", "golden", "vectors"),
                            dirs_exist_ok=True)


setup(cmdclass={"build_py": build_py_with_vectors})
