"""`pip install .`: heddle's Python package, its extension module built by the project's own CMake
build (target _heddle, in ./build or $HEDDLE_BUILD_DIR) for the interpreter running pip.

Works offline: there is deliberately no pyproject.toml, so pip builds with the setuptools it
already has (Debian's python3-setuptools, visible in a `python3 -m venv --system-site-packages`)
instead of downloading build requirements into an isolated environment.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    """Builds heddle._heddle with CMake and copies it where setuptools expects it."""

    def build_extension(self, ext):
        build = os.environ.get("HEDDLE_BUILD_DIR", os.path.join(SOURCE, "build"))
        python = os.path.realpath(sys.executable)
        subprocess.check_call(
            ["cmake", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             "-DPython3_EXECUTABLE=" + python]
        )
        jobs = os.environ.get("JOBS", "2")
        subprocess.check_call(["cmake", "--build", build, "--target", "_heddle", "-j", jobs])
        built = glob.glob(os.path.join(build, "python", "heddle", "_heddle*.so"))
        if not built:
            raise RuntimeError("the CMake build made no heddle/_heddle*.so under " + build)
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(built[0], dest)


setup(
    name="heddle",
    version="0.1.0",
    description="One tensor program, many devices: plan, simulate and run partitioned models",
    packages=["heddle"],
    package_dir={"heddle": "python/heddle"},
    package_data={"heddle": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("heddle._heddle", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
)
