"""setuptools' build with one step added: the files the harness ships beside its code (bench scripts, device presets
and library tables, example models and device tables) go into the wheel as harness/data/, under the paths they have
in the checkout, where harness.core.shipped finds them. pyproject.toml holds everything else."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("bench_scripts/*.py", "devices/*.env", "devices/library.csv", "devices/library/*", "examples/*.csv",
           "examples/models/*")
"""What the wheel carries, as globs under the checkout (MANIFEST.in puts the same files in the sdist)."""


class BuildWithShippedFiles(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout's own folders
            return
        root = Path(__file__).resolve().parent
        for pattern in SHIPPED:
            for source in sorted(root.glob(pattern)):
                if source.is_file():
                    target = Path(self.build_lib, "harness", "data", source.relative_to(root))
                    self.mkpath(str(target.parent))
                    self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildWithShippedFiles})
